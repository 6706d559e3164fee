package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// result holds every figure of one workload, measured in one run.
type result struct {
	Workload workload `json:"workload"`
	// Broker limits: Kafka's producer perf test into the target, consumer perf test from the source.
	ProducerRPS  float64    `json:"broker_producer_records_per_s"`
	ProducerMBPS float64    `json:"broker_producer_mb_per_s"`
	ConsumerRPS  float64    `json:"broker_consumer_records_per_s"`
	ConsumerMBPS float64    `json:"broker_consumer_mb_per_s"`
	MM2          *contender `json:"mm2,omitempty"`
	Mirror       *contender `json:"mirror_run"`
	// Serve is `mirror serve` in fetch mode, driven by the genuine Knative dispatcher.
	Serve *contender `json:"mirror_serve,omitempty"`
}

func (h *harness) runWorkload(ctx context.Context, w workload, opts options) (result, error) {
	res := result{Workload: w}
	stamp := time.Now().Format("150405")
	topics := make([]string, w.Topics)
	for i := range topics {
		topics[i] = fmt.Sprintf("b%s-%s-%d", stamp, strings.ToLower(w.Name), i)
	}
	if err := h.seed(ctx, w, topics); err != nil {
		return res, fmt.Errorf("seeding: %w", err)
	}
	if w.Topics == 1 && w.Records >= 10_000 {
		scratch := "perf-" + topics[0]
		if _, err := h.tgtAdm.CreateTopics(ctx, w.Partitions, 1, nil, scratch); err != nil {
			return res, err
		}
		var err error
		if res.ProducerRPS, res.ProducerMBPS, err = h.producerPerf(ctx, h.target, scratch, w.Records, w.Size); err != nil {
			return res, fmt.Errorf("producer perf test: %w", err)
		}
		if res.ConsumerRPS, res.ConsumerMBPS, err = h.consumerPerf(ctx, h.source, topics[0], w.Records); err != nil {
			return res, fmt.Errorf("consumer perf test: %w", err)
		}
		_, _ = h.tgtAdm.DeleteTopics(ctx, scratch)
	}
	if w.Resumed {
		// A first, unmeasured run per contender leaves its topics and positions behind.
		if err := h.warmUp(ctx, w, topics, opts); err != nil {
			return res, fmt.Errorf("first (unmeasured) runs: %w", err)
		}
		if err := h.produce(ctx, w, topics); err != nil {
			return res, fmt.Errorf("producing the records of the resumed runs: %w", err)
		}
	}
	if !opts.skipMM2 {
		c, err := h.runMM2(ctx, w, topics)
		if err != nil {
			return res, fmt.Errorf("MirrorMaker 2: %w", err)
		}
		res.MM2 = &c
	}
	if opts.skipMirror {
		res.Mirror = &contender{}
		return res, nil
	}
	c, err := h.runMirror(ctx, w, topics)
	if err != nil {
		return res, fmt.Errorf("mirror run: %w", err)
	}
	res.Mirror = &c
	if !opts.skipServe {
		c, err := h.runServe(ctx, w, topics, false)
		if err != nil {
			return res, fmt.Errorf("mirror serve: %w", err)
		}
		res.Serve = &c
	}
	return res, nil
}

// warmUp runs every contender once over the records already produced, without measuring.
func (h *harness) warmUp(ctx context.Context, w workload, topics []string, opts options) error {
	if !opts.skipMM2 {
		if _, err := h.runMM2(ctx, w, topics); err != nil {
			return fmt.Errorf("MirrorMaker 2: %w", err)
		}
	}
	if opts.skipMirror {
		return nil
	}
	if _, err := h.runMirror(ctx, w, topics); err != nil {
		return fmt.Errorf("mirror run: %w", err)
	}
	if !opts.skipServe {
		if _, err := h.runServe(ctx, w, topics, true); err != nil {
			return fmt.Errorf("mirror serve: %w", err)
		}
	}
	return nil
}

const tableHeader = "| workload | broker producer rec/s (MB/s) | broker consumer rec/s (MB/s) | MM2 first record | MM2 done | MM2 rec/s (MB/s) | MM2 peak RSS | mm2go first record | mm2go first record after brokers answer | mm2go done | mm2go rec/s (MB/s) | mm2go peak RSS | mm2go CPU s | mm2go / MM2 | mm2go / producer limit | serve done | serve rec/s (MB/s) | serve peak RSS | serve / run | dispatcher start | dispatcher req/s |\n" +
	"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"

