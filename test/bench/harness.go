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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/test/testkit"
)

// The bench's two clusters (kafka.sh names: their state is under MM2GO_KAFKA_HOME/NAME).
const (
	sourceCluster = "bench-source"
	targetCluster = "bench-target"
)

// fileDeleteDelay is the brokers' log.segment.delete.delay.ms (a topic's file.delete.delay.ms)
// in a bench run (Kafka's default is a minute): a deleted copy's files go a second after the
// broker set them aside, so that deleteTopics can wait for them before the next contender
// starts.
const fileDeleteDelay = "log.segment.delete.delay.ms=1000"

// indexFileSize is the brokers' log.index.size.max.bytes in a bench run: each new segment's
// offset and time index files are preallocated (sparse) at this size and memory-mapped. With
// Kafka's default of 10 MiB, the first write to an index page of a file makes the kernel read
// around it, and on a block device with a large read-ahead (this machine's vda has
// read_ahead_kb 8192) that zero-fills up to 8 MiB per index file in the broker's request
// threads: with 1,000 new partitions, tens of seconds of system CPU that delayed every
// contender's appends and, after an exactly-once copy, its commit markers (measured: 684
// partitions still behind their last stable offset when the copy ended, drained at about 27
// a second; with 1 MiB index files none were left). 1 MiB holds 87,381 time index entries (12
// bytes each): a segment rolls after about 341 MiB at the default 4 KiB index interval, not
// 1 GiB, which only the 10GB-backlog workload's partitions reach.
const indexFileSize = "log.index.size.max.bytes=1048576"

// harness runs the clusters and the contenders of one bench run.
type harness struct {
	root, home, mirrorBin string
	// baselineBin is `mirror run` built from the -baseline revision ("" without one).
	baselineBin string
	// lib holds the Kafka jars (MM2GO_KAFKA_LIB or test/kafka/.cache/lib); self is this
	// program's executable (the raw copy runs as a child process of it).
	lib, self      string
	logger         *slog.Logger
	source, target string
	srcAdm, tgtAdm *kadm.Client
	clients        []*kgo.Client
	// round counts a workload's rounds (-rounds) from 0: every round after the first gives the
	// contenders' flows new aliases (roundSuffix), so that none resumes the previous round's.
	round int
}

