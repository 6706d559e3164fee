// Command perf is a small repeatable measurement of `mirror run`'s cost, for profiling work on
// the per-record path (docs/performance.md). It seeds a source topic once (kept between runs,
// reused when it already holds the records), then copies it into a fresh flow (new aliases, so
// a fresh remote topic and no stored positions) several times and prints, per run, the wall
// time, records per second, the process's CPU time (utime+stime from the OS, rusage) per GB
// copied and its peak RSS. Every run is checked: the remote topic must hold every record.
//
//	go run ./test/perf -source 127.0.0.1:43092 -target 127.0.0.1:44092 -runs 3
//	go run ./test/perf ... -contender raw   # the bench's bare franz-go copy (test/rawcopy)
//
// With -cpuprofile DIR each mirror run writes DIR/cpu-N.pprof and DIR/allocs-N.pprof
// (MM2_CPU_PROFILE, MM2_ALLOC_PROFILE). The bench harness (test/bench) is the full comparison;
// this one measures one contender at a time, quickly.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/test/rawcopy"
)

type options struct {
	source, target     string
	records, size      int
	partitions, topics int
	runs               int
	contender          string
	mirrorBin          string
	profileDir         string
	extraEnv           string
	compression        string
	batch              int
}

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "rawcopy" || os.Args[1] == "forward") {
		if err := rawCopy(os.Args[1] == "forward", os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, os.Args[1]+":", err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.StringVar(&o.source, "source", "127.0.0.1:43092", "source bootstrap server")
	flag.StringVar(&o.target, "target", "127.0.0.1:44092", "target bootstrap server")
	flag.IntVar(&o.records, "records", 1_000_000, "records per topic")
	flag.IntVar(&o.size, "size", 512, "value bytes per record")
	flag.IntVar(&o.partitions, "partitions", 8, "partitions per topic")
	flag.IntVar(&o.topics, "topics", 1, "source topics")
	flag.IntVar(&o.runs, "runs", 3, "measured runs")
	flag.StringVar(&o.contender, "contender", "mirror", "mirror (mirror run), raw (franz-go fetch-then-produce) or forward (batches forwarded as bytes, rawcopy.Forward)")
	flag.StringVar(&o.mirrorBin, "mirror", "", "mirror binary (default: built into a temporary directory)")
	flag.StringVar(&o.profileDir, "cpuprofile", "", "directory for CPU and allocation profiles of each mirror run")
	flag.StringVar(&o.extraEnv, "env", "", "extra environment for mirror run, comma separated K=V")
	flag.StringVar(&o.compression, "compression", "none", "compression of the seeded source batches (none, lz4, zstd)")
	flag.IntVar(&o.batch, "batch", 1<<20, "largest seeded source batch in bytes (the bench's producer perf test writes 16384)")
	flag.Parse()
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "perf:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	topics := make([]string, o.topics)
	for i := range topics {
		topics[i] = fmt.Sprintf("perf-%dx%d-p%d-%s-b%d-%d", o.records, o.size, o.partitions, o.compression, o.batch, i)
	}
	if err := seed(ctx, o, topics); err != nil {
		return fmt.Errorf("seeding: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if o.contender == "mirror" && o.mirrorBin == "" {
		dir, err := os.MkdirTemp("", "perf-mirror")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		o.mirrorBin = filepath.Join(dir, "mirror")
		build := exec.CommandContext(ctx, "go", "build", "-o", o.mirrorBin, "./functions/mirror")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building mirror: %w", err)
		}
	}
	bytes := float64(o.topics*o.records) * float64(o.size+7) // values plus the 7-byte keys
	fmt.Printf("%-8s %4s %7s %8s %6s %6s %6s %8s %8s %8s %8s\n", "contender", "run", "wall_s", "rec/s", "user_s", "sys_s", "cpu_s", "cpu_s/GB", "rss_MiB", "first_ms", "ready_ms")
	for i := 1; i <= o.runs; i++ {
		stamp := fmt.Sprintf("%d", time.Now().UnixMilli()%1e10) // a fresh flow per run
		var cmd *exec.Cmd
		var remote, internal, sourceInternal []string // the run's topics, deleted after it
		switch o.contender {
		case "mirror":
			src, tgt := "ps"+stamp, "pt"+stamp
			cmd = exec.CommandContext(ctx, o.mirrorBin, "run")
			cmd.Env = append(os.Environ(),
				"MM2_SOURCE_BOOTSTRAP_SERVERS="+o.source, "MM2_TARGET_BOOTSTRAP_SERVERS="+o.target,
				"MM2_SOURCE_ALIAS="+src, "MM2_TARGET_ALIAS="+tgt, "MM2_TOPICS="+strings.Join(topics, ","),
				"MM2_REPLICATION_FACTOR=1", "MM2_OFFSET_STORAGE_REPLICATION_FACTOR=1",
				"MM2_OFFSET_SYNCS_TOPIC_REPLICATION_FACTOR=1", "MM2_LOG_FORMAT=json", "MM2_LOG_LEVEL=warn")
			if o.extraEnv != "" {
				cmd.Env = append(cmd.Env, strings.Split(o.extraEnv, ",")...)
			}
			if o.profileDir != "" {
				cmd.Env = append(cmd.Env,
					"MM2_CPU_PROFILE="+filepath.Join(o.profileDir, fmt.Sprintf("cpu-%d.pprof", i)),
					"MM2_ALLOC_PROFILE="+filepath.Join(o.profileDir, fmt.Sprintf("allocs-%d.pprof", i)))
			}
			for _, t := range topics {
				remote = append(remote, src+"."+t)
			}
			internal = []string{"mm2-offsets." + src + ".internal"}
			sourceInternal = []string{"mm2-offset-syncs." + tgt + ".internal"}
		case "raw", "forward":
			prefix := o.contender + stamp + "."
			for _, t := range topics {
				remote = append(remote, prefix+t)
			}
			sub := map[string]string{"raw": "rawcopy", "forward": "forward"}[o.contender]
			cmd = exec.CommandContext(ctx, self, sub, o.source, o.target, strconv.Itoa(o.partitions), strings.Join(topics, ","), prefix)
		default:
			return fmt.Errorf("-contender %q: want mirror, raw or forward", o.contender)
		}
		if o.extraEnv != "" && o.contender != "mirror" {
			cmd.Env = append(os.Environ(), strings.Split(o.extraEnv, ",")...)
		}
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, os.Stderr
		start := time.Now()
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("run %d: %w", i, err)
		}
		hwm := watchHWM(cmd.Process.Pid)
		if err := cmd.Wait(); err != nil {
			return fmt.Errorf("run %d: %w", i, err)
		}
		wall := time.Since(start)
		rss := <-hwm
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		user, sys := time.Duration(ru.Utime.Nano()).Seconds(), time.Duration(ru.Stime.Nano()).Seconds()
		cpu := user + sys
		if err := check(ctx, o, out.String(), remote, internal, sourceInternal); err != nil {
			return fmt.Errorf("run %d: %w", i, err)
		}
		n := float64(o.topics * o.records)
		// mirror run's summary: from the burst's start to the first acknowledged record, and
		// to its remote topics being ready.
		first, ready := summaryField(out.String(), "first_record_ms"), summaryField(out.String(), "topics_ready_ms")
		fmt.Printf("%-8s %4d %7.2f %8.0f %6.2f %6.2f %6.2f %8.2f %8.1f %8s %8s\n", o.contender, i, wall.Seconds(), n/wall.Seconds(), user, sys, cpu, cpu/(bytes/1e9), float64(rss)/1024, first, ready)
	}
	return nil
}