func (r result) markdownRow() string {
	na := "n/a"
	rate := func(rps, mbps float64) string {
		if rps == 0 {
			return na
		}
		return fmt.Sprintf("%.0f (%.1f)", rps, mbps)
	}
	dur := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	mib := func(kib int64) string { return fmt.Sprintf("%.0f MiB", float64(kib)/1024) }
	mm2First, mm2Done, mm2Rate, mm2RSS, vsMM2 := na, na, na, na, na
	if r.MM2 != nil {
		mm2First, mm2Done, mm2Rate, mm2RSS = dur(r.MM2.FirstRecord), dur(r.MM2.Done), rate(r.MM2.RecordsPS, r.MM2.MBPS), mib(r.MM2.PeakRSSKiB)
		vsMM2 = fmt.Sprintf("%.2f×", r.MM2.Done.Seconds()/r.Mirror.Done.Seconds())
	}
	vsProd := na
	if r.ProducerRPS > 0 {
		vsProd = fmt.Sprintf("%.2f×", r.Mirror.RecordsPS/r.ProducerRPS)
	}
	m := r.Mirror
	svDone, svRate, svRSS, svVsRun, dStart, dRPS := na, na, na, na, na, na
	if s := r.Serve; s != nil {
		svDone, svRate, svRSS = dur(s.Done), rate(s.RecordsPS, s.MBPS), mib(s.PeakRSSKiB)
		dStart, dRPS = dur(s.DispatcherStart), fmt.Sprintf("%.0f (%d requests)", s.DispatcherRPS, s.DispatcherRequests)
		if s.Done > 0 && m.Done > 0 {
			svVsRun = fmt.Sprintf("%.2f×", m.Done.Seconds()/s.Done.Seconds())
		}
	}
	own := na
	if m.BurstFirstRecordMS >= 0 {
		own = fmt.Sprintf("%dms", m.BurstFirstRecordMS)
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %s | %s | %s | %s | %s | %s | %s | %s |",
		r.Workload.Name, rate(r.ProducerRPS, r.ProducerMBPS), rate(r.ConsumerRPS, r.ConsumerMBPS),
		mm2First, mm2Done, mm2Rate, mm2RSS,
		dur(m.FirstRecord), own, dur(m.Done), rate(m.RecordsPS, m.MBPS), mib(m.PeakRSSKiB), m.CPUSeconds, vsMM2, vsProd,
		svDone, svRate, svRSS, svVsRun, dStart, dRPS)
}

func (r report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# mm2go benchmark\n\nRun %s → %s on %s, %s CPUs (%s), %s, %s, %s.\n\n",
		r.Started.Format(time.RFC3339), r.Finished.Format(time.RFC3339), r.Machine["cpu"], r.Machine["cpus"],
		r.Machine["memory"], r.Machine["go"], r.Machine["java"], r.Machine["goos"]+"/"+r.Machine["goarch"])
	b.WriteString("Times are from process start, as the harness sees records arrive on the target (it polls every 5 ms). \"done\" = every record visible on the target. ")
	b.WriteString("\"mm2go first record after brokers answer\" is mirror run's own figure: from its burst's first request to a broker to the first record the target acknowledged. ")
	b.WriteString("A workload named -resumed measures a second run on a flow whose topics and positions a first run left behind (only the new records are copied): the cost of a scale-to-zero instance picking up where it stopped. tiny-10 is a flow's very first run, which also creates the remote and internal topics. ")
	b.WriteString("mm2go / MM2 compares time to done (higher is better for mm2go); mm2go / producer limit compares records/s with Kafka's producer perf test into the target. ")
	b.WriteString("serve = `mirror serve` in fetch mode driven by the genuine Knative KafkaSource dispatcher (dispatcher-loom from ../shared/knative-dispatcher; ordered, key type byte-array, the delivery settings of knative/kafkasource.yaml); its times start when the dispatcher is launched, the function being ready already, so they include the dispatcher's own start (dispatcher start: launch to partition assignment); dispatcher req/s = its requests for the backlog (one per record; at most the first 30 s after done), between its first and last; serve / run compares time to done with `mirror run` (higher is better).\n\n")
	b.WriteString(tableHeader + "\n")
	for _, res := range r.Results {
		b.WriteString(res.markdownRow() + "\n")
	}
	return b.String()
}
