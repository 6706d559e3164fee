// Command bench measures mm2go against genuine MirrorMaker 2 and against the brokers' own
// limits, side by side, in one run, on the same data and machine. Run it with `make bench`.
//
// For every workload it:
//  1. starts from fresh topics on two local Kafka clusters (test/kafka/kafka.sh),
//  2. measures the brokers' limits with Kafka's own perf tools (producer into the target,
//     consumer from the source),
//  3. lets real MirrorMaker 2 (dedicated mode) drain the backlog,
//  4. lets `mirror run` drain the same backlog under another source alias (so neither sees the
//     other's positions),
//
// and prints a Markdown table and writes it with a JSON copy under test/bench/results.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

func main() {
	var opts options
	flag.StringVar(&opts.out, "out", "test/bench/results", "directory for latest.md and latest.json")
	flag.StringVar(&opts.only, "only", "", "comma-separated workload names to run (default: all)")
	flag.Float64Var(&opts.scale, "scale", 1, "multiply record counts (e.g. 0.1 for a quick run)")
	flag.BoolVar(&opts.skipMM2, "skip-mm2", false, "do not run real MirrorMaker 2")
	flag.BoolVar(&opts.skipMirror, "skip-mirror", false, "do not run mm2go's mirror run (harness check only)")
	flag.BoolVar(&opts.skipServe, "skip-serve", false, "do not run mm2go's mirror serve (fetch mode driven by the genuine Knative dispatcher)")
	flag.IntVar(&opts.sourcePort, "source-port", 61092, "PLAINTEXT port of the bench source cluster")
	flag.IntVar(&opts.targetPort, "target-port", 62092, "PLAINTEXT port of the bench target cluster")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
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
	skipServe              bool
	sourcePort, targetPort int
}

func run(ctx context.Context, opts options, logger *slog.Logger) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	h := &harness{root: root, home: filepath.Join(root, "test", "kafka", "state-bench"), logger: logger}
	bin := filepath.Join(h.home, "bin")
	h.mirrorBin = filepath.Join(bin, "mirror")
	if !opts.skipMirror {
		logger.Info("building mm2go", "dir", bin)
		if out, err := h.cmd(ctx, "go", "build", "-o", h.mirrorBin, "./functions/mirror").CombinedOutput(); err != nil {
			return fmt.Errorf("building functions/mirror: %w\n%s", err, out)
		}
	}
	if err := h.startClusters(ctx, opts.sourcePort, opts.targetPort); err != nil {
		return err
	}
	defer h.stopClusters()

	rep := report{Machine: machine(), Started: time.Now().UTC()}
	for _, w := range workloads(opts.scale) {
		if opts.only != "" && !contains(strings.Split(opts.only, ","), w.Name) {
			continue
		}
		logger.Info("workload", "name", w.Name, "topics", w.Topics, "partitions", w.Partitions, "records", w.Records, "size", w.Size)
		res, err := h.runWorkload(ctx, w, opts)
		if err != nil {
			return fmt.Errorf("workload %s: %w", w.Name, err)
		}
		rep.Results = append(rep.Results, res)
		fmt.Println(res.markdownRow())
	}
	rep.Finished = time.Now().UTC()
	return rep.write(opts.out)
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
}

func (w workload) totalRecords() int { return w.Topics * w.Records }
func (w workload) totalBytes() int64 { return int64(w.Topics) * int64(w.Records) * int64(w.Size) }

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

// machine describes where the figures were measured.
func machine() map[string]string {
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
	if out, err := exec.Command("java", "-version").CombinedOutput(); err == nil {
		m["java"] = strings.SplitN(string(out), "\n", 2)[0]
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
	Results  []result          `json:"results"`
}

func (r report) write(dir string) error {
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
	fmt.Println()
	fmt.Println(md)
	return os.WriteFile(filepath.Join(dir, "latest.md"), []byte(md), 0o644)
}