// roundSuffix is what the current round adds to aliases, group and log names: nothing in the
// first round, "-r2" in the second and so on.
func (h *harness) roundSuffix() string {
	if h.round == 0 {
		return ""
	}
	return fmt.Sprintf("-r%d", h.round+1)
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
	// A port still held by a cluster that just stopped (or by another process's socket for a
	// moment) fails the start: it is retried a few times.
	start := func(name string, port int) error {
		var err error
		for attempt := 0; attempt < 8; attempt++ {
			args := []string{"start", name, strconv.Itoa(port), fileDeleteDelay, indexFileSize}
			if name == targetCluster {
				args = append(args, scaleOutQuotaWindows, scaleOutQuotaWindow) // no effect without a quota
			}
			if err = h.kafka(ctx, args...); err == nil || !(strings.Contains(err.Error(), "Address already in use") || strings.Contains(err.Error(), "exited during start")) {
				return err
			}
			h.logger.Warn("cluster port in use, retrying", "cluster", name, "port", port)
			_ = h.kafka(ctx, "stop", name)
			time.Sleep(10 * time.Second)
		}
		return err
	}
	go func() { errs <- start(sourceCluster, srcPort) }()
	go func() { errs <- start(targetCluster, tgtPort) }()
	if err := errors.Join(<-errs, <-errs); err != nil {
		h.stopClusters()
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
	_ = h.kafka(ctx, "stop", sourceCluster)
	_ = h.kafka(ctx, "stop", targetCluster)
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

// producerPerf runs Kafka's producer perf test (Kafka's default producer settings but acks=all,
// plus the workload's compression and records) and returns records/s and MB/s of its summary.
func (h *harness) producerPerf(ctx context.Context, bootstrap, topic string, w workload, records int) (float64, float64, error) {
	props := []string{"bootstrap.servers=" + bootstrap, "acks=all"}
	if w.Compression != "" {
		props = append(props, "compression.type="+w.Compression)
	}
	args, err := h.perfRecordArgs(w)
	if err != nil {
		return 0, 0, err
	}
	out, err := h.javaTool(ctx, "org.apache.kafka.tools.ProducerPerformance",
		append(append([]string{"--topic", topic, "--num-records", strconv.Itoa(records), "--throughput", "-1"}, args...),
			append([]string{"--producer-props"}, props...)...)...)
	if err != nil {
		return 0, 0, err
	}
	return parseProducerPerf(out)
}

// parseProducerPerf returns records/s and MB/s of a producer perf test's summary line.
func parseProducerPerf(out string) (float64, float64, error) {
	m := producerPerfLine.FindAllStringSubmatch(out, -1)
	if len(m) == 0 {
		return 0, 0, fmt.Errorf("no summary in producer perf output:\n%s", out)
	}
	last := m[len(m)-1]
	rps, _ := strconv.ParseFloat(last[2], 64)
	mbps, _ := strconv.ParseFloat(last[3], 64)
	return rps, mbps, nil
}

// perfRecordArgs are the producer perf test's record arguments for a workload: the record
// size (one random payload of letters, repeated), or for a compressed workload a payload file
// of varied text lines of exactly the record size.
func (h *harness) perfRecordArgs(w workload) ([]string, error) {
	if w.Compression == "" {
		return []string{"--record-size", strconv.Itoa(w.Size)}, nil
	}
	file := filepath.Join(h.home, fmt.Sprintf("payload-%d.txt", w.Size))
	if _, err := os.Stat(file); err == nil {
		return []string{"--payload-file", file}, nil
	}
	if err := os.WriteFile(file, textPayloads(2000, w.Size), 0o644); err != nil {
		return nil, fmt.Errorf("writing the payload file: %w", err)
	}
	return []string{"--payload-file", file}, nil
}

// textPayloads returns n newline-separated lines of size bytes each, log-like text from a
// small vocabulary with numbers (lz4 and zstd compress such lines 2-4x, as they do logs).
func textPayloads(n, size int) []byte {
	words := []string{"user", "order", "status", "ok", "failed", "retry", "payment", "service", "id", "region",
		"west", "east", "latency_ms", "bytes", "request", "response", "cache", "hit", "miss", "session"}
	var b strings.Builder
	seed := uint32(2463534242)
	next := func() uint32 { seed ^= seed << 13; seed ^= seed >> 17; seed ^= seed << 5; return seed }
	for i := 0; i < n; i++ {
		var line strings.Builder
		for line.Len() < size {
			fmt.Fprintf(&line, `"%s":%d,`, words[next()%uint32(len(words))], next()%100000)
		}
		b.WriteString(line.String()[:size])
		b.WriteByte('\n')
	}
	return []byte(b.String())
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
	if w.perfSeeded() {
		_, _, err := h.producerPerf(ctx, h.source, topics[0], w, w.Records)
		return err
	}
	popts := []kgo.Opt{kgo.SeedBrokers(h.source), kgo.ProducerLinger(5 * time.Millisecond)}
	if n := w.maxRequestSize(); n > 0 {
		popts = append(popts, kgo.ProducerBatchMaxBytes(int32(n)))
	}
	cl, err := kgo.NewClient(popts...)
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
	// Name says which contender (see contenderSettings for each one's settings).
	Name string `json:"name"`
	// Load is the 1-minute load average at the contender's start and end ("4.1 -> 6.0").
	Load        string        `json:"load,omitempty"`
	FirstRecord time.Duration `json:"first_record_ns"`
	Done        time.Duration `json:"done_ns"`
	RecordsPS   float64       `json:"records_per_s"`
	MBPS        float64       `json:"mb_per_s"`
	// PeakRSSKiB is the largest peak resident set of its processes (VmHWM).
	PeakRSSKiB int64 `json:"peak_rss_kib"`
	// CPUSeconds is the user + system CPU time of its processes (and their children), from
	// the OS (wait4's rusage); CPUSecondsPerGB divides it by the bytes copied (key + value +
	// headers of the source records, Bytes) in 1e9 bytes.
	CPUSeconds      float64 `json:"cpu_s"`
	CPUSecondsPerGB float64 `json:"cpu_s_per_gb"`
	Bytes           int64   `json:"bytes"`
	Copied          int64   `json:"copied"`
	// Processes is the number of its OS processes (two for a split mirror run).
	Processes int `json:"processes"`
	// Verified says how the copy was checked against the source ("" until checked); a copy
	// that fails its check has Mismatch set and is left out of every ratio.
	Verified string `json:"verified"`
	Mismatch string `json:"mismatch,omitempty"`
	// TargetCompression is the remote topics' compression.type, as the contender left it.
	TargetCompression string `json:"target_topic_compression_type,omitempty"`
	// BurstFirstRecordMS is mirror run's own figure (its summary's first_record_ms): from the
	// burst's start, just before its first request to a broker, to the first record
	// acknowledged by the target. -1 where the contender reports none.
	BurstFirstRecordMS int64 `json:"burst_first_record_ms"`
	// BurstTopicsReadyMS is the part of BurstFirstRecordMS until the burst's remote topics were
	// ready (its summary's topics_ready_ms): on a new flow, the target broker creating them.
	BurstTopicsReadyMS int64 `json:"burst_topics_ready_ms"`
	// DispatcherStart (serve only) is the genuine dispatcher's start, from launch to partition
	// assignment, included in FirstRecord and Done. DispatcherRequests are the requests it sent
	// for the backlog (or until 30 s after Done), DispatcherRPS their rate between its first and
	// last request.
	DispatcherStart    time.Duration `json:"dispatcher_start_ns,omitempty"`
	DispatcherRequests int64         `json:"dispatcher_requests,omitempty"`
	DispatcherRPS      float64       `json:"dispatcher_requests_per_s,omitempty"`

	// Rounds (-rounds above 1) is the spread of the contender's runs, of which this row is
	// the median one.
	Rounds *roundSpread `json:"rounds,omitempty"`

	// remote are the target topics it wrote, in the order of the source topics; committed says
	// they were written in transactions (verify reads them read_committed).
	remote    []string
	committed bool
}

// roundSpread is what a contender's runs of a workload ranged over: done time, CPU per GB and
// peak RSS of the runs whose copy matched, and how many failed.
type roundSpread struct {
	Runs          int           `json:"runs"`
	Matched       int           `json:"matched"`
	DoneMin       time.Duration `json:"done_min_ns"`
	DoneMax       time.Duration `json:"done_max_ns"`
	CPUPerGBMin   float64       `json:"cpu_s_per_gb_min"`
	CPUPerGBMax   float64       `json:"cpu_s_per_gb_max"`
	PeakRSSMaxKiB int64         `json:"peak_rss_max_kib"`
	FirstFailure  string        `json:"first_failure,omitempty"`
}

// note describes the spread for the table's notes column ("" for a single run).
func (s *roundSpread) note() string {
	if s == nil || s.Runs < 2 {
		return ""
	}
	n := fmt.Sprintf("%d rounds", s.Runs)
	if s.Matched > 0 {
		n = "median of " + n
		n += fmt.Sprintf(" (done %s-%s, CPU %.1f-%.1f s/GB, peak RSS up to %s)", dur(s.DoneMin), dur(s.DoneMax), s.CPUPerGBMin, s.CPUPerGBMax, mib(s.PeakRSSMaxKiB))
	}
	if failed := s.Runs - s.Matched; failed > 0 {
		n += fmt.Sprintf("; %d failed or differed, first: %s", failed, s.FirstFailure)
	}
	return n
}

// ok tells whether the contender ran and its copy matched the source.
func (c *contender) ok() bool { return c != nil && c.Done > 0 && c.Mismatch == "" }

// rusage adds a finished process's CPU time to c and returns its peak RSS from rusage (KiB).
func (c *contender) rusage(ps *os.ProcessState) int64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	c.CPUSeconds += time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	return ru.Maxrss
}

// watch starts cmds and polls the target until want more records than topics held before
// arrived, then calls finish (which must make every cmd exit) and collects the children's
// peak RSS and CPU time.
//
// With exitDone (a transactional copy, whose end offsets count its transaction markers) the
// end offsets are not a count of records: the copy is done when its processes exit, and
// verify counts the records committed.
func (h *harness) watch(ctx context.Context, cmds []*exec.Cmd, topics []string, want int64, bytes int64, finish func(), exitDone bool) (contender, error) {
	c := contender{BurstFirstRecordMS: -1, BurstTopicsReadyMS: -1, Processes: len(cmds), remote: topics}
	base := h.targetCount(ctx, topics)
	start := time.Now()
	exited := make(chan error, len(cmds))
	for _, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			for _, o := range cmds {
				if o.Process != nil {
					_ = o.Process.Kill()
				}
			}
			return c, err
		}
		go func() { exited <- cmd.Wait() }()
	}
	name := filepath.Base(cmds[0].Path)
	kill := func() {
		for _, cmd := range cmds {
			_ = cmd.Process.Kill()
		}
	}
	deadline := time.After(30 * time.Minute)
	// A contender that copies nothing more for stallAfter is stopped and reported as stalled,
	// so one stuck contender does not hold the run for half an hour.
	lastN, lastChange := int64(-1), time.Now()
	running := len(cmds)
	// Peak RSS from each child's own VmHWM, polled: rusage's Maxrss also counts the memory of
	// this (forking) process before the child's exec, so it never reads below the harness's
	// own RSS.
	hwm := make([]int64, len(cmds))
