package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/test/rawcopy"
)

// rawCopyCommand is the first argument that makes this program the raw copy (a child
// process of the bench, so the OS measures its CPU and memory like every other contender's).
const rawCopyCommand = "rawcopy"

// rawCopyMain runs the raw copy (package rawcopy) from its command line; the harness creates
// the target topics first.
func rawCopyMain(args []string) int {
	fs := flag.NewFlagSet(rawCopyCommand, flag.ContinueOnError)
	source := fs.String("source", "", "source bootstrap servers")
	target := fs.String("target", "", "target bootstrap servers")
	topics := fs.String("topics", "", "comma-separated source topics")
	prefix := fs.String("prefix", "raw.", "prefix of the target topics")
	compression := fs.String("compression", "", "target producer compression: lz4, zstd or empty")
	maxBatch := fs.Int("max-request-size", cluster.DefaultMaxRequestSize, "target producer batch bound in bytes (default: mm2go's)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	n, err := rawcopy.Copy(ctx, rawcopy.Options{Source: *source, Target: *target, Topics: strings.Split(*topics, ","), Prefix: *prefix, Compression: *compression, MaxRequestSize: *maxBatch})
	if err != nil {
		fmt.Fprintf(os.Stderr, "raw copy failed after %d records: %v\n", n, err)
		return 1
	}
	fmt.Printf("raw copy: %d records\n", n)
	return 0
}

// runRaw creates the raw copy's target topics (as many partitions as the source's) and runs
// the raw copy as a child process until every record is on the target.
func (h *harness) runRaw(ctx context.Context, w workload, topics []string) (contender, error) {
	const prefix = "raw."
	remote := make([]string, len(topics))
	for i, t := range topics {
		remote[i] = prefix + t
	}
	for i := 0; i < len(remote); i += 100 {
		resp, err := h.tgtAdm.CreateTopics(ctx, w.Partitions, 1, nil, remote[i:min(i+100, len(remote))]...)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			return contender{}, fmt.Errorf("creating the raw copy's target topics: %w", err)
		}
	}
	if err := h.waitTopics(ctx, remote); err != nil {
		return contender{}, err
	}
	args := []string{rawCopyCommand, "-source", h.source, "-target", h.target, "-topics", strings.Join(topics, ","),
		"-prefix", prefix, "-compression", w.Compression}
	cmd := exec.CommandContext(ctx, h.self, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	c, err := h.watch(ctx, []*exec.Cmd{cmd}, remote, int64(w.totalRecords()), w.totalBytes(), func() {}, false)
	c.Name = nameRaw
	if err != nil {
		err = fmt.Errorf("%w\n%s", err, out.String())
	}
	return c, err
}
