// Command bench measures mm2go against genuine MirrorMaker 2 and against the brokers' own
// limits, side by side, in one run, on the same data and machine. Run it with `make bench`.
//
// For every workload it:
//  1. starts from fresh topics on two local Kafka clusters (test/kafka/kafka.sh),
//  2. measures the brokers' limits with Kafka's own perf tools (producer into the target,
//     consumer from the source) and the ceiling: the producer perf test with large batches
//     (one and several processes), and a raw franz-go fetch-then-produce copy,
//  3. lets real MirrorMaker 2 (dedicated mode), as configured by default and tuned, drain the
//     backlog,
//  4. lets `mirror run` (one process, and two splitting the partitions by burst group where
//     the workload asks for it) and `mirror serve` drain the same backlog under other source
//     aliases (so none sees another's positions),
//  5. checks every copy against the source (records per partition, and a byte comparison of
//     a sample at the same offsets), then deletes the copy,
//
// and prints Markdown tables and writes them with a JSON copy under test/bench/results.
// README.md beside this file describes the workloads and contenders.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == rawCopyCommand {
		os.Exit(rawCopyMain(os.Args[2:]))
	}
	var opts options
	flag.StringVar(&opts.out, "out", "test/bench/results", "directory for latest.md and latest.json")
	flag.StringVar(&opts.only, "only", "", "comma-separated workload names to run (default: all)")
	flag.Float64Var(&opts.scale, "scale", 1, "multiply record counts (e.g. 0.1 for a quick run)")
	flag.BoolVar(&opts.skipMM2, "skip-mm2", false, "do not run real MirrorMaker 2")
	flag.BoolVar(&opts.skipMirror, "skip-mirror", false, "do not run mm2go's mirror run (harness check only)")
	flag.BoolVar(&opts.skipServe, "skip-serve", false, "do not run mm2go's mirror serve (fetch mode driven by the genuine Knative dispatcher)")
	flag.IntVar(&opts.sourcePort, "source-port", 61092, "PLAINTEXT port of the bench source cluster")
	flag.IntVar(&opts.targetPort, "target-port", 62092, "PLAINTEXT port of the bench target cluster")
	flag.BoolVar(&opts.skipTuned, "skip-mm2-tuned", false, "do not run the tuned MirrorMaker 2")
	flag.BoolVar(&opts.skipEOS, "skip-eos", false, "do not run the exactly-once mirror run (MM2_EXACTLY_ONCE=true)")
	flag.BoolVar(&opts.skipVariants, "skip-variants", false, "do not run mirror run's variants (record by record, 256 MiB): the default mirror run (and the -baseline) only")
	flag.BoolVar(&opts.skipCeiling, "skip-ceiling", false, "do not measure the ceiling (large-batch producer perf tests, raw franz-go copy)")
	flag.StringVar(&opts.ceilingProcs, "ceiling-procs", "1,2", "comma-separated numbers of parallel producer perf processes to try for the ceiling (262144-byte batches); one process also tries 1048576-byte batches")
	flag.IntVar(&opts.rounds, "rounds", 1, "run every contender this many times, interleaved (each contender's first run, then each one's second...); a row is the run with the median done time, the rounds' spread in its notes (resumed workloads and mirror serve run once)")
	flag.StringVar(&opts.baseline, "baseline", "", "also run `mirror run` built from this git revision (a commit, tag or branch) as the contender \""+nameBaseline+"\", interleaved with the others in every round: a before/after comparison of two builds on the same brokers")
	flag.BoolVar(&opts.keepTopics, "keep-topics", false, "keep every copy and source topic on the clusters (default: delete each copy once checked, and a workload's source topics at its end)")
	flag.DurationVar(&opts.timeout, "timeout", 4*time.Hour, "bound on the whole run")
	flag.StringVar(&opts.freshRates, "fresh-rates", "100,1000,10000", "freshness workload: the producers' rates in records/s, one phase each")
	flag.DurationVar(&opts.fresh.phase, "fresh-phase", 40*time.Second, "freshness workload: how long each rate is produced")
	flag.IntVar(&opts.fresh.slowRate, "fresh-slow-rate", 1000, "freshness workload: the one rate of `mirror run` every 60 s")
	flag.DurationVar(&opts.fresh.slowPhase, "fresh-slow-phase", 3*time.Minute, "freshness workload: how long `mirror run` every 60 s is fed")
	flag.DurationVar(&opts.fresh.heartbeat, "fresh-heartbeat", 10*time.Second, "freshness workload: a `heartbeat run` round this often beside each contender (0: none)")
	flag.StringVar(&opts.freshRows, "fresh-rows", "", "freshness workload: comma-separated contenders to run (mm2, mm2-tuned, serve-fetch, serve-payload, serve-ping, run-10s, run-60s; default all)")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	// Interrupted, the run still stops its clusters and children (contexts end them).
	sigCtx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(sigCtx, opts.timeout)
	defer cancel()
	if err := run(ctx, opts, logger); err != nil {
		logger.Error("bench failed", "err", err)
		os.Exit(1)
	}
}