poll:
	for {
		for i, cmd := range cmds {
			hwm[i] = max(hwm[i], vmHWM(cmd.Process.Pid))
		}
		n := h.targetCount(ctx, topics) - base
		if n > 0 && c.FirstRecord == 0 {
			c.FirstRecord = time.Since(start)
		}
		if n >= want && !exitDone {
			c.Done = time.Since(start)
			c.Copied = n
			break
		}
		if n != lastN {
			lastN, lastChange = n, time.Now()
		} else if time.Since(lastChange) > stallAfter {
			kill()
			return c, fmt.Errorf("%s stalled: %d of %d records copied, none in the last %s", name, n, want, stallAfter)
		}
		select {
		case err := <-exited:
			running--
			if err != nil {
				kill()
				return c, fmt.Errorf("%s exited after %d of %d records were copied: %v", name, n, want, err)
			}
			if running > 0 {
				continue
			}
			// Every process finished (mirror run exits when done): its records are durable,
			// so "done" is now; the count only has to confirm them.
			c.Done = time.Since(start)
			if exitDone {
				c.Copied = want // verify counts what is committed
				break poll
			}
			for end := time.Now().Add(30 * time.Second); n < want && time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
				n = h.targetCount(ctx, topics) - base
			}
			if c.FirstRecord == 0 {
				c.FirstRecord = c.Done
			}
			c.Copied = n
			if n < want {
				return c, fmt.Errorf("%s exited after copying %d of %d records", name, n, want)
			}
			break poll
		case <-deadline:
			kill()
			return c, fmt.Errorf("%s copied %d of %d records in 30 minutes", name, n, want)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if running > 0 {
		finish()
		timeout := time.After(60 * time.Second)
		for running > 0 {
			select {
			case <-exited:
				running--
			case <-timeout:
				kill()
				timeout = nil
			}
		}
	}
	for i, cmd := range cmds {
		rss := c.rusage(cmd.ProcessState)
		if hwm[i] > 0 {
			rss = hwm[i]
		}
		c.PeakRSSKiB = max(c.PeakRSSKiB, rss)
	}
	c.setRates(want, bytes)
	return c, nil
}

