package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// result holds every figure of one workload, measured in one run.
type result struct {
	Workload workload `json:"workload"`
	// Broker limits with Kafka's default client settings (but acks=all): the producer perf
	// test into the target, the consumer perf test from the source.
	ProducerRPS  float64 `json:"broker_producer_records_per_s"`
	ProducerMBPS float64 `json:"broker_producer_mb_per_s"`
	ConsumerRPS  float64 `json:"broker_consumer_records_per_s"`
	ConsumerMBPS float64 `json:"broker_consumer_mb_per_s"`
	// Ceiling are the producer perf test's large-batch attempts into the target.
	Ceiling    []perfAttempt `json:"ceiling_producer_perf,omitempty"`
	Contenders []*contender  `json:"contenders"`
	Ratios     ratios        `json:"ratios"`
	// Skipped says which contenders did not run on this workload, and why.
	Skipped []string `json:"skipped,omitempty"`
}

// serveUnsupported says why mirror serve cannot run a workload here ("" if it can).
func serveUnsupported(w workload) string {
	if w.Compression == "lz4" {
		// Seen here: the dispatcher's consumer fails every fetch with
		// ClassNotFoundException: net.jpountz.lz4.LZ4JavaSafeCompressor.
		return "the Knative dispatcher build the bench runs (a minimised jar) lacks lz4-java's LZ4JavaSafeCompressor class, so it cannot read lz4 batches"
	}
	return ""
}

// ratios compare mm2go's `mirror run` with the others on one workload (0: not measured).
type ratios struct {
	// BetterMM2 names the MM2 row with the shorter time to done; VsBetterMM2 is its time to
	// done over mirror run's (end to end, higher is better for mm2go).
	BetterMM2   string  `json:"better_mm2,omitempty"`
	VsBetterMM2 float64 `json:"mirror_vs_better_mm2,omitempty"`
	// CeilingRPS is the best rate into the target of the producer perf attempts and the raw
	// copy (CeilingBy says which); VsCeiling is mirror run's records/s over it.
	CeilingRPS float64 `json:"ceiling_records_per_s,omitempty"`
	CeilingBy  string  `json:"ceiling_by,omitempty"`
	VsCeiling  float64 `json:"mirror_vs_ceiling,omitempty"`
	// VsRaw is mirror run's records/s over the raw copy's.
	VsRaw float64 `json:"mirror_vs_raw_copy,omitempty"`
	// RoomyVsCeiling is the 256 MiB mirror run's records/s over the ceiling.
	RoomyVsCeiling float64 `json:"roomy_mirror_vs_ceiling,omitempty"`
	// SplitVsOne is one mirror run's time to done over the two split processes'.
	SplitVsOne float64 `json:"split_vs_one,omitempty"`
}

