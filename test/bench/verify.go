package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cluster"
)

// verify checks a contender's copy against the source: every remote partition ends at the
// source partition's end offset (every contender copies from the source's start into a
// partition of the same number, so offsets match one to one: no record lost, none twice),
// and a sample of records, at the head and the tail of up to four partitions of up to four
// topics, is byte-identical (key, value, headers) to the source record at the same offset.
// It returns what it checked, or what differed.
func (h *harness) verify(ctx context.Context, w workload, topics, remote []string) (string, error) {
	srcEnds, err := h.srcAdm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = srcEnds.Error()
	}
	if err != nil {
		return "", fmt.Errorf("listing source end offsets: %w", err)
	}
	tgtEnds, err := h.tgtAdm.ListEndOffsets(ctx, remote...)
	if err == nil {
		err = tgtEnds.Error()
	}
	if err != nil {
		return "", fmt.Errorf("listing target end offsets: %w", err)
	}
	var problems []error
	partitions := 0
	for i, t := range topics {
		for p := int32(0); p < w.Partitions; p++ {
			s, _ := srcEnds.Lookup(t, p)
			d, ok := tgtEnds.Lookup(remote[i], p)
			partitions++
			if !ok || d.Offset != s.Offset {
				problems = append(problems, fmt.Errorf("%s[%d] ends at %d, source %s[%d] at %d", remote[i], p, d.Offset, t, p, s.Offset))
			}
		}
	}
	if len(problems) > 0 {
		return "", errors.Join(problems[:min(len(problems), 5)]...)
	}
	// The byte comparison: a sample small enough to stay under a second or so.
	per := 50
	if w.Size > 100_000 {
		per = 2
	} else if w.Size > 2000 {
		per = 20
	}
	compared := 0
	for ti := 0; ti < len(topics); ti += max(1, len(topics)/4) {
		for p := int32(0); p < w.Partitions; p += max(1, w.Partitions/4) {
			s, _ := srcEnds.Lookup(topics[ti], p)
			ranges := [][2]int64{{0, min(int64(per), s.Offset)}}
			if s.Offset > int64(per) {
				ranges = append(ranges, [2]int64{max(int64(per), s.Offset-int64(per)), s.Offset})
			}
			for _, r := range ranges {
				if r[1] <= r[0] {
					continue
				}
				src, err := readRange(ctx, h.source, topics[ti], p, r[0], r[1])
				if err != nil {
					return "", fmt.Errorf("reading the source sample: %w", err)
				}
				dst, err := readRange(ctx, h.target, remote[ti], p, r[0], r[1])
				if err != nil {
					return "", fmt.Errorf("reading the target sample: %w", err)
				}
				for k := range src {
					if k >= len(dst) {
						return "", fmt.Errorf("%s[%d]: %d records at offsets %d-%d, source has %d", remote[ti], p, len(dst), r[0], r[1]-1, len(src))
					}
					if err := sameRecord(src[k], dst[k]); err != nil {
						return "", fmt.Errorf("%s[%d] offset %d: %w", remote[ti], p, dst[k].Offset, err)
					}
					compared++
				}
			}
		}
	}
	return fmt.Sprintf("%d partitions end at the source's offsets; %d records byte-identical", partitions, compared), nil
}

func sameRecord(a, b *kgo.Record) error {
	switch {
	case a.Offset != b.Offset:
		return fmt.Errorf("offset %d where the source has %d", b.Offset, a.Offset)
	case !bytes.Equal(a.Key, b.Key) || (a.Key == nil) != (b.Key == nil):
		return fmt.Errorf("key differs from the source's")
	case !bytes.Equal(a.Value, b.Value):
		return fmt.Errorf("value differs from the source's (%d bytes, source %d)", len(b.Value), len(a.Value))
	case len(a.Headers) != len(b.Headers):
		return fmt.Errorf("%d headers, source %d", len(b.Headers), len(a.Headers))
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !bytes.Equal(a.Headers[i].Value, b.Headers[i].Value) {
			return fmt.Errorf("header %d differs from the source's", i)
		}
	}
	return nil
}