// stallAfter is how long a contender may copy nothing before the harness stops it (MM2 takes
// up to about 15 s to start and to rebalance its tasks; tuned MM2 once copied nothing for four
// minutes on the 2 GB backlog).
const stallAfter = 2 * time.Minute

// setRates fills in the rates and CPU per GB from Done and CPUSeconds.
func (c *contender) setRates(want, bytes int64) {
	secs := c.Done.Seconds()
	c.Bytes = bytes
	c.RecordsPS = float64(want) / secs
	c.MBPS = float64(bytes) / 1e6 / secs
	if bytes > 0 {
		c.CPUSecondsPerGB = c.CPUSeconds / (float64(bytes) / 1e9)
	}
}

// Contender names.
const (
	nameMM2      = "MM2"
	nameMM2Tuned = "MM2 tuned"
	nameRaw      = "raw franz-go copy"
	nameMirror   = "mirror run"
	nameBaseline = "mirror run (baseline)"
	nameRoomy    = "mirror run, 256 MiB"
	nameRecords  = "mirror run, record by record"
	nameEOS      = "mirror run, exactly-once"
	nameSplit    = "mirror run ×2 (burst group)"
	// The scale-out workload's contenders: n `mirror run` processes of one burst group, each
	// with its own POD_NAME (client id), through the target's per-client quota.
	nameScale1   = "mirror run ×1 (burst group, quota)"
	nameScale2   = "mirror run ×2 (burst group, quota)"
	nameScale4   = "mirror run ×4 (burst group, quota)"
	nameServe    = "mirror serve"
	nameProducer = "producer perf (ceiling)"
)

