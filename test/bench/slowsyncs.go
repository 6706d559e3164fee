package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// The slow-syncs workload: `mirror run` copies 300,000 x 512 B over 8 partitions twice per
// round, once with the source as it is and once with a produce quota of 4 KiB/s on the source
// for the mirror's user. The offset-syncs topic lives on the source by default and the copy only
// reads there, so the quota slows the offset syncs alone; the ratio of the two times is what
// a slow syncs topic costs the copy. Both runs reach the source over SASL_SSL (so both pay for
// TLS), as different users: the quota is alice's (SASL PLAIN), the unthrottled run is
// scram-user's (SCRAM-SHA-256). Kafka measures a quota over its window (11 samples of 1 s), so
// before each throttled run the harness waits until alice has produced nothing for
// slowSyncsQuietWindow: every throttled run starts as a fresh one, not in the debt of the last.
const (
	slowSyncsWorkload    = "slow-syncs"
	slowSyncsPartitions  = 8
	slowSyncsRecords     = 300_000
	slowSyncsRecordBytes = 512
	slowSyncsQuota       = 4096 // producer_byte_rate, bytes/s
	slowSyncsQuietWindow = 12 * time.Second
	// SASL users of test/kafka/kafka.sh's clusters.
	slowSyncsUser, slowSyncsPass      = "alice", "alice-secret"
	unthrottledUser, unthrottledPass  = "scram-user", "scram-secret"
	slowSyncsMechanism, freeMechanism = "PLAIN", "SCRAM-SHA-256"
)

// slowSyncsRun is one `mirror run` of the workload.
type slowSyncsRun struct {
	Round     int     `json:"round"`
	Throttled bool    `json:"throttled"`
	Seconds   float64 `json:"seconds"` // process start to exit
	Records   int64   `json:"records"`
	Exit      int     `json:"exit"`
	Load      string  `json:"load"` // /proc/loadavg when it ended
}

// slowSyncsReport is results/slow-syncs.{md,json}.
type slowSyncsReport struct {
	Machine     map[string]string `json:"machine"`
	Started     time.Time         `json:"started"`
	Finished    time.Time         `json:"finished"`
	UptimeStart string            `json:"uptime_start"`
	UptimeEnd   string            `json:"uptime_end"`
	Runs        []slowSyncsRun    `json:"runs"`
	// Unthrottled and Throttled are the median times of the runs that copied every record;
	// Ratio is Throttled / Unthrottled. RoundRatio is the median of each round's throttled time
	// over the unthrottled one just before it: the pairs ran under about the same load.
	Unthrottled float64 `json:"unthrottled_seconds"`
	Throttled   float64 `json:"throttled_seconds"`
	Ratio       float64 `json:"ratio"`
	RoundRatio  float64 `json:"round_ratio"`
}

// runSlowSyncs runs the workload's rounds (unthrottled first, then throttled, each round) and
// writes its report into dir.
func (h *harness) runSlowSyncs(ctx context.Context, rounds int, dir string) error {
	topic := "slowsyncs-" + time.Now().Format("150405") + "-0"
	w := workload{Name: slowSyncsWorkload, Topics: 1, Partitions: slowSyncsPartitions, Records: slowSyncsRecords, Size: slowSyncsRecordBytes}
	h.logger.Info("slow-syncs workload", "topic", topic, "records", w.Records, "partitions", w.Partitions)
	if err := h.seed(ctx, w, []string{topic}); err != nil {
		return err
	}
	defer func() { _, _ = h.srcAdm.DeleteTopics(context.WithoutCancel(ctx), topic) }()
	quota := func(remove bool) error {
		res, err := h.srcAdm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
			Entity: kadm.ClientQuotaEntity{{Type: "user", Name: ptr(slowSyncsUser)}},
			Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: slowSyncsQuota, Remove: remove}},
		}})
		if err == nil && len(res) > 0 {
			err = res[0].Err
		}
		if err != nil {
			return fmt.Errorf("setting the produce quota of %s on the source (remove %v): %w", slowSyncsUser, remove, err)
		}
		return nil
	}
	if err := quota(false); err != nil {
		return err
	}
	defer func() { _ = quota(true) }()
	rep := slowSyncsReport{Machine: machine(h.lib), Started: time.Now().UTC(), UptimeStart: uptime()}
	var quiet time.Time // when alice last produced
	for round := range max(rounds, 1) {
		for _, throttled := range []bool{false, true} {
			if throttled {
				if wait := time.Until(quiet.Add(slowSyncsQuietWindow)); wait > 0 {
					select {
					case <-time.After(wait):
					case <-ctx.Done():
						return ctx.Err()
					}
				}
			}
			r, err := h.slowSyncsRun(ctx, topic, round, throttled)
			if err != nil {
				return err
			}
			if throttled {
				quiet = time.Now()
			}
			h.logger.Info("slow-syncs run", "round", r.Round, "throttled", r.Throttled, "seconds", r.Seconds, "records", r.Records, "exit", r.Exit, "load", r.Load)
			rep.Runs = append(rep.Runs, r)
		}
	}
	rep.Finished, rep.UptimeEnd = time.Now().UTC(), uptime()
	rep.Unthrottled, rep.Throttled = rep.median(false), rep.median(true)
	if rep.Unthrottled > 0 {
		rep.Ratio = rep.Throttled / rep.Unthrottled
	}
	rep.RoundRatio = rep.roundRatio()
	fmt.Println(rep.markdown())
	return rep.write(dir)
}