func (r *result) get(name string) *contender {
	for _, c := range r.Contenders {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func (h *harness) runWorkload(ctx context.Context, w workload, opts options) (result, error) {
	res := result{Workload: w}
	stamp := time.Now().Format("150405")
	topics := make([]string, w.Topics)
	for i := range topics {
		topics[i] = fmt.Sprintf("b%s-%s-%d", stamp, strings.ToLower(w.Name), i)
	}
	if !opts.keepTopics {
		defer h.deleteTopics(context.Background(), sourceCluster, topics)
	}
	if err := h.seed(ctx, w, topics); err != nil {
		return res, fmt.Errorf("seeding: %w", err)
	}
	if w.perfSeeded() && !w.ScaleOut {
		scratch := "perf-" + topics[0]
		if _, err := h.tgtAdm.CreateTopics(ctx, w.Partitions, 1, nil, scratch); err != nil {
			return res, err
		}
		var err error
		if res.ProducerRPS, res.ProducerMBPS, err = h.producerPerf(ctx, h.target, scratch, w, w.Records); err != nil {
			return res, fmt.Errorf("producer perf test: %w", err)
		}
		if res.ConsumerRPS, res.ConsumerMBPS, err = h.consumerPerf(ctx, h.source, topics[0], w.Records); err != nil {
			return res, fmt.Errorf("consumer perf test: %w", err)
		}
		_, _ = h.tgtAdm.DeleteTopics(ctx, scratch)
		if !opts.skipCeiling {
			procs, err := parseProcs(opts.ceilingProcs)
			if err != nil {
				return res, err
			}
			if res.Ceiling, err = h.ceilingPerf(ctx, w, procs); err != nil {
				return res, fmt.Errorf("ceiling: %w", err)
			}
		}
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
	type run struct {
		name string
		skip bool
		fn   func() (contender, error)
	}
	if w.ScaleOut {
		if err := h.setScaleOutQuota(ctx, true); err != nil {
			return res, err
		}
		defer func() {
			if err := h.setScaleOutQuota(context.WithoutCancel(ctx), false); err != nil {
				h.logger.Warn("target client quota not removed", "err", err)
			}
		}()
	}
	runs := []run{
		// The raw copy has no positions: a resumed workload's second run is not its kind.
		{nameRaw, opts.skipCeiling || w.Resumed, func() (contender, error) { return h.runRaw(ctx, w, topics) }},
		{nameMM2, opts.skipMM2, func() (contender, error) { return h.runMM2(ctx, w, topics, false) }},
		{nameMM2Tuned, opts.skipMM2 || opts.skipTuned, func() (contender, error) { return h.runMM2(ctx, w, topics, true) }},
		{nameMirror, opts.skipMirror, func() (contender, error) { return h.runMirror(ctx, w, topics, mirrorDefault) }},
		{nameBaseline, opts.skipMirror || h.baselineBin == "", func() (contender, error) { return h.runMirror(ctx, w, topics, mirrorBaseline) }},
		{nameEOS, opts.skipMirror || opts.skipEOS || w.Resumed, func() (contender, error) { return h.runMirror(ctx, w, topics, mirrorEOS) }},
		{nameRecords, opts.skipMirror || opts.skipVariants || w.Resumed, func() (contender, error) { return h.runMirror(ctx, w, topics, mirrorRecords) }},
		{nameRoomy, opts.skipMirror || opts.skipVariants || w.Resumed, func() (contender, error) { return h.runMirror(ctx, w, topics, mirrorRoomy) }},
		{nameSplit, opts.skipMirror || !w.Split, func() (contender, error) { return h.runSplit(ctx, w, topics) }},
		{nameServe, opts.skipMirror || opts.skipServe, func() (contender, error) { return h.runServe(ctx, w, topics, false) }},
	}
	if w.ScaleOut {
		runs = []run{
			{nameScale1, opts.skipMirror, func() (contender, error) { return h.runGroup(ctx, w, topics, 1, nameScale1, "scale1") }},
			{nameScale2, opts.skipMirror, func() (contender, error) { return h.runGroup(ctx, w, topics, 2, nameScale2, "scale2") }},
			{nameScale4, opts.skipMirror, func() (contender, error) { return h.runGroup(ctx, w, topics, 4, nameScale4, "scale4") }},
		}
	}
	rounds := max(opts.rounds, 1)
	if w.Resumed {
		rounds = 1 // its second runs resume the first ones: there is one of each
	}
	byName := map[string][]*contender{}
	var order []string
	for h.round = 0; h.round < rounds; h.round++ {
		// Every other round runs the contenders in reverse order (A B, B A, A B, ...): a
		// contender that always ran first would always meet the brokers just after the seeding
		// or the previous round's deletions.
		turn := runs
		if h.round%2 == 1 {
			turn = slices.Clone(runs)
			slices.Reverse(turn)
		}
		for _, r := range turn {
			if r.skip || (h.round > 0 && r.name == nameServe) {
				continue
			}
			if why := serveUnsupported(w); r.name == nameServe && why != "" {
				res.Skipped = append(res.Skipped, r.name+": "+why)
				h.logger.Warn("contender skipped", "workload", w.Name, "name", r.name, "why", why)
				continue
			}
			c, err := h.runContender(ctx, w, topics, r.name, r.fn, opts)
			if err != nil {
				return res, err
			}
			if byName[r.name] == nil {
				order = append(order, r.name)
			}
			byName[r.name] = append(byName[r.name], c)
		}
	}
	h.round = 0
	for _, name := range order {
		res.Contenders = append(res.Contenders, medianRun(byName[name]))
	}
	res.Ratios = res.ratios()
	return res, nil
}

// runContender runs one contender once, checks its copy and logs the outcome. A contender
// that fails gets a row that says why; only the end of ctx ends the workload.
func (h *harness) runContender(ctx context.Context, w workload, topics []string, name string, fn func() (contender, error), opts options) (*contender, error) {
	h.logger.Info("contender", "workload", w.Name, "name", name, "round", h.round+1)
	began, loadBefore := time.Now(), loadAvg()
	c, err := fn()
	c.Load = loadBefore + " -> " + loadAvg()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s: %w", name, ctx.Err())
	}
	ran := time.Since(began)
	if err != nil {
		// One contender failing does not end a long run: its row says why.
		c.Name, c.Mismatch = name, "run failed: "+err.Error()
		h.logger.Error("contender failed", "workload", w.Name, "name", name, "err", err)
		if !opts.keepTopics && len(c.remote) > 0 {
			h.deleteTopics(ctx, targetCluster, c.remote)
		}
	} else {
		h.check(ctx, w, topics, &c, opts)
	}
	h.logger.Info("contender done", "workload", w.Name, "name", name, "round", h.round+1, "done", c.Done.Round(time.Millisecond).String(),
		"ran", ran.Round(time.Millisecond).String(), "checked", (time.Since(began) - ran).Round(time.Millisecond).String(), "load", c.Load, "mismatch", c.Mismatch)
	return &c, nil
}

// medianRun returns the row of a contender that ran len(runs) times: the run whose copy
// matched with the median done time (the earlier of the middle two), with the spread of every
// matched run in Rounds; with no run matched, the first one, failure and all.
func medianRun(runs []*contender) *contender {
	var ok []*contender
	for _, c := range runs {
		if c.ok() {
			ok = append(ok, c)
		}
	}
	if len(ok) == 0 {
		out := *runs[0]
		if len(runs) > 1 {
			out.Rounds = &roundSpread{Runs: len(runs), FirstFailure: runs[0].Mismatch}
		}
		return &out
	}
	slices.SortStableFunc(ok, func(a, b *contender) int { return cmp.Compare(a.Done, b.Done) })
	out := *ok[(len(ok)-1)/2]
	if len(runs) == 1 {
		return &out
	}
	sp := &roundSpread{Runs: len(runs), Matched: len(ok), DoneMin: ok[0].Done, DoneMax: ok[len(ok)-1].Done}
	for i, c := range ok {
		if i == 0 || c.CPUSecondsPerGB < sp.CPUPerGBMin {
			sp.CPUPerGBMin = c.CPUSecondsPerGB
		}
		sp.CPUPerGBMax = max(sp.CPUPerGBMax, c.CPUSecondsPerGB)
		sp.PeakRSSMaxKiB = max(sp.PeakRSSMaxKiB, c.PeakRSSKiB)
	}
	for _, c := range runs {
		if !c.ok() && sp.FirstFailure == "" {
			sp.FirstFailure = c.Mismatch
		}
	}
	out.Rounds = sp
	return &out
}

// check verifies a contender's copy, notes its remote topics' compression.type, and (unless
// -keep-topics) deletes its remote topics.
func (h *harness) check(ctx context.Context, w workload, topics []string, c *contender, opts options) {
	if len(c.remote) == 0 {
		return
	}
	verify := h.verify
	if c.committed {
		verify = h.verifyCommitted
	}
	verified, err := verify(ctx, w, topics, c.remote)
	if err != nil {
		c.Mismatch = err.Error()
		h.logger.Error("copy differs from the source: left out of the ratios", "contender", c.Name, "workload", w.Name, "err", err)
	} else {
		c.Verified = verified
	}
	c.TargetCompression = h.topicCompression(ctx, c.remote[0])
	if !opts.keepTopics {
		h.deleteTopics(ctx, targetCluster, c.remote)
	}
}

func (r result) ratios() ratios {
	var out ratios
	m := r.get(nameMirror)
	var better *contender
	for _, name := range []string{nameMM2, nameMM2Tuned} {
		if c := r.get(name); c.ok() && (better == nil || c.Done < better.Done) {
			better = c
		}
	}
	if better != nil && m.ok() {
		out.BetterMM2, out.VsBetterMM2 = better.Name, better.Done.Seconds()/m.Done.Seconds()
	}
	if b := bestAttempt(r.Ceiling); b.RecordsPS > 0 {
		out.CeilingRPS, out.CeilingBy = b.RecordsPS, fmt.Sprintf("producer perf, %d process(es), %s", b.Processes, strings.Join(b.Props, " "))
	}
	if raw := r.get(nameRaw); raw.ok() {
		if raw.RecordsPS > out.CeilingRPS {
			out.CeilingRPS, out.CeilingBy = raw.RecordsPS, nameRaw
		}
		if m.ok() {
			out.VsRaw = m.RecordsPS / raw.RecordsPS
		}
	}
	if out.CeilingRPS > 0 && m.ok() {
		out.VsCeiling = m.RecordsPS / out.CeilingRPS
	}
	if big := r.get(nameRoomy); out.CeilingRPS > 0 && big.ok() {
		out.RoomyVsCeiling = big.RecordsPS / out.CeilingRPS
	}
	if sp := r.get(nameSplit); sp.ok() && m.ok() {
		out.SplitVsOne = m.Done.Seconds() / sp.Done.Seconds()
	}
	return out
}

func parseProcs(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 16 {
			return nil, fmt.Errorf("-ceiling-procs %q: want comma-separated process counts from 1 to 16", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// warmUp runs every contender with positions once over the records already produced,
// without measuring.
func (h *harness) warmUp(ctx context.Context, w workload, topics []string, opts options) error {
	if !opts.skipMM2 {
		if _, err := h.runMM2(ctx, w, topics, false); err != nil {
			return fmt.Errorf("MirrorMaker 2: %w", err)
		}
		if !opts.skipTuned {
			if _, err := h.runMM2(ctx, w, topics, true); err != nil {
				return fmt.Errorf("MirrorMaker 2 tuned: %w", err)
			}
		}
	}
	if opts.skipMirror {
		return nil
	}
	if _, err := h.runMirror(ctx, w, topics, mirrorDefault); err != nil {
		return fmt.Errorf("mirror run: %w", err)
	}
	if w.Split {
		if _, err := h.runSplit(ctx, w, topics); err != nil {
			return fmt.Errorf("mirror run ×2: %w", err)
		}
	}
	if !opts.skipServe && serveUnsupported(w) == "" {
		if _, err := h.runServe(ctx, w, topics, true); err != nil {
			return fmt.Errorf("mirror serve: %w", err)
		}
	}
	return nil
}

// contenderSetting describes one contender's settings for the report.
type contenderSetting struct {
	Name     string `json:"name"`
	Settings string `json:"settings"`
}

func contenderSettings() []contenderSetting {
	return []contenderSetting{
		{nameProducer, "Kafka's ProducerPerformance into a fresh target topic with the workload's partitions and records (for a compressed workload, the same payload lines), JVM -Xms1g -Xmx1g with the full JIT; per attempt: acks=all, batch.size=262144 (and 1048576 for one process), linger.ms=10, buffer.memory=134217728, the workload's compression.type; 1 and 2 processes in parallel (-ceiling-procs), each with its share of the records. Rate = all records over the longest process's own send time (JVM start excluded); CPU includes the JVMs' start. Only on single-topic workloads."},
		{nameRaw, "test/bench/raw.go as a child process: franz-go " + "consumer (ConsumePartitions from the start, franz-go's default fetch sizes, 250 ms max wait) and producer with mm2go's default copy settings (same partition, idempotent, acks=all, linger 5 ms, 20 MiB / 131072 records buffered, the workload's compression, batches up to 1 MiB as mm2go's); target topics created before the clock starts; no positions, no offset syncs."},
		{nameMM2, "genuine MirrorMaker 2 (dedicated mode, connect-mirror " + "jars as listed), the interoperability tests' settings (test/testkit MM2Properties: refresh intervals 2 s, checkpoints every 2 s, heartbeats every 1 s, offset flush 1 s) and tasks.max=2; JVM -Xms128m -Xmx512m, G1; for compressed workloads target.producer.compression.type as the source's."},
		{nameMM2Tuned, "as MM2, plus " + strings.ReplaceAll(strings.TrimSpace(mm2Tuning), "\n", ", ") + "; JVM -Xms1g -Xmx1g (KAFKA_HEAP_OPTS=-Xmx1g -Xms1g)."},
		{nameMirror, "functions/mirror `mirror run`, a flow of its own per workload, default settings (batches forwarded whole where the target producer writes their codec, 8 MiB in flight over up to 16 partitions down to 2 MiB over 64 or more, fetches of 512 KiB growing by 4 KiB per partition over 128 up to 4 MiB, scaled by compression, target producer linger 5 ms, acks=all, idempotent; soft memory limit 40 MiB), replication factors 1; for compressed workloads MM2_TARGET_PRODUCER_COMPRESSION_TYPE as the source's."},
		{nameBaseline, "as mirror run, built from the -baseline revision (the report's machine line names its commit): a before/after comparison of two builds, interleaved round by round on the same brokers."},
		{nameEOS, "as mirror run, with MM2_EXACTLY_ONCE=true: records and positions in transactions (a transactional producer per partition being copied, at most 64 at once; 8 MiB in flight however many partitions), read_committed source reads. Done when the process exits; checked by a read_committed reader of the target (every partition holds the source's records once, in order, a sample byte-identical)."},
		{nameRecords, "as mirror run, with batch forwarding off (MM2_FORWARD_BATCHES=false): every record decoded by franz-go's consumer and encoded again by its producer."},
		{nameRoomy, "as mirror run, with the memory the raw copy takes spent on larger budgets: " + strings.Join(roomyEnv, ", ") + "."},
		{nameSplit, "two `mirror run` processes of one flow started together with MM2_BURST_GROUP set, otherwise as mirror run; CPU is both processes' sum, peak RSS the larger of the two."},
		{"mirror run ×n (burst group, quota)", "scale-out workload only: n = 1, 2, 4 `mirror run` processes of one flow started together with MM2_BURST_GROUP set, each with its own POD_NAME (so its own client id), while the target limits every client id to 2 MiB/s of produce (measured over 2 one-second windows): one instance's bandwidth is the limit, not the machine."},
		{nameServe, "`mirror serve` in fetch mode driven by the genuine Knative KafkaSource dispatcher (ordered, key type byte-array, knative/kafkasource.yaml's delivery settings); times from the dispatcher's launch (the function ready first); CPU and RSS are the function's only."},
	}
}

func (r report) markdown() string {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "# mm2go benchmark\n\nRun %s → %s, scale %g.\n\n", r.Started.Format(time.RFC3339), r.Finished.Format(time.RFC3339), r.Scale)
	fmt.Fprintf(&b, "Machine: %s, %s CPUs, %s memory, Linux %s (%s/%s); both brokers, every contender and the harness share it. ",
		m["cpu"], m["cpus"], m["memory"], m["kernel"], m["goos"], m["goarch"])
	fmt.Fprintf(&b, "Versions: mm2go %s built with %s, franz-go %s; Kafka (brokers, MM2, perf tools) %s on %s.\n\n",
		m["mm2go commit"], m["go"], m["franz-go"], m["kafka"], m["java"])
	if c := m["baseline commit"]; c != "" {
		fmt.Fprintf(&b, "Baseline (%s): functions/mirror built from commit %s.\n\n", nameBaseline, c)
	}
	b.WriteString("Every copy is checked: each remote partition ends at the source's end offset (same partition, same offsets: nothing lost, nothing twice), and a sample of records at the head and tail of up to 4 partitions of up to 4 topics is byte-identical to the source (key, value, headers); a copy failing that is marked and left out of the ratios. ")
	b.WriteString("GB = 1e9 bytes of the source records' keys + values + headers, the same count for every contender. CPU = user + system time of the contender's processes from the OS (wait4 rusage; for MM2 the JVM). Peak RSS = the process's VmHWM. ")
	b.WriteString("Times are from process start, as the harness sees records arrive on the target (it polls every 5 ms); done = every record on the target. ")
	b.WriteString("first record after brokers answer = mirror run's own figure: from its burst's first request to a broker to the first record the target acknowledged; (topics ready N) = the part of it until the burst's remote topics were ready (on a new flow: created by the target broker and served).\n\n")
	b.WriteString("## Summary\n\n")
	b.WriteString("| workload | mirror run done | rec/s (MB/s) | better MM2 (done) | mm2go / better MM2 (end to end) | ceiling rec/s (by) | mm2go / ceiling | mm2go / raw copy | mm2go CPU s/GB (record by record) | mm2go peak RSS | first record after brokers answer | split ×2 vs one | 256 MiB mirror run / ceiling (peak RSS) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, res := range r.Results {
		b.WriteString(res.summaryRow() + "\n")
	}
	b.WriteString("\n## CPU-seconds per GB and peak RSS, every contender\n\n")
	names := []string{nameProducer, nameRaw, nameMM2, nameMM2Tuned, nameMirror, nameBaseline, nameRecords, nameRoomy, nameSplit, nameScale1, nameScale2, nameScale4, nameServe}
	b.WriteString("| workload |")
	for _, n := range names {
		fmt.Fprintf(&b, " %s CPU s/GB | %s peak RSS |", n, n)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|---|", len(names)) + "\n")
	for _, res := range r.Results {
		fmt.Fprintf(&b, "| %s |", res.Workload.Name)
		best := bestAttempt(res.Ceiling)
		if best.RecordsPS > 0 {
			fmt.Fprintf(&b, " %.1f | %s |", best.CPUSecondsPerGB, mib(best.PeakRSSKiB))
		} else {
			b.WriteString(" n/a | n/a |")
		}
		for _, n := range names[1:] {
			if c := res.get(n); c != nil {
				fmt.Fprintf(&b, " %.1f | %s |", c.CPUSecondsPerGB, mib(c.PeakRSSKiB))
			} else {
				b.WriteString(" n/a | n/a |")
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("\n## Every contender\n\n")
	b.WriteString(tableHeader + "\n")
	for _, res := range r.Results {
		b.WriteString(res.markdownTable() + "\n")
	}
	for _, res := range r.Results {
		for _, sk := range res.Skipped {
			fmt.Fprintf(&b, "\n%s: not run: %s.\n", res.Workload.Name, sk)
		}
	}
	b.WriteString("\n## Ceiling attempts (Kafka's producer perf test into the target)\n\n| workload | processes | producer settings | rec/s (MB/s) | CPU s | CPU s/GB | peak RSS |\n|---|---|---|---|---|---|---|\n")
	for _, res := range r.Results {
		for _, a := range res.Ceiling {
			fmt.Fprintf(&b, "| %s | %d | %s | %.0f (%.1f) | %.2f | %.1f | %s |\n", res.Workload.Name, a.Processes, strings.Join(a.Props, " "), a.RecordsPS, a.MBPS, a.CPUSeconds, a.CPUSecondsPerGB, mib(a.PeakRSSKiB))
		}
	}
	b.WriteString("\n## Workloads\n\n| workload | topics × partitions | records per topic | record bytes | source compression | total GB |\n|---|---|---|---|---|---|\n")
	for _, res := range r.Results {
		w := res.Workload
		comp := w.Compression
		if comp == "" {
			comp = "none"
		}
		extra := ""
		if w.Resumed {
			extra = " (resumed: measures a second run)"
		}
		fmt.Fprintf(&b, "| %s%s | %d × %d | %d | %d | %s | %.3f |\n", w.Name, extra, w.Topics, w.Partitions, w.Records, w.Size, comp, float64(w.totalBytes())/1e9)
	}
	b.WriteString("\n## Contenders' settings\n\n")
	for _, s := range r.Settings {
		fmt.Fprintf(&b, "* **%s**: %s\n", s.Name, s.Settings)
	}
	return b.String()
}

func mib(kib int64) string {
	if kib == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f MiB", float64(kib)/1024)
}

func dur(d time.Duration) string { return d.Round(time.Millisecond).String() }

func (r result) summaryRow() string {
	na := "n/a"
	m := r.get(nameMirror)
	if m == nil {
		return fmt.Sprintf("| %s | not run ||||||||||||", r.Workload.Name)
	}
	rt := r.Ratios
	x := func(v float64) string {
		if v == 0 {
			return na
		}
		return fmt.Sprintf("%.2f×", v)
	}
	better := na
	if rt.BetterMM2 != "" {
		better = fmt.Sprintf("%s (%s)", rt.BetterMM2, dur(r.get(rt.BetterMM2).Done))
	}
	ceiling := na
	if rt.CeilingRPS > 0 {
		by := rt.CeilingBy
		if by != nameRaw {
			b := bestAttempt(r.Ceiling)
			by = fmt.Sprintf("producer perf ×%d", b.Processes)
		}
		ceiling = fmt.Sprintf("%.0f (%s)", rt.CeilingRPS, by)
	}
	own := na
	if m.BurstFirstRecordMS >= 0 {
		own = fmt.Sprintf("%d ms", m.BurstFirstRecordMS)
		if m.BurstTopicsReadyMS >= 0 {
			own += fmt.Sprintf(" (topics ready %d)", m.BurstTopicsReadyMS)
		}
	}
	done := dur(m.Done)
	if m.Mismatch != "" {
		done += " (copy differs!)"
	}
	roomy := x(rt.RoomyVsCeiling)
	if big := r.get(nameRoomy); rt.RoomyVsCeiling > 0 {
		roomy += " (" + mib(big.PeakRSSKiB) + ")"
	}
	cpu := fmt.Sprintf("%.2f", m.CPUSecondsPerGB)
	if rec := r.get(nameRecords); rec.ok() {
		cpu += fmt.Sprintf(" (%.2f)", rec.CPUSecondsPerGB)
	}
	return fmt.Sprintf("| %s | %s | %.0f (%.1f) | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |",
		r.Workload.Name, done, m.RecordsPS, m.MBPS, better, x(rt.VsBetterMM2), ceiling, x(rt.VsCeiling), x(rt.VsRaw),
		cpu, mib(m.PeakRSSKiB), own, x(rt.SplitVsOne), roomy)
}

const tableHeader = "| workload | contender | first record | done | rec/s (MB/s) | CPU s | CPU s/GB | peak RSS | target topic compression.type | check | notes |\n" +
	"|---|---|---|---|---|---|---|---|---|---|---|"

// markdownTable returns the rows of every contender of the workload (and a row of Kafka's
// default-settings perf tests).
func (r result) markdownTable() string {
	var rows []string
	if r.ProducerRPS > 0 {
		rows = append(rows, fmt.Sprintf("| %s | Kafka perf tests, default settings + acks=all | | | producer into target %.0f (%.1f); consumer from source %.0f (%.1f) | | | | | | |",
			r.Workload.Name, r.ProducerRPS, r.ProducerMBPS, r.ConsumerRPS, r.ConsumerMBPS))
	}
	for _, c := range r.Contenders {
		check := "ok: " + c.Verified
		if strings.HasPrefix(c.Mismatch, "run failed") {
			check = "FAILED: " + c.Mismatch
		} else if c.Mismatch != "" {
			check = "DIFFERS: " + c.Mismatch
		}
		check = strings.Join(strings.Fields(check), " ")
		var notes []string
		if c.BurstFirstRecordMS >= 0 {
			note := fmt.Sprintf("first record after brokers answer %d ms", c.BurstFirstRecordMS)
			if c.BurstTopicsReadyMS >= 0 {
				note += fmt.Sprintf(", remote topics ready at %d ms", c.BurstTopicsReadyMS)
			}
			notes = append(notes, note)
		}
		if c.DispatcherStart > 0 {
			notes = append(notes, fmt.Sprintf("dispatcher start %s, %d requests at %.0f/s", dur(c.DispatcherStart), c.DispatcherRequests, c.DispatcherRPS))
		}
		if c.Processes > 1 {
			notes = append(notes, fmt.Sprintf("%d processes", c.Processes))
		}
		if c.Load != "" {
			notes = append(notes, "load average "+c.Load)
		}
		if n := c.Rounds.note(); n != "" {
			notes = append(notes, n)
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %.0f (%.1f) | %.2f | %.1f | %s | %s | %s | %s |",
			r.Workload.Name, c.Name, dur(c.FirstRecord), dur(c.Done), c.RecordsPS, c.MBPS, c.CPUSeconds, c.CPUSecondsPerGB,
			mib(c.PeakRSSKiB), c.TargetCompression, strings.ReplaceAll(check, "|", "/"), strings.Join(notes, "; ")))
	}
	return strings.Join(rows, "\n")
}