// mm2Tuning is the tuned MirrorMaker 2's settings beyond the default row's: what a user
// tuning it for throughput would set (JVM heap: -Xms1g -Xmx1g, as KAFKA_HEAP_OPTS would).
const mm2Tuning = `tasks.max = 8
target.producer.batch.size = 1048576
target.producer.linger.ms = 10
target.producer.buffer.memory = 134217728
source.consumer.fetch.max.bytes = 52428800
source.consumer.max.partition.fetch.bytes = 10485760
source.consumer.max.poll.records = 5000
`

// runMM2 runs genuine MirrorMaker 2 (dedicated mode) until it has copied the workload. The
// default row has the interoperability tests' settings with two tasks (MM2's default of one
// task would be an unfair comparison on 8 partitions) and 512 MiB of heap; the tuned row adds
// mm2Tuning and 1 GiB of heap. Each row has its own source alias, so neither finds the other's
// positions in MM2's offsets topic.
func (h *harness) runMM2(ctx context.Context, w workload, topics []string, tuned bool) (contender, error) {
	alias, name := "source", "mm2"
	if tuned {
		alias, name = "tsource", "mm2tuned"
	}
	cmd, logFile, remote, err := h.mm2Cmd(ctx, w, topics, alias+h.roundSuffix(), name+"-"+w.Name+h.roundSuffix(), tuned)
	if err != nil {
		return contender{}, err
	}
	defer logFile.Close()
	c, err := h.watch(ctx, []*exec.Cmd{cmd}, remote, int64(w.totalRecords()), w.totalBytes(), func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}, false)
	c.Name = nameMM2
	if tuned {
		c.Name = nameMM2Tuned
	}
	if err != nil {
		// Say why when the JVM ran out of heap (tuned MM2 on a large backlog: eight tasks,
		// each with a 128 MB producer buffer and 50 MB fetches, in a 1 GB heap).
		if log, rerr := os.ReadFile(logFile.Name()); rerr == nil && strings.Contains(string(log), "java.lang.OutOfMemoryError") {
			// The results name the log below the bench's state directory, not this machine's path.
			rel, relErr := filepath.Rel(h.home, logFile.Name())
			if relErr != nil {
				rel = filepath.Base(logFile.Name())
			}
			err = fmt.Errorf("%w (its log, %s in the bench's state directory, has java.lang.OutOfMemoryError: Java heap space; tasks that hit it are killed and not restarted)", err, rel)
		}
	}
	return c, err
}