// summaryField returns the number after "name": in mirror run's output, "-" if absent.
func summaryField(out, name string) string {
	_, rest, ok := strings.Cut(out, `"`+name+`":`)
	if !ok {
		return "-"
	}
	v, _, _ := strings.Cut(rest, ",")
	return v
}

// watchHWM polls the process's peak resident set (VmHWM, KiB) until it exits and then sends
// the last figure read. rusage's Maxrss is not used: it also counts this (forking) process's
// resident set before the exec.
func watchHWM(pid int) <-chan int64 {
	out := make(chan int64, 1)
	go func() {
		var last int64
		for {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err != nil {
				out <- last
				return
			}
			for _, line := range strings.Split(string(b), "\n") {
				if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
					if v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64); err == nil && v > 0 {
						last = v
					}
				}
			}
			if strings.Contains(string(b), "State:\tZ") {
				out <- last
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return out
}

// seed creates the source topics and produces the records, unless they are there already.
func seed(ctx context.Context, o options, topics []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(o.source), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(int32(o.batch)), kgo.ProducerBatchCompression(codec(o.compression)))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err == nil {
		have := true
		for _, t := range topics {
			var sum int64
			ends.Each(func(lo kadm.ListedOffset) {
				if lo.Topic == t && lo.Err == nil {
					sum += lo.Offset
				}
			})
			have = have && sum == int64(o.records)
		}
		if have {
			return nil
		}
	}
	if _, err := adm.CreateTopics(ctx, int32(o.partitions), 1, nil, topics...); err != nil {
		return err
	}
	value := make([]byte, o.size)
	if o.compression != "none" {
		copy(value, strings.Repeat("mm2go compressible text ", o.size/24+1))
	}
	var firstErr error
	for _, t := range topics {
		for i := range o.records {
			if o.compression == "none" {
				_, _ = rand.Read(value)
			}
			r := &kgo.Record{Topic: t, Key: []byte(fmt.Sprintf("%07d", i%10_000_000)), Value: append([]byte(nil), value...)}
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil && firstErr == nil {
					firstErr = err
				}
			})
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	return firstErr
}