// readRange reads the records of one partition at offsets [from, to).
func readRange(ctx context.Context, bootstrap, topic string, partition int32, from, to int64) ([]*kgo.Record, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(from)}}),
		kgo.FetchMaxWait(100*time.Millisecond), kgo.FetchMaxPartitionBytes(4<<20), kgo.FetchMaxBytes(8<<20))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("%s[%d] offsets %d-%d: %w", topic, partition, from, to-1, err)
		}
		if err := fs.Err(); err != nil {
			return out, fmt.Errorf("%s[%d]: %w", topic, partition, err)
		}
		for _, r := range fs.Records() {
			if r.Offset >= to {
				return out, nil
			}
			out = append(out, r)
			if r.Offset == to-1 {
				return out, nil
			}
		}
	}
}

// topicCompression returns the compression.type of a target topic ("" if unknown).
func (h *harness) topicCompression(ctx context.Context, topic string) string {
	rcs, err := h.tgtAdm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return ""
	}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Key == "compression.type" && c.Value != nil {
				return *c.Value
			}
		}
	}
	return ""
}

// waitTopics waits (at most a minute) until every partition of topics has a leader on the
// target.
func (h *harness) waitTopics(ctx context.Context, topics []string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := cluster.DescribeTopics(ctx, h.clients[1], topics...)
		if err == nil {
			ready := true
			for _, t := range topics {
				if !st[t].Led {
					ready = false
				}
			}
			if ready {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("target topics not led within a minute (%d topics, first %s): %v", len(topics), topics[0], err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// deleteTopics deletes topics on a cluster (sourceCluster or targetCluster), 100 per
// request, logging what fails, and waits until the broker has removed their partitions'
// files. A broker deleting a copy of 1,000 partitions works for seconds, and the next
// contender paid for it: its own new topics were served only after the deletion, and it
// shared the brokers' cores with it (the bench's first record on 1,000 partitions was 1 s,
// most of it "topics ready").
func (h *harness) deleteTopics(ctx context.Context, name string, topics []string) {
	adm := h.srcAdm
	if name == targetCluster {
		adm = h.tgtAdm
	}
	for i := 0; i < len(topics); i += 100 {
		resp, err := adm.DeleteTopics(ctx, topics[i:min(i+100, len(topics))]...)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			h.logger.Warn("deleting bench topics", "first", topics[i], "err", err)
		}
	}
	h.awaitFilesGone(ctx, name, topics)
}

// awaitFilesGone waits, at most two minutes, until the data directory of cluster name holds
// no partition directory of topics (a partition being deleted is renamed to
// TOPIC-PARTITION.ID-delete, then removed after fileDeleteDelay).
func (h *harness) awaitFilesGone(ctx context.Context, name string, topics []string) {
	dir := filepath.Join(h.home, name, "data")
	gone := make(map[string]bool, len(topics))
	for _, t := range topics {
		gone[t] = true
	}
	start := time.Now()
	for {
		left, err := partitionDirs(dir, gone)
		if err != nil {
			// Not a wait to skip in silence: the next contender would share the broker with
			// the deletion again.
			h.logger.Warn("cannot see whether deleted topics' files are gone; going on", "cluster", name, "err", err)
			return
		}
		if left == 0 {
			h.logger.Debug("deleted topics' files gone", "cluster", name, "topics", len(topics), "waited", time.Since(start).Round(time.Millisecond).String())
			return
		}
		if time.Since(start) > 2*time.Minute {
			h.logger.Warn("deleted topics' files still on disk; going on", "cluster", name, "partitions", left)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// partitionDirs counts the partition directories in dir (live, or set aside for deletion) of
// the topics in set.
func partitionDirs(dir string, set map[string]bool) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("reading the broker's data directory: %w", err)
	}
	n := 0
	for _, e := range entries {
		base := e.Name()
		if strings.HasSuffix(base, "-delete") {
			if i := strings.LastIndexByte(base, '.'); i > 0 {
				base = base[:i]
			}
		}
		if i := strings.LastIndexByte(base, '-'); i > 0 && set[base[:i]] {
			n++
		}
	}
	return n, nil
}

// verifyCommitted checks a transactional copy as a read_committed reader sees it: every remote
// partition holds exactly as many committed records as the source partition (which has no
// transactions, so its end offset counts its records), and a sample at the head and the tail
// of up to four partitions of up to four topics is byte-identical, record by record in order,
// to the source's (the target's offsets differ: its transaction markers take offsets too).
func (h *harness) verifyCommitted(ctx context.Context, w workload, topics, remote []string) (string, error) {
	srcEnds, err := h.srcAdm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = srcEnds.Error()
	}
	if err != nil {
		return "", fmt.Errorf("listing source end offsets: %w", err)
	}
	per := 50
	if w.Size > 100_000 {
		per = 2
	} else if w.Size > 2000 {
		per = 20
	}
	sampled := map[string]bool{}
	for ti := 0; ti < len(topics); ti += max(1, len(topics)/4) {
		for p := int32(0); p < w.Partitions; p += max(1, w.Partitions/4) {
			sampled[fmt.Sprintf("%s/%d", remote[ti], p)] = true
		}
	}
	counts, heads, tails, settled, err := readCommitted(ctx, h.target, remote, per, sampled)
	if err != nil {
		return "", err
	}
	var problems []error
	partitions, compared := 0, 0
	for i, t := range topics {
		for p := int32(0); p < w.Partitions; p++ {
			partitions++
			s, _ := srcEnds.Lookup(t, p)
			key := fmt.Sprintf("%s/%d", remote[i], p)
			if n := counts[key]; n != s.Offset {
				problems = append(problems, fmt.Errorf("%s[%d] holds %d committed records, source %s[%d] %d", remote[i], p, n, t, p, s.Offset))
				continue
			}
			if !sampled[key] || s.Offset == 0 {
				continue
			}
			samples := []committedSample{{0, min(int64(per), s.Offset), heads[key]}}
			if s.Offset > int64(per) {
				samples = append(samples, committedSample{s.Offset - int64(per), s.Offset, tails[key]})
			}
			for _, r := range samples {
				src, err := readRange(ctx, h.source, t, p, r.from, r.to)
				if err != nil {
					return "", fmt.Errorf("reading the source sample: %w", err)
				}
				dst := r.dst
				for k := range src {
					if k >= len(dst) {
						return "", fmt.Errorf("%s[%d]: %d committed records sampled, source has %d at offsets %d-%d", remote[i], p, len(dst), len(src), r.from, r.to-1)
					}
					d := *dst[k]
					d.Offset = src[k].Offset // the target's offsets count its transaction markers
					if err := sameRecord(src[k], &d); err != nil {
						return "", fmt.Errorf("%s[%d] committed record %d: %w", remote[i], p, r.from+int64(k), err)
					}
					compared++
				}
			}
		}
	}
	if len(problems) > 0 {
		return "", errors.Join(problems[:min(len(problems), 5)]...)
	}
	return fmt.Sprintf("%d partitions hold the source's records once, read_committed; %d records byte-identical in order%s", partitions, compared, settled), nil
}

// committedSample is the source offsets [from, to) of a partition and the committed records
// read from its copy that must match them, in order.
type committedSample struct {
	from, to int64
	dst      []*kgo.Record
}

// markersBound bounds the wait for a finished copy's transaction markers: past the copy's
// transaction timeout (1 minute), by when the coordinator has aborted any transaction left open.
const markersBound = 2 * time.Minute

// readCommitted reads every partition of topics read_committed up to its last stable offset,
// once that has reached the partition's end (settledEnds), and returns, by "topic/partition",
// how many data records it holds and, for the sampled partitions, the first and the last per of
// them; settled says how long the markers took, if they did.
func readCommitted(ctx context.Context, bootstrap string, topics []string, per int, sampled map[string]bool) (counts map[string]int64, heads, tails map[string][]*kgo.Record, settled string, err error) {
	return readCommittedBounded(ctx, bootstrap, topics, per, sampled, markersBound)
}

// readCommittedWithin is readCommitted with no sample and the markers waited for up to bound.
func readCommittedWithin(ctx context.Context, bootstrap string, topics []string, bound time.Duration) (map[string]int64, map[string][]*kgo.Record, map[string][]*kgo.Record, string, error) {
	return readCommittedBounded(ctx, bootstrap, topics, 0, nil, bound)
}

func readCommittedBounded(ctx context.Context, bootstrap string, topics []string, per int, sampled map[string]bool, bound time.Duration) (counts map[string]int64, heads, tails map[string][]*kgo.Record, settled string, err error) {
	adm, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return nil, nil, nil, "", err
	}
	defer adm.Close()
	lsos, settled, err := settledEnds(ctx, kadm.NewClient(adm), topics, bound)
	if err != nil {
		return nil, nil, nil, "", err
	}
	from := map[string]map[int32]kgo.Offset{}
	left := map[string]int64{}
	lsos.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			if from[o.Topic] == nil {
				from[o.Topic] = map[int32]kgo.Offset{}
			}
			from[o.Topic][o.Partition] = kgo.NewOffset().AtStart()
			left[fmt.Sprintf("%s/%d", o.Topic, o.Partition)] = o.Offset
		}
	})
	counts, heads, tails = map[string]int64{}, map[string][]*kgo.Record{}, map[string][]*kgo.Record{}
	if len(left) == 0 {
		return counts, heads, tails, settled, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumePartitions(from),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.FetchMaxWait(100*time.Millisecond), kgo.FetchMaxBytes(32<<20))
	if err != nil {
		return nil, nil, nil, "", err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, nil, nil, "", fmt.Errorf("reading the target read_committed (%d partitions not read to their end): %w", len(left), err)
		}
		if err := fs.Err(); err != nil {
			return nil, nil, nil, "", fmt.Errorf("reading the target read_committed: %w", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			key := fmt.Sprintf("%s/%d", r.Topic, r.Partition)
			end, ok := left[key]
			if !ok {
				return
			}
			if !r.Attrs.IsControl() && r.Offset < end {
				counts[key]++
				if sampled[key] {
					if len(heads[key]) < per {
						heads[key] = append(heads[key], r)
					}
					if tails[key] = append(tails[key], r); len(tails[key]) > per {
						tails[key] = tails[key][1:]
					}
				}
			}
			if r.Offset >= end-1 {
				delete(left, key)
			}
		})
	}
	return counts, heads, tails, settled, nil
}