// mm2Cmd prepares a genuine MirrorMaker 2 process (dedicated mode) that copies topics from the
// source cluster named alias: the default row's settings (the interoperability tests' with two
// tasks, 512 MiB of heap) or, tuned, mm2Tuning with 1 GiB. Its properties and log go to the
// directory logDir under the bench home; it returns the command, its log file (the caller
// closes it) and the remote topics.
func (h *harness) mm2Cmd(ctx context.Context, w workload, topics []string, alias, logDir string, tuned bool) (*exec.Cmd, *os.File, []string, error) {
	heap := []string{"-Xms128m", "-Xmx512m"}
	if tuned {
		heap = []string{"-Xms1g", "-Xmx1g"}
	}
	props := testkit.MM2Properties(h.source, h.target, topics...)
	if tuned {
		props += mm2Tuning
	} else {
		props += "tasks.max = 2\n"
	}
	if w.Compression != "" {
		props += "target.producer.compression.type = " + w.Compression + "\n"
	}
	props = strings.ReplaceAll(props, "source", alias)
	dir := filepath.Join(h.home, logDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, nil, err
	}
	file := filepath.Join(dir, "mm2.properties")
	if err := os.WriteFile(file, []byte(props), 0o644); err != nil {
		return nil, nil, nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "mm2.log"))
	if err != nil {
		return nil, nil, nil, err
	}
	args := append(heap, "-server", "-XX:+UseG1GC",
		"-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
		"-Dlog4j2.configurationFile="+filepath.Join(h.home, "log4j2-server.properties"),
		"-cp", h.lib+"/*", "org.apache.kafka.connect.mirror.MirrorMaker", file)
	cmd := exec.CommandContext(ctx, "java", args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	remote := make([]string, len(topics))
	for i, t := range topics {
		remote[i] = alias + "." + t
	}
	return cmd, logFile, remote, nil
}