type options struct {
	out, only              string
	scale                  float64
	skipMM2, skipMirror    bool
	skipServe, skipTuned   bool
	skipCeiling            bool
	skipVariants           bool
	skipEOS                bool
	ceilingProcs           string
	keepTopics             bool
	rounds                 int
	baseline               string
	timeout                time.Duration
	sourcePort, targetPort int
	// fresh shapes the freshness workload (-only freshness runs it alone), from the
	// -fresh-* flags.
	fresh                 freshOptions
	freshRates, freshRows string
}

func run(ctx context.Context, opts options, logger *slog.Logger) error {
	var err error
	if opts.fresh.rates, err = parseRates(opts.freshRates); err != nil {
		return err
	}
	if opts.freshRows != "" {
		opts.fresh.rows = strings.Split(opts.freshRows, ",")
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	h := &harness{root: root, home: filepath.Join(root, "test", "kafka", "state-bench"), logger: logger}
	h.lib = os.Getenv("MM2GO_KAFKA_LIB")
	if h.lib == "" {
		h.lib = filepath.Join(root, "test", "kafka", ".cache", "lib")
	}
	if h.self, err = os.Executable(); err != nil {
		return fmt.Errorf("finding the bench's own executable (for the raw copy): %w", err)
	}
	bin := filepath.Join(h.home, "bin")
	h.mirrorBin = filepath.Join(bin, "mirror")
	if !opts.skipMirror {
		logger.Info("building mm2go", "dir", bin)
		if out, err := h.cmd(ctx, "go", "build", "-o", h.mirrorBin, "./functions/mirror").CombinedOutput(); err != nil {
			return fmt.Errorf("building functions/mirror: %w\n%s", err, out)
		}
	}
	var baselineCommit string
	if opts.baseline != "" && !opts.skipMirror {
		h.baselineBin = filepath.Join(bin, "mirror-baseline")
		if baselineCommit, err = h.buildBaseline(ctx, opts.baseline, h.baselineBin); err != nil {
			return err
		}
		logger.Info("built the baseline", "revision", opts.baseline, "commit", baselineCommit)
	}
	if err := h.startClusters(ctx, opts.sourcePort, opts.targetPort); err != nil {
		return err
	}
	defer h.stopClusters()

	rep := report{Machine: machine(h.lib), Started: time.Now().UTC(), Scale: opts.scale, Settings: contenderSettings()}
	if baselineCommit != "" {
		rep.Machine["baseline commit"] = baselineCommit
	}
	all := workloads(opts.scale)
	only := strings.Split(opts.only, ",")
	if opts.only != "" {
		for _, name := range only {
			if name = strings.TrimSpace(name); name != freshWorkload && name != slowSyncsWorkload && !containsWorkload(all, name) {
				return fmt.Errorf("-only: no workload named %q (workloads: %s, %s, %s)", name, workloadNames(all), slowSyncsWorkload, freshWorkload)
			}
		}
	}
	backlogs := 0
	for _, w := range all {
		if opts.only != "" && !contains(only, w.Name) {
			continue
		}
		backlogs++
		logger.Info("workload", "name", w.Name, "topics", w.Topics, "partitions", w.Partitions, "records", w.Records, "size", w.Size)
		res, err := h.runWorkload(ctx, w, opts)
		if err != nil {
			return fmt.Errorf("workload %s: %w", w.Name, err)
		}
		rep.Results = append(rep.Results, res)
		fmt.Println(res.markdownTable())
		// Write after every workload: a long run that fails later keeps what it measured.
		rep.Finished = time.Now().UTC()
		if err := rep.write(opts.out, false); err != nil {
			return err
		}
	}
	if backlogs > 0 {
		rep.Finished = time.Now().UTC()
		if err := rep.write(opts.out, true); err != nil {
			return err
		}
	}
	if opts.only == "" || contains(only, slowSyncsWorkload) {
		if err := h.runSlowSyncs(ctx, opts.rounds, opts.out); err != nil {
			return fmt.Errorf("workload %s: %w", slowSyncsWorkload, err)
		}
	}
	if opts.only == "" || contains(only, freshWorkload) {
		return h.runFreshness(ctx, opts.fresh, opts.out)
	}
	return nil
}

type workload struct {
	Name       string `json:"name"`
	Topics     int    `json:"topics"`
	Partitions int32  `json:"partitions"`
	Records    int    `json:"records_per_topic"`
	Size       int    `json:"record_bytes"`
	// Resumed: every contender first copies a first set of records (not measured), so its
	// topics and stored positions exist; then the records are produced again and the measured
	// run copies only those: the cost of a scale-to-zero instance picking up where it stopped.
	Resumed bool `json:"resumed,omitempty"`
	// Compression is the source producer's codec (lz4, zstd; empty: none). The source records
	// are then text-like (varied lines of words, so they compress as logs do), and every
	// contender's target producer uses the same codec.
	Compression string `json:"compression,omitempty"`
	// Split adds the contender of two `mirror run` processes sharing the partitions through a
	// burst group.
	Split bool `json:"split,omitempty"`
	// ScaleOut runs only 1, 2 and 4 `mirror run` processes of one burst group, each with its
	// own client id, through a produce quota of 2 MiB/s per client id on the target: how the
	// time to done scales with instances when one instance's bandwidth is the limit.
	ScaleOut bool `json:"scale_out,omitempty"`
}

func (w workload) totalRecords() int { return w.Topics * w.Records }

// perfSeeded tells whether Kafka's producer perf test fills the source (records without
// keys); otherwise the harness produces records keyed by their index with franz-go.
func (w workload) perfSeeded() bool {
	return w.Topics == 1 && (w.Records >= 100 || w.maxRequestSize() > 0)
}

// totalBytes are the bytes of the source records, key + value + headers (none), the GB of
// the CPU-seconds-per-GB figure and of MB/s, the same for every contender.
func (w workload) totalBytes() int64 {
	if w.perfSeeded() {
		return int64(w.Topics) * int64(w.Records) * int64(w.Size)
	}
	var keys int64
	for i := 0; i < w.Records; i++ {
		keys += int64(len(strconv.Itoa(i)))
	}
	return int64(w.Topics) * (keys + int64(w.Records)*int64(w.Size))
}

// maxRequestSize is the batch bound the harness's own franz-go producer needs to seed the
// workload's records (0: franz-go's default). Records of 1,000,000 bytes do not fit franz-go's
// default batch of 1,000,012 bytes with the batch's overhead; Kafka's default of 1 MiB (which
// the Java clients and mm2go use) is set instead.
func (w workload) maxRequestSize() int {
	if w.Size > 900_000 {
		return 1 << 20
	}
	return 0
}

func workloads(scale float64) []workload {
	n := func(v int) int {
		s := int(float64(v) * scale)
		if s < 1 {
			s = 1
		}
		return s
	}
	return []workload{
		{Name: "1M-x-512B", Topics: 1, Partitions: 8, Records: n(1_000_000), Size: 512},
		{Name: "200k-x-4KB", Topics: 1, Partitions: 8, Records: n(200_000), Size: 4096},
		{Name: "50-topics", Topics: 50, Partitions: 1, Records: n(2_000), Size: 512},
		{Name: "tiny-10", Topics: 1, Partitions: 1, Records: 10, Size: 512},
		{Name: "tiny-10-resumed", Topics: 1, Partitions: 1, Records: 10, Size: 512, Resumed: true},
		{Name: "lz4-1M-x-512B", Topics: 1, Partitions: 8, Records: n(1_000_000), Size: 512, Compression: "lz4"},
		{Name: "zstd-1M-x-512B", Topics: 1, Partitions: 8, Records: n(1_000_000), Size: 512, Compression: "zstd"},
		{Name: "1000-partitions", Topics: 100, Partitions: 10, Records: n(2_000), Size: 512},
		{Name: "1k-x-1MB", Topics: 1, Partitions: 8, Records: n(1_000), Size: 1_000_000},
		{Name: "10GB-backlog", Topics: 1, Partitions: 8, Records: n(2_500_000), Size: 4096},
		{Name: "split-1M-x-512B", Topics: 1, Partitions: 16, Records: n(1_000_000), Size: 512, Split: true},
		{Name: "scale-out", Topics: 1, Partitions: 8, Records: n(200_000), Size: 512, ScaleOut: true},
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if strings.TrimSpace(v) == s {
			return true
		}
	}
	return false
}

func containsWorkload(all []workload, name string) bool {
	for _, w := range all {
		if w.Name == name {
			return true
		}
	}
	return false
}

func workloadNames(all []workload) string {
	names := make([]string, len(all))
	for i, w := range all {
		names[i] = w.Name
	}
	return strings.Join(names, ", ")
}

// machine describes where the figures were measured, and with which versions.
func machine(lib string) map[string]string {
	m := map[string]string{"goos": runtime.GOOS, "goarch": runtime.GOARCH, "cpus": fmt.Sprint(runtime.NumCPU()), "go": runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				m["cpu"] = strings.TrimSpace(strings.SplitN(line, ":", 2)[1])
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		m["memory"] = strings.TrimSpace(strings.TrimPrefix(strings.SplitN(string(b), "\n", 2)[0], "MemTotal:"))
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m["kernel"] = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command("java", "-version").CombinedOutput(); err == nil {
		m["java"] = strings.SplitN(string(out), "\n", 2)[0]
	}
	if jars, _ := filepath.Glob(filepath.Join(lib, "connect-mirror-[0-9]*.jar")); len(jars) > 0 {
		m["kafka"] = strings.TrimSuffix(strings.TrimPrefix(filepath.Base(jars[0]), "connect-mirror-"), ".jar")
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/twmb/franz-go" {
				m["franz-go"] = d.Version
			}
		}
	}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m["mm2go commit"] = strings.TrimSpace(string(out))
	}
	return m
}

func repoRoot() (string, error) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("finding the repository root (run from inside the repo): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

type report struct {
	Machine  map[string]string `json:"machine"`
	Started  time.Time         `json:"started"`
	Finished time.Time         `json:"finished"`
	Scale    float64           `json:"scale"`
	// Settings of every contender, by name.
	Settings []contenderSetting `json:"settings"`
	Results  []result           `json:"results"`
}

func (r report) write(dir string, print bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "latest.json"), js, 0o644); err != nil {
		return err
	}
	md := r.markdown()
	if print {
		fmt.Println()
		fmt.Println(md)
	}
	return os.WriteFile(filepath.Join(dir, "latest.md"), []byte(md), 0o644)
}