// slowSyncsRun runs `mirror run` once as a flow of its own (new aliases: nothing resumes),
// checks that it copied every record and deletes its copy.
func (h *harness) slowSyncsRun(ctx context.Context, topic string, round int, throttled bool) (slowSyncsRun, error) {
	user, pass, mech, kind := unthrottledUser, unthrottledPass, freeMechanism, "free"
	if throttled {
		user, pass, mech, kind = slowSyncsUser, slowSyncsPass, slowSyncsMechanism, "quota"
	}
	src := fmt.Sprintf("ss%s%d", kind, round)
	host, port, _ := strings.Cut(h.source, ":")
	p, _ := strconv.Atoi(port)
	cmd := exec.CommandContext(ctx, h.mirrorBin, "run")
	cmd.Env = append(os.Environ(),
		"MM2_SOURCE_BOOTSTRAP_SERVERS="+host+":"+strconv.Itoa(p+2), // kafka.sh: SASL_SSL on PORT+2
		"MM2_SOURCE_SECURITY_PROTOCOL=SASL_SSL",
		"MM2_SOURCE_SASL_MECHANISM="+mech,
		"MM2_SOURCE_SASL_USERNAME="+user,
		"MM2_SOURCE_SASL_PASSWORD="+pass,
		"MM2_SOURCE_SSL_TRUSTSTORE_LOCATION="+filepath.Join(h.home, "certs", "ca.pem"),
		"MM2_TARGET_BOOTSTRAP_SERVERS="+h.target,
		"MM2_SOURCE_ALIAS="+src,
		"MM2_TARGET_ALIAS=sstgt",
		"MM2_TOPICS="+topic,
		"MM2_REPLICATION_FACTOR=1",
		"MM2_OFFSET_STORAGE_REPLICATION_FACTOR=1",
		"MM2_OFFSET_SYNCS_TOPIC_REPLICATION_FACTOR=1",
		"MM2_HEARTBEATS_REPLICATION_ENABLED=false",
		"MM2_LOG_FORMAT=json",
	)
	logPath := filepath.Join(h.home, "slow-syncs", src+".log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return slowSyncsRun{}, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return slowSyncsRun{}, err
	}
	defer logFile.Close()
	var stdout strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, logFile
	start := time.Now()
	err = cmd.Run()
	r := slowSyncsRun{Round: round + 1, Throttled: throttled, Seconds: time.Since(start).Seconds(), Load: loadavg()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.Exit = ee.ExitCode()
	} else if err != nil {
		return r, fmt.Errorf("running mirror (%s): %w", src, err)
	}
	var sum struct {
		Records int64 `json:"records"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout.String())), &sum); err != nil {
		return r, fmt.Errorf("mirror run (%s) printed no summary (exit %d, log %s): %w", src, r.Exit, logPath, err)
	}
	r.Records = sum.Records
	remote := src + "." + topic
	if got := h.targetCount(ctx, []string{remote}); got != slowSyncsRecords {
		r.Records = min(r.Records, got)
	}
	if _, err := h.tgtAdm.DeleteTopics(ctx, remote); err != nil {
		h.logger.Warn("copy not deleted", "topic", remote, "err", err)
	}
	return r, nil
}

// roundRatio returns the median over the rounds whose two runs copied every record of the
// throttled run's time over the unthrottled run's.
func (r slowSyncsReport) roundRatio() float64 {
	free := map[int]float64{}
	var ratios []float64
	for _, run := range r.Runs {
		switch {
		case run.Exit != 0 || run.Records != slowSyncsRecords:
		case !run.Throttled:
			free[run.Round] = run.Seconds
		case free[run.Round] > 0:
			ratios = append(ratios, run.Seconds/free[run.Round])
		}
	}
	if len(ratios) == 0 {
		return 0
	}
	slices.Sort(ratios)
	return ratios[len(ratios)/2]
}

// median returns the median time of the runs (throttled or not) that copied every record.
func (r slowSyncsReport) median(throttled bool) float64 {
	var ts []float64
	for _, run := range r.Runs {
		if run.Throttled == throttled && run.Exit == 0 && run.Records == slowSyncsRecords {
			ts = append(ts, run.Seconds)
		}
	}
	if len(ts) == 0 {
		return 0
	}
	slices.Sort(ts)
	return ts[len(ts)/2]
}

func (r slowSyncsReport) write(dir string) error {
	return writeReport(dir, slowSyncsWorkload, r, r.markdown())
}

// writeReport writes a workload's report of its own into dir: name.json (v) and name.md (md).
func writeReport(dir, name string, v any, md string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), js, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".md"), []byte(md), 0o644)
}

func (r slowSyncsReport) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Slow offset-syncs topic: `mirror run` of %d x %d B over %d partitions\n\n", slowSyncsRecords, slowSyncsRecordBytes, slowSyncsPartitions)
	fmt.Fprintf(&b, "Throttled: a produce quota of %d B/s on the source for the mirror's user (the offset-syncs topic's cluster). %s to %s.\n\n",
		slowSyncsQuota, r.Started.Format(time.RFC3339), r.Finished.Format(time.RFC3339))
	fmt.Fprintf(&b, "- load at start: `%s`\n- load at end: `%s`\n\n", r.UptimeStart, r.UptimeEnd)
	b.WriteString("| round | syncs topic | seconds | records | exit | load (1, 5, 15 min) |\n|---|---|---|---|---|---|\n")
	for _, run := range r.Runs {
		kind := "unthrottled"
		if run.Throttled {
			kind = "4 KiB/s"
		}
		fmt.Fprintf(&b, "| %d | %s | %.2f | %d | %d | %s |\n", run.Round, kind, run.Seconds, run.Records, run.Exit, run.Load)
	}
	fmt.Fprintf(&b, "\nMedian: %.2f s unthrottled, %.2f s throttled (%.2fx); median of the rounds' throttled / unthrottled: **%.2fx**.\n",
		r.Unthrottled, r.Throttled, r.Ratio, r.RoundRatio)
	return b.String()
}