// settledEnds waits, up to bound, until every partition of topics has its last stable offset at
// its end offset: a copy's transactions have all ended, but their commit markers reach the
// partitions after the coordinator answered the commit (on a loaded broker with 1,000
// partitions, seconds later), and until then a read_committed reader stops before the records.
// It returns the last stable offsets and, if some partitions had to be waited for, how many and
// how long; a partition still behind after bound holds a transaction nobody ended (an error).
func settledEnds(ctx context.Context, adm *kadm.Client, topics []string, bound time.Duration) (kadm.ListedOffsets, string, error) {
	start := time.Now()
	first := -1
	for {
		_, lsos, err := cluster.ListOffsets(ctx, adm, true, topics...)
		if err != nil {
			return nil, "", fmt.Errorf("listing the target's last stable offsets: %w", err)
		}
		_, ends, err := cluster.ListOffsets(ctx, adm, false, topics...)
		if err != nil {
			return nil, "", fmt.Errorf("listing the target's end offsets: %w", err)
		}
		var behind []string
		lsos.Each(func(o kadm.ListedOffset) {
			if e, ok := ends.Lookup(o.Topic, o.Partition); ok && o.Offset < e.Offset {
				behind = append(behind, fmt.Sprintf("%s[%d] at %d of %d", o.Topic, o.Partition, o.Offset, e.Offset))
			}
		})
		if first < 0 {
			first = len(behind)
		}
		if len(behind) == 0 {
			if first == 0 {
				return lsos, "", nil
			}
			return lsos, fmt.Sprintf(" (%d partitions' last stable offsets reached their ends %.1f s after the copy ended: commit markers still being written)", first, time.Since(start).Seconds()), nil
		}
		if time.Since(start) > bound {
			slices.Sort(behind)
			return nil, "", fmt.Errorf("%d partitions keep a transaction open %v after the copy ended (last stable offset below the end): %s", len(behind), bound, strings.Join(behind[:min(len(behind), 5)], ", "))
		}
		select {
		case <-ctx.Done():
			return nil, "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
