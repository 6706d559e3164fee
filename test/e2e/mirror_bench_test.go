package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/mm2go/mm2go/test/testkit"
)

// TestMirrorBurstThroughput measures one `mirror run` burst over a large topic (default
// 400,000 records of 512 bytes in 8 partitions, about 205 MB): records/s, MB/s, peak RSS and
// the time from process start to the first acknowledged record. It only runs with
// MM2GO_BENCH=1 (MM2GO_BENCH_RECORDS, MM2GO_BENCH_SIZE override the shape) and asserts the
// outcome (every record copied), never a speed.
func TestMirrorBurstThroughput(t *testing.T) {
	if os.Getenv("MM2GO_BENCH") == "" {
		t.Skip("set MM2GO_BENCH=1 to run the burst benchmark")
	}
	c := testkit.Require(t)
	n, size := 400000, 512
	if v, err := strconv.Atoi(os.Getenv("MM2GO_BENCH_RECORDS")); err == nil {
		n = v
	}
	if v, err := strconv.Atoi(os.Getenv("MM2GO_BENCH_SIZE")); err == nil {
		size = v
	}
	topic := bigTopic(t, c, 8, n, size)
	bin := MirrorBinary(t)
	if b := os.Getenv("MM2GO_BENCH_BINARY"); b != "" {
		bin = b
	}
	cmd := exec.Command(bin, "run")
	cmd.Env = append(MirrorEnv(c, topic), os.Environ()...)
	if v := os.Getenv("MM2GO_BENCH_CHILD_ENV"); v != "" {
		cmd.Env = append(cmd.Env, v) // e.g. GODEBUG=gctrace=1 for the mirror process only
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("MM2GO_BENCH_SAMPLE") != "" {
		go func() {
			for {
				b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/status")
				if err != nil {
					return
				}
				for _, l := range bytes.Split(b, []byte("\n")) {
					if bytes.HasPrefix(l, []byte("VmRSS")) || bytes.HasPrefix(l, []byte("RssAnon")) || bytes.HasPrefix(l, []byte("RssFile")) {
						t.Logf("%s %s", time.Since(began).Round(time.Millisecond), l)
					}
				}
				time.Sleep(300 * time.Millisecond)
			}
		}()
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("mirror run: %v\n%s", err, stderr.String())
	}
	wall := time.Since(began)
	if os.Getenv("MM2GO_BENCH_CHILD_ENV") != "" {
		t.Logf("mirror stderr:\n%s", stderr.String())
	}
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss // KiB on Linux
	}
	r := MirrorResult{Stdout: stdout.String()}
	res := RunMirrorSummary(t, stdout.Bytes())
	r.Summary = res
	if got := r.Records(); got != int64(n) {
		t.Fatalf("copied %d records, want %d\n%s", got, n, stderr.String())
	}
	dur := time.Duration(res["duration_ms"].(float64)) * time.Millisecond
	bytesCopied := res["bytes"].(float64)
	t.Logf("burst of %d x %d B: process wall %s, burst %s, %.0f records/s, %.1f MB/s (burst), peak RSS %.1f MB, first record %v ms after burst start",
		n, size, wall.Round(time.Millisecond), dur, float64(n)/dur.Seconds(), bytesCopied/1e6/dur.Seconds(), float64(rss)/1024, res["first_record_ms"])
}