func codec(name string) kgo.CompressionCodec {
	switch name {
	case "lz4":
		return kgo.Lz4Compression()
	case "zstd":
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

// check fails unless the remote topics hold every record (exactly-once: the run copied every
// record once, and the remote partitions end at least there), then deletes the run's topics.
func check(ctx context.Context, o options, out string, remote, internal, sourceInternal []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(o.target))
	if err != nil {
		return err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, remote...)
	if err != nil {
		return err
	}
	var sum int64
	ends.Each(func(lo kadm.ListedOffset) { sum += lo.Offset })
	want := int64(o.topics * o.records)
	if strings.Contains(o.extraEnv, "MM2_EXACTLY_ONCE=true") {
		// Exactly-once: the remote partitions also hold a commit marker per transaction, so
		// their ends are past the records; the run's own count must be every record once.
		if n := summaryField(out, "records"); sum < want || n != strconv.FormatInt(want, 10) {
			return fmt.Errorf("remote topics end at %d in all, want at least %d; the run copied %s records, want %d", sum, want, n, want)
		}
	} else if sum != want {
		return fmt.Errorf("remote topics hold %d records, want %d", sum, want)
	}
	// Every run writes a fresh flow: delete it, or repeated runs fill the disk (a 1 GB
	// workload run twenty times is 20 GB of remote topics) and slow the brokers down (each
	// flow's positions topic has 25 partitions).
	if err := deleteTopics(ctx, o.target, append(remote, internal...)); err != nil {
		return err
	}
	return deleteTopics(ctx, o.source, sourceInternal)
}

// deleteTopics deletes topics on the cluster at bootstrap; a topic already gone is fine.
func deleteTopics(ctx context.Context, bootstrap string, topics []string) error {
	if len(topics) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).DeleteTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("deleting %v on %s: %w", topics, bootstrap, err)
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("deleting %s on %s: %w", r.Topic, bootstrap, r.Err)
		}
	}
	return nil
}

// rawCopy creates the remote topics (partitions each) and runs the raw copy (package rawcopy)
// into them, with no target compression, as `mirror run` copies here, or with forward the
// batch forwarder (rawcopy.Forward). Arguments: source, target, partitions, source topics
// (comma separated), prefix of the remote topics.
func rawCopy(forward bool, args []string) error {
	if len(args) != 5 {
		return errors.New("want source target partitions topics prefix")
	}
	ctx := context.Background()
	parts, err := strconv.Atoi(args[2])
	if err != nil {
		return fmt.Errorf("partitions %q: %w", args[2], err)
	}
	topics, prefix := strings.Split(args[3], ","), args[4]
	adm, err := kgo.NewClient(kgo.SeedBrokers(args[1]))
	if err != nil {
		return err
	}
	remotes := make([]string, len(topics))
	for i, t := range topics {
		remotes[i] = prefix + t
	}
	created, err := kadm.NewClient(adm).CreateTopics(ctx, int32(parts), 1, nil, remotes...)
	adm.Close()
	if err == nil {
		err = created.Error()
	}
	if err != nil {
		return fmt.Errorf("creating %s: %w", strings.Join(remotes, ", "), err)
	}
	ro := rawcopy.Options{Source: args[0], Target: args[1], Topics: topics, Prefix: prefix, MaxRequestSize: cluster.DefaultMaxRequestSize}
	if forward {
		_, err = rawcopy.Forward(ctx, ro)
	} else {
		_, err = rawcopy.Copy(ctx, ro)
	}
	return err
}
