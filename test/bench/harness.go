package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/test/testkit"
)

// harness runs the clusters and the contenders of one bench run.
type harness struct {
	root, home, mirrorBin string
	logger                *slog.Logger
	source, target        string
	srcAdm, tgtAdm        *kadm.Client
	clients               []*kgo.Client
}

func (h *harness) cmd(ctx context.Context, name string, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, name, args...)
	c.Dir = h.root
	c.Env = append(os.Environ(), "MM2GO_KAFKA_HOME="+h.home)
	return c
}

func (h *harness) kafka(ctx context.Context, args ...string) error {
	out, err := h.cmd(ctx, filepath.Join(h.root, "test", "kafka", "kafka.sh"), args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kafka.sh %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

func (h *harness) startClusters(ctx context.Context, srcPort, tgtPort int) error {
	h.stopClusters()
	errs := make(chan error, 2)
	go func() { errs <- h.kafka(ctx, "start", "bench-source", strconv.Itoa(srcPort)) }()
	go func() { errs <- h.kafka(ctx, "start", "bench-target", strconv.Itoa(tgtPort)) }()
	if err := errors.Join(<-errs, <-errs); err != nil {
		return err
	}
	h.source = fmt.Sprintf("127.0.0.1:%d", srcPort)
	h.target = fmt.Sprintf("127.0.0.1:%d", tgtPort)
	for _, addr := range []string{h.source, h.target} {
		// The contenders create the remote topics: metadata must not be cached long, and a
		// request meeting a partition that is not served yet is retried at once (franz-go's
		// default backoff would delay the harness's count by up to seconds).
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MetadataMinAge(10*time.Millisecond),
			kgo.RetryBackoffFn(func(int) time.Duration { return 5 * time.Millisecond }))
		if err != nil {
			return err
		}
		h.clients = append(h.clients, cl)
	}
	h.srcAdm, h.tgtAdm = kadm.NewClient(h.clients[0]), kadm.NewClient(h.clients[1])
	return nil
}

func (h *harness) stopClusters() {
	for _, cl := range h.clients {
		cl.Close()
	}
	h.clients = nil
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = h.kafka(ctx, "stop", "bench-source")
	_ = h.kafka(ctx, "stop", "bench-target")
}

// javaTool runs a Kafka tool class from the harness jars and returns its stdout.
func (h *harness) javaTool(ctx context.Context, class string, args ...string) (string, error) {
	c := h.cmd(ctx, filepath.Join(h.root, "test", "kafka", "kafka.sh"), append([]string{"tool", class}, args...)...)
	var stderr strings.Builder
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w\n%s", class, err, stderr.String())
	}
	return string(out), nil
}

var producerPerfLine = regexp.MustCompile(`(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)`)

// producerPerf runs Kafka's producer perf test and returns records/s and MB/s of its summary.
func (h *harness) producerPerf(ctx context.Context, bootstrap, topic string, records, size int) (float64, float64, error) {
	out, err := h.javaTool(ctx, "org.apache.kafka.tools.ProducerPerformance",
		"--topic", topic, "--num-records", strconv.Itoa(records), "--record-size", strconv.Itoa(size),
		"--throughput", "-1", "--producer-props", "bootstrap.servers="+bootstrap, "acks=all")
	if err != nil {
		return 0, 0, err
	}
	m := producerPerfLine.FindAllStringSubmatch(out, -1)
	if len(m) == 0 {
		return 0, 0, fmt.Errorf("no summary in producer perf output:\n%s", out)
	}
	last := m[len(m)-1]
	rps, _ := strconv.ParseFloat(last[2], 64)
	mbps, _ := strconv.ParseFloat(last[3], 64)
	return rps, mbps, nil
}