// mm2goCmd prepares a mm2go function process for a workload: env settings for the bench
// clusters under the given aliases (made the workload's own), its log file, and the remote
// topic names to watch. The caller closes the log file.
func (h *harness) mm2goCmd(ctx context.Context, w workload, topics []string, sourceAlias, targetAlias, logName string, args []string, extraEnv ...string) (*exec.Cmd, *os.File, []string, error) {
	// Each workload is a flow of its own, internal topics included: the aliases carry its
	// topics' prefix (run stamp and workload name).
	prefix := strings.TrimSuffix(topics[0], "-0") + h.roundSuffix()
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
	if w.Compression != "" {
		cmd.Env = append(cmd.Env, "MM2_TARGET_PRODUCER_COMPRESSION_TYPE="+w.Compression)
	}
	dir := filepath.Join(h.home, logName+"-"+w.Name+h.roundSuffix())
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

// roomyEnv is the environment of the "mirror run, 256 MiB" contender: the memory the raw copy
// takes, spent on larger budgets (16 MiB in flight, 16 MiB fetches), to show what the default
// 64 MiB-class budgets cost in rate.
var roomyEnv = []string{"GOMEMLIMIT=256MiB", "MM2_INFLIGHT_MAX_BYTES=16777216", "MM2_SOURCE_CONSUMER_FETCH_MAX_BYTES=16777216"}

// mirrorVariant is one `mirror run` contender: its flow's aliases, log name, row name and
// environment.
type mirrorVariant struct {
	src, tgt, log, name string
	env                 []string
	// baseline runs the -baseline build instead of this tree's.
	baseline bool
}

var (
	mirrorDefault = mirrorVariant{"gosrc", "gotgt", "mirror", nameMirror, nil, false}
	mirrorRoomy   = mirrorVariant{"bigsrc", "bigtgt", "mirror-256MiB", nameRoomy, roomyEnv, false}
	// mirrorRecords copies record by record, batch forwarding off: what forwarding buys, in
	// the same run.
	mirrorRecords = mirrorVariant{"recsrc", "rectgt", "mirror-records", nameRecords, []string{"MM2_FORWARD_BATCHES=false"}, false}
	// mirrorEOS copies exactly-once (MM2_EXACTLY_ONCE=true): done when the process exits (its
	// transactions committed), checked by what a read_committed reader sees.
	mirrorEOS = mirrorVariant{"eossrc", "eostgt", "mirror-eos", nameEOS, []string{"MM2_EXACTLY_ONCE=true"}, false}
	// mirrorBaseline is mirror run with default settings, built from the -baseline revision.
	mirrorBaseline = mirrorVariant{"basesrc", "basetgt", "mirror-baseline", nameBaseline, nil, true}
)

func (h *harness) runMirror(ctx context.Context, w workload, topics []string, v mirrorVariant) (contender, error) {
	name := v.name
	cmd, logFile, remote, err := h.mm2goCmd(ctx, w, topics, v.src, v.tgt, v.log, []string{"run"}, v.env...)
	if err != nil {
		return contender{}, err
	}
	defer logFile.Close()
	if v.baseline {
		cmd.Path, cmd.Args[0] = h.baselineBin, h.baselineBin
	}
	// mirror run exits by itself once done (after committing its positions): just wait.
	// Exactly-once: the remote end offsets count transaction markers too, so only the exit
	// says done; verify counts what a read_committed reader sees.
	eos := slices.Contains(v.env, "MM2_EXACTLY_ONCE=true")
	c, err := h.watch(ctx, []*exec.Cmd{cmd}, remote, int64(w.totalRecords()), w.totalBytes(), func() {}, eos)
	c.Name, c.committed = name, eos
	if err == nil {
		c.BurstFirstRecordMS, c.BurstTopicsReadyMS, err = burstFirstRecord(logFile.Name())
	}
	return c, err
}

// runSplit runs two `mirror run` processes of one flow at once, sharing its partitions
// through a burst group (MM2_BURST_GROUP); each exits once its share is copied.
func (h *harness) runSplit(ctx context.Context, w workload, topics []string) (contender, error) {
	return h.runGroup(ctx, w, topics, 2, nameSplit, "split")
}

// runGroup runs n `mirror run` processes of one flow at once in one burst group, each with a
// POD_NAME of its own (so a client id of its own, as the pods of a Knative Service or the Jobs
// of a KEDA ScaledJob), and returns them as one contender named name; each exits once its
// share is copied.
func (h *harness) runGroup(ctx context.Context, w workload, topics []string, n int, name, logName string) (contender, error) {
	group := "bench-" + logName + "-" + strings.TrimSuffix(topics[0], "-0") + h.roundSuffix()
	var cmds []*exec.Cmd
	var logs []*os.File
	defer func() {
		for _, f := range logs {
			f.Close()
		}
	}()
	var remote []string
	for i := range n {
		member := fmt.Sprintf("%s-%c", logName, 'a'+i)
		// A flow of its own per contender (source alias "go"+logName): the ×1, ×2 and ×4 rows of one
		// round must not resume each other's stored positions.
		cmd, logFile, r, err := h.mm2goCmd(ctx, w, topics, "go"+logName, "gotgt", member, []string{"run"}, "MM2_BURST_GROUP="+group, "POD_NAME=bench-"+member+h.roundSuffix())
		if err != nil {
			return contender{}, err
		}
		cmds, logs, remote = append(cmds, cmd), append(logs, logFile), r
	}
	c, err := h.watch(ctx, cmds, remote, int64(w.totalRecords()), w.totalBytes(), func() {}, false)
	c.Name = name
	if err == nil {
		// The earliest of the members' own figures.
		for _, f := range logs {
			ms, ready, ferr := burstFirstRecord(f.Name())
			if ferr == nil && ms >= 0 && (c.BurstFirstRecordMS < 0 || ms < c.BurstFirstRecordMS) {
				c.BurstFirstRecordMS, c.BurstTopicsReadyMS = ms, ready
			}
		}
	}
	return c, err
}

// scaleOutQuota is the produce quota of every client id on the target during the scale-out
// workload (one instance's bandwidth); the target measures it over scaleOutQuotaWindows
// windows of one second (startClusters), so a new client id cannot send 10 s of its quota at
// once as with Kafka's default 11.
const (
	scaleOutQuota        = 2 << 20
	scaleOutQuotaWindows = "quota.window.num=2"
	scaleOutQuotaWindow  = "quota.window.size.seconds=1"
)

// setScaleOutQuota sets (on) or removes (off) the default produce quota of every client id on
// the target.
func (h *harness) setScaleOutQuota(ctx context.Context, on bool) error {
	op := kadm.AlterClientQuotaOp{Key: "producer_byte_rate", Value: scaleOutQuota}
	if !on {
		op = kadm.AlterClientQuotaOp{Key: "producer_byte_rate", Remove: true}
	}
	res, err := h.tgtAdm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id"}}, Ops: []kadm.AlterClientQuotaOp{op}}})
	if err == nil {
		for _, r := range res {
			if r.Err != nil {
				return fmt.Errorf("target client quota: %w", r.Err)
			}
		}
	}
	return err
}

// loadAvg returns the 1-minute load average ("?" if unknown).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// burstFirstRecord returns first_record_ms and topics_ready_ms of the burst summary that
// mirror run printed last in its log (topics ready -1 if the summary has none).
func burstFirstRecord(logPath string) (first, topicsReady int64, err error) {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return -1, -1, err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		var sum struct {
			FirstRecordMS *int64 `json:"first_record_ms"`
			TopicsReadyMS *int64 `json:"topics_ready_ms"`
			Reason        string `json:"reason"`
		}
		if json.Unmarshal([]byte(lines[i]), &sum) == nil && sum.FirstRecordMS != nil && sum.Reason != "" {
			ready := int64(-1)
			if sum.TopicsReadyMS != nil {
				ready = *sum.TopicsReadyMS
			}
			return *sum.FirstRecordMS, ready, nil
		}
	}
	return -1, -1, fmt.Errorf("no burst summary in %s", logPath)
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

// buildBaseline builds functions/mirror as it is at git revision rev into bin, from a copy of
// that revision's tree (git archive), and returns the commit the revision names.
func (h *harness) buildBaseline(ctx context.Context, rev, bin string) (string, error) {
	out, err := h.cmd(ctx, "git", "rev-parse", "--verify", rev+"^{commit}").Output()
	if err != nil {
		return "", fmt.Errorf("-baseline %q: not a commit of this repository: %w", rev, err)
	}
	commit := strings.TrimSpace(string(out))
	src := filepath.Join(h.home, "baseline-"+commit[:12])
	if err := os.RemoveAll(src); err != nil {
		return "", err
	}
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	archive := h.cmd(ctx, "git", "archive", commit)
	untar := exec.CommandContext(ctx, "tar", "-x", "-C", src)
	if untar.Stdin, err = archive.StdoutPipe(); err != nil {
		return "", err
	}
	if err := untar.Start(); err != nil {
		return "", fmt.Errorf("-baseline: unpacking %s: %w", commit, err)
	}
	var stderr strings.Builder
	archive.Stderr = &stderr
	if err := archive.Run(); err != nil {
		return "", fmt.Errorf("-baseline: git archive %s: %w\n%s", commit, err, stderr.String())
	}
	if err := untar.Wait(); err != nil {
		return "", fmt.Errorf("-baseline: unpacking %s: %w", commit, err)
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./functions/mirror")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("-baseline: building functions/mirror at %s: %w\n%s", commit, err, out)
	}
	return commit, os.RemoveAll(src)
}