// consumerPerf runs Kafka's consumer perf test and returns its fetch-phase records/s and MB/s.
func (h *harness) consumerPerf(ctx context.Context, bootstrap, topic string, records int) (float64, float64, error) {
	out, err := h.javaTool(ctx, "org.apache.kafka.tools.ConsumerPerformance",
		"--bootstrap-server", bootstrap, "--topic", topic, "--messages", strconv.Itoa(records), "--timeout", "60000")
	if err != nil {
		return 0, 0, err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var header, values []string
	for i, l := range lines {
		if strings.HasPrefix(l, "start.time") && i+1 < len(lines) {
			header = strings.Split(l, ", ")
			values = strings.Split(lines[i+1], ", ")
		}
	}
	get := func(name string) float64 {
		for i, h := range header {
			if strings.TrimSpace(h) == name && i < len(values) {
				v, _ := strconv.ParseFloat(strings.TrimSpace(values[i]), 64)
				return v
			}
		}
		return 0
	}
	if header == nil {
		return 0, 0, fmt.Errorf("no summary in consumer perf output:\n%s", out)
	}
	return get("fetch.nMsg.sec"), get("fetch.MB.sec"), nil
}

// seed fills the source topics of a workload.
func (h *harness) seed(ctx context.Context, w workload, topics []string) error {
	if _, err := h.srcAdm.CreateTopics(ctx, w.Partitions, 1, map[string]*string{"retention.ms": ptr("-1")}, topics...); err != nil {
		return fmt.Errorf("creating source topics: %w", err)
	}
	return h.produce(ctx, w, topics)
}

// produce writes the workload's records into its existing source topics.
func (h *harness) produce(ctx context.Context, w workload, topics []string) error {
	if w.Topics == 1 && w.Records >= 10_000 {
		_, _, err := h.producerPerf(ctx, h.source, topics[0], w.Records, w.Size)
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.source), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	value := make([]byte, w.Size)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	var recs []*kgo.Record
	for _, t := range topics {
		for i := 0; i < w.Records; i++ {
			recs = append(recs, &kgo.Record{Topic: t, Key: []byte(strconv.Itoa(i)), Value: value})
		}
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}

// targetCount sums the end offsets of topics on the target (missing topics count 0).
func (h *harness) targetCount(ctx context.Context, topics []string) int64 {
	// Ask for the end offsets of existing topics only: franz-go retries metadata of an unknown
	// topic before giving up, which would delay the count by up to a second while the
	// contender is still creating its remote topics.
	st, err := cluster.DescribeTopics(ctx, h.clients[1], topics...)
	if err != nil {
		return 0
	}
	var existing []string
	for _, t := range topics {
		if st[t].Led {
			existing = append(existing, t)
		}
	}
	if len(existing) == 0 {
		return 0
	}
	ends, err := h.tgtAdm.ListEndOffsets(ctx, existing...)
	if err != nil {
		return 0
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Offset > 0 {
			n += o.Offset
		}
	})
	return n
}

// contender is one replicator's figures on one workload.
type contender struct {
	FirstRecord time.Duration `json:"first_record_ns"`
	Done        time.Duration `json:"done_ns"`
	RecordsPS   float64       `json:"records_per_s"`
	MBPS        float64       `json:"mb_per_s"`
	PeakRSSKiB  int64         `json:"peak_rss_kib"`
	CPUSeconds  float64       `json:"cpu_s"`
	Copied      int64         `json:"copied"`
	// BurstFirstRecordMS is mirror run's own figure (its summary's first_record_ms): from the
	// burst's start, just before its first request to a broker, to the first record
	// acknowledged by the target. -1 where the contender reports none.
	BurstFirstRecordMS int64 `json:"burst_first_record_ms"`
	// DispatcherStart (serve only) is the genuine dispatcher's start, from launch to partition
	// assignment, included in FirstRecord and Done. DispatcherRequests are the requests it sent
	// for the backlog (or until 30 s after Done), DispatcherRPS their rate between its first and
	// last request.
	DispatcherStart    time.Duration `json:"dispatcher_start_ns,omitempty"`
	DispatcherRequests int64         `json:"dispatcher_requests,omitempty"`
	DispatcherRPS      float64       `json:"dispatcher_requests_per_s,omitempty"`
}

// watch starts cmd and polls the target until want more records than topics held before
// arrived, then calls finish (which must make cmd exit) and collects the child's peak RSS and
// CPU time.
func (h *harness) watch(ctx context.Context, cmd *exec.Cmd, topics []string, want int64, bytes int64, finish func()) (contender, error) {
	c := contender{BurstFirstRecordMS: -1}
	base := h.targetCount(ctx, topics)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return c, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(15 * time.Minute)
	var exitErr error
	exitedEarly := false
	// Peak RSS from the child's own VmHWM, polled: rusage's Maxrss also counts the memory of
	// this (forking) process before the child's exec, so it never reads below the harness's
	// own RSS.
	var hwm int64
poll:
	for {
		hwm = max(hwm, vmHWM(cmd.Process.Pid))
		n := h.targetCount(ctx, topics) - base
		if n > 0 && c.FirstRecord == 0 {
			c.FirstRecord = time.Since(start)
		}
		if n >= want {
			c.Done = time.Since(start)
			c.Copied = n
			break
		}
		select {
		case exitErr = <-exited:
			// The process finished (mirror run exits when done): its records are durable, so
			// "done" is now; the count only has to confirm them.
			exitedEarly = true
			c.Done = time.Since(start)
			for end := time.Now().Add(30 * time.Second); n < want && time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
				n = h.targetCount(ctx, topics) - base
			}
			if c.FirstRecord == 0 {
				c.FirstRecord = c.Done
			}
			c.Copied = n
			if n < want {
				return c, fmt.Errorf("%s exited after copying %d of %d records: %v", filepath.Base(cmd.Path), n, want, exitErr)
			}
			break poll
		case <-deadline:
			_ = cmd.Process.Kill()
			return c, fmt.Errorf("%s copied %d of %d records in 15 minutes", filepath.Base(cmd.Path), n, want)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if !exitedEarly {
		finish()
		select {
		case exitErr = <-exited:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			exitErr = <-exited
		}
	}
	_ = exitErr
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		c.PeakRSSKiB = ru.Maxrss
		if hwm > 0 {
			c.PeakRSSKiB = hwm
		}
		c.CPUSeconds = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	secs := c.Done.Seconds()
	c.RecordsPS = float64(want) / secs
	c.MBPS = float64(bytes) / 1e6 / secs
	return c, nil
}

func (h *harness) runMM2(ctx context.Context, w workload, topics []string) (contender, error) {
	// The same settings as the interoperability tests, with two tasks: MM2's default of one
	// task would be an unfair comparison on 8 partitions.
	props := testkit.MM2Properties(h.source, h.target, topics...) + "tasks.max = 2\n"
	dir := filepath.Join(h.home, "mm2-"+w.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return contender{}, err
	}
	file := filepath.Join(dir, "mm2.properties")
	if err := os.WriteFile(file, []byte(props), 0o644); err != nil {
		return contender{}, err
	}
	logFile, err := os.Create(filepath.Join(dir, "mm2.log"))
	if err != nil {
		return contender{}, err
	}
	defer logFile.Close()
	lib := filepath.Join(h.root, "test", "kafka", ".cache", "lib")
	cmd := exec.CommandContext(ctx, "java", "-Xms128m", "-Xmx512m", "-server", "-XX:+UseG1GC",
		"-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
		"-Dlog4j2.configurationFile="+filepath.Join(h.home, "log4j2-server.properties"),
		"-cp", lib+"/*", "org.apache.kafka.connect.mirror.MirrorMaker", file)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	remote := make([]string, len(topics))
	for i, t := range topics {
		remote[i] = "source." + t
	}
	return h.watch(ctx, cmd, remote, int64(w.totalRecords()), w.totalBytes(), func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	})
}

// mm2goCmd prepares a mm2go function process for a workload: env settings for the bench
// clusters under the given aliases (made the workload's own), its log file, and the remote
// topic names to watch. The caller closes the log file.
func (h *harness) mm2goCmd(ctx context.Context, w workload, topics []string, sourceAlias, targetAlias, logName string, args []string, extraEnv ...string) (*exec.Cmd, *os.File, []string, error) {
	// Each workload is a flow of its own, internal topics included: the aliases carry its
	// topics' prefix (run stamp and workload name).
	prefix := strings.TrimSuffix(topics[0], "-0")
	sourceAlias, targetAlias = sourceAlias+"-"+prefix, targetAlias+"-"+prefix
	cmd := exec.CommandContext(ctx, h.mirrorBin, args...)
	cmd.Env = append(append(os.Environ(),
		"MM2_SOURCE_BOOTSTRAP_SERVERS="+h.source,
		"MM2_TARGET_BOOTSTRAP_SERVERS="+h.target,
		"MM2_SOURCE_ALIAS="+sourceAlias,
		"MM2_TARGET_ALIAS="+targetAlias,
		"MM2_TOPICS="+strings.Join(topics, ","),
		"MM2_REPLICATION_FACTOR=1",
		"MM2_OFFSET_STORAGE_REPLICATION_FACTOR=1",
		"MM2_OFFSET_SYNCS_TOPIC_REPLICATION_FACTOR=1",
		"MM2_CHECKPOINTS_TOPIC_REPLICATION_FACTOR=1",
		"MM2_HEARTBEATS_TOPIC_REPLICATION_FACTOR=1",
		"MM2_LOG_FORMAT=json",
	), extraEnv...)
	dir := filepath.Join(h.home, logName+"-"+w.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, logName+".log"))
	if err != nil {
		return nil, nil, nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	remote := make([]string, len(topics))
	for i, t := range topics {
		remote[i] = sourceAlias + "." + t
	}
	return cmd, logFile, remote, nil
}

func (h *harness) runMirror(ctx context.Context, w workload, topics []string) (contender, error) {
	cmd, logFile, remote, err := h.mm2goCmd(ctx, w, topics, "gosrc", "gotgt", "mirror", []string{"run"})
	if err != nil {
		return contender{}, err
	}
	defer logFile.Close()
	// mirror run exits by itself once done (after committing its positions): just wait.
	c, err := h.watch(ctx, cmd, remote, int64(w.totalRecords()), w.totalBytes(), func() {})
	if err == nil {
		c.BurstFirstRecordMS, err = burstFirstRecord(logFile.Name())
	}
	return c, err
}

// burstFirstRecord returns first_record_ms of the burst summary that mirror run printed last
// in its log.
func burstFirstRecord(logPath string) (int64, error) {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return -1, err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		var sum struct {
			FirstRecordMS *int64 `json:"first_record_ms"`
			Reason        string `json:"reason"`
		}
		if json.Unmarshal([]byte(lines[i]), &sum) == nil && sum.FirstRecordMS != nil && sum.Reason != "" {
			return *sum.FirstRecordMS, nil
		}
	}
	return -1, fmt.Errorf("no burst summary in %s", logPath)
}

func ptr(s string) *string { return &s }

// vmHWM returns the peak resident set (VmHWM, KiB) of a running process, 0 if unknown.
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return n
		}
	}
	return 0
}
