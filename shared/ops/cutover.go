package ops

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/engine"
	"github.com/mm2go/mm2go/shared/filter"
	"github.com/mm2go/mm2go/shared/metrics"
)

// Exit codes of cutover. 2 is the command line's (cli.ExitConfig) and 3 a budget's (cli.ExitMore:
// a cluster still failing with a retriable error when -timeout ended, or a stop signal).
const (
	CutoverGo      = 0 // every partition of every group is on the target at exactly its next record
	CutoverError   = 1 // the cutover could not be done (a permission, a -topics topic the flow does not replicate)
	CutoverNoGo    = 4 // a partition is not exact (not copied, a gap, no offset sync, records differ)
	CutoverLive    = 5 // producers are still writing to the groups' topics (nothing written)
	CutoverInUse   = 6 // a group has members on the target, or still on the source (nothing written)
	defaultWatch   = 3 * time.Second
	defaultTimeout = 5 * time.Minute
)

// Row states of a cutover (CutoverPartition.State).
const (
	StateExact     = "exact"      // target offset holds the copy of the group's next record (or is the remote end)
	StatePlanned   = "planned"    // dry run: the translation is exact, nothing was written
	StateNotCopied = "not-copied" // the group's next record is not on the target yet
	StateGap       = "gap"        // the group's next records were deleted on the source before they were mirrored
	StateNoSync    = "no-sync"    // no offset sync at or before the group's offset anchors the translation
	StateDiffers   = "differs"    // the record at the target offset is not byte-identical to the source record
)

// CutoverOptions say which groups move and how.
type CutoverOptions struct {
	// Groups are the consumer groups to move (required).
	Groups []string
	// Topics limits the move to these source topics; empty: every replicated topic the groups
	// committed offsets on.
	Topics []string
	// Watch is how long the source's end offsets are watched for producers; 0 means 3s.
	Watch time.Duration
	// Timeout bounds the whole cutover, drain included; 0 means 5m.
	Timeout time.Duration
	// DryRun checks the preconditions and works out the translation; it copies and writes
	// nothing.
	DryRun bool
	// AllowLive reports producers still writing (and source members) instead of refusing.
	AllowLive bool
	// CheckpointsTopicReplicationFactor and CheckpointsTopicConfigs are used when the
	// checkpoints topic must be created (as the checkpoint function creates it); 0: the
	// broker's default, nil: cleanup.policy=compact.
	CheckpointsTopicReplicationFactor int16
	CheckpointsTopicConfigs           map[string]*string
	// Metrics, if set, receives the drain's copy metrics, as mirror run's.
	Metrics *metrics.Recorder
}

// Cutover is the outcome of a cutover: the go/no-go table.
type Cutover struct {
	Source string    `json:"source"`
	Target string    `json:"target"`
	At     time.Time `json:"at"`
	DryRun bool      `json:"dry_run"`
	Groups []string  `json:"groups"`
	// Go is true when every partition is exact; ExitCode is the command's exit code and
	// Verdict says it in words.
	Go       bool   `json:"go"`
	ExitCode int    `json:"exit_code"`
	Verdict  string `json:"verdict"`
	// Live lists the source partitions whose end offsets moved during the watch.
	Live []LivePartition `json:"live,omitempty"`
	// InUse lists groups with members (on the target; on the source, unless AllowLive).
	InUse []GroupMembers `json:"in_use,omitempty"`
	// Drain is what the bursts copied before the translation (nil on a dry run).
	Drain *DrainSummary `json:"drain,omitempty"`
	// Partitions is one row per group and source partition.
	Partitions []CutoverPartition `json:"partitions"`
	// Gaps are source records the flow lost before mirroring them, on the groups' topics.
	Gaps  []engine.Gap `json:"gaps,omitempty"`
	Notes []string     `json:"notes,omitempty"`
}

// LivePartition is a source partition that received records during the watch.
type LivePartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	From      int64  `json:"from"` // end offset at the watch's start
	To        int64  `json:"to"`   // and at its end
}

// GroupMembers is a group that still has members on a cluster.
type GroupMembers struct {
	Group     string   `json:"group"`
	Cluster   string   `json:"cluster"`
	State     string   `json:"state"`
	ClientIDs []string `json:"client_ids"`
}

// DrainSummary is what the drain's bursts did.
type DrainSummary struct {
	Bursts     int   `json:"bursts"`
	Records    int64 `json:"records"`
	Lag        int64 `json:"lag"`
	DurationMS int64 `json:"duration_ms"`
}

// CutoverPartition is one group's partition.
type CutoverPartition struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Remote    string `json:"remote"`
	Partition int32  `json:"partition"`
	// Committed is the group's committed offset on the source (c).
	Committed int64  `json:"committed"`
	Metadata  string `json:"metadata,omitempty"`
	// Next is the offset of the source record the group reads next (the first record at or
	// after c, or the log start when c is before it); -1 when c is at the end (no record).
	Next int64 `json:"next"`
	// TargetOffset is the translated offset: the copy of record Next, or the remote end. -1
	// when not found.
	TargetOffset int64 `json:"target_offset"`
	// TargetCommitted is the group's offset read back from the target after the commit (-1:
	// none, or a dry run).
	TargetCommitted int64 `json:"target_committed"`
	// State is StateExact, StatePlanned or the reason of a no-go.
	State string `json:"state"`
	// ReReads and Skips are what a consumer starting at TargetCommitted reads again or
	// misses, compared with the source; -1 when unknown.
	ReReads int64 `json:"rereads"`
	Skips   int64 `json:"skips"`
	// OffsetSync says whether the offset sync (Committed -> TargetOffset) was written.
	OffsetSync string `json:"offset_sync,omitempty"`
	Note       string `json:"note,omitempty"`
}

// exact reports whether the row is a go.
func (r CutoverPartition) exact() bool { return r.State == StateExact || r.State == StatePlanned }

// Cutover moves consumer groups from the source to the target at exactly the record each
// would read next: it checks that producers stopped and the groups are empty, drains the
// groups' topics with the engine (bursts until lag 0), translates each committed offset c to
// the offset of the copy of the first record at or after c (the remote end when there is
// none), checks that both records are byte-identical, writes an offset sync for that point
// and MM2-format checkpoints, commits the offsets to the groups on the target and reads them
// back. The result's ExitCode is the go/no-go. Fail back is the same call on the reversed flow.
func (o *Ops) Cutover(ctx context.Context, co CutoverOptions) (*Cutover, error) {
	if len(co.Groups) == 0 {
		return nil, errors.New("-groups: name at least one consumer group")
	}
	if co.Watch <= 0 {
		co.Watch = defaultWatch
	}
	if co.Timeout <= 0 {
		co.Timeout = defaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, co.Timeout)
	defer cancel()
	res := &Cutover{Source: o.opts.SourceAlias, Target: o.opts.TargetAlias, At: o.now(), DryRun: co.DryRun,
		Groups: append([]string(nil), co.Groups...), Partitions: []CutoverPartition{}}

	// The groups' committed offsets on the source, on the topics the flow replicates.
	commits, err := o.sourceCommits(ctx, co)
	if err != nil {
		return nil, err
	}
	topics := map[string]bool{}
	for _, c := range commits {
		topics[c.Topic] = true
	}
	if len(topics) == 0 {
		res.Notes = append(res.Notes, "the groups have no committed offsets on topics this flow replicates")
	}
	names := sortedKeys(topics)

	// 1. Preconditions: nobody writes, nobody consumes.
	if res.Live, err = o.watchLive(ctx, names, co.Watch); err != nil {
		return nil, err
	}
	if res.InUse, err = o.membersOf(ctx, co.Groups, co.AllowLive); err != nil {
		return nil, err
	}
	switch {
	case len(res.InUse) > 0 && hasTarget(res.InUse) || len(res.InUse) > 0 && !co.AllowLive:
		return res.verdict(CutoverInUse, "NO-GO: "+describeInUse(res.InUse)+"; stop those consumers (nothing was written)"), nil
	case len(res.Live) > 0 && !co.AllowLive:
		return res.verdict(CutoverLive, "NO-GO: producers are still writing to "+describeLive(res.Live)+"; stop them, or pass -allow-live to only report (nothing was written)"), nil
	case len(res.Live) > 0:
		res.Notes = append(res.Notes, "-allow-live: producers are still writing to "+describeLive(res.Live)+"; records they write after the drain are not on the target")
	}

	// 2. Drain.
	gaps := map[engine.TP][]engine.Gap{}
	if !co.DryRun && len(names) > 0 {
		if res.Drain, err = o.drain(ctx, names, co.Metrics, gaps); err != nil {
			return nil, err
		}
	}

	// 3. Exact translation.
	rows, pairs, syncs, err := o.translate(ctx, commits, gaps)
	if err != nil {
		return nil, err
	}
	for _, g := range gaps {
		res.Gaps = append(res.Gaps, g...)
	}
	if co.DryRun {
		for i := range rows {
			if rows[i].State == StateExact {
				rows[i].State = StatePlanned
			}
			rows[i].OffsetSync = "dry run"
		}
		res.Partitions = rows
		return res.conclude(), nil
	}
	if err := o.writeCutover(ctx, co, rows, syncs); err != nil {
		return nil, err
	}

	// 4. Verify what the target's groups now hold.
	if err := o.verifyCutover(ctx, co.Groups, rows, pairs); err != nil {
		return nil, err
	}
	res.Partitions = rows
	return res.conclude(), nil
}

func (c *Cutover) verdict(code int, v string) *Cutover {
	c.ExitCode, c.Verdict, c.Go = code, v, code == CutoverGo
	return c
}

// conclude sets the verdict from the rows.
func (c *Cutover) conclude() *Cutover {
	var off []string
	for _, r := range c.Partitions {
		if !r.exact() {
			off = append(off, fmt.Sprintf("%s %s-%d %s", r.Group, r.Topic, r.Partition, r.State))
		}
	}
	if len(off) > 0 {
		return c.verdict(CutoverNoGo, fmt.Sprintf("NO-GO: %d of %d partitions are not exact (%s)", len(off), len(c.Partitions), strings.Join(off, ", ")))
	}
	if c.DryRun {
		return c.verdict(CutoverGo, fmt.Sprintf("GO (dry run): %d partitions translate exactly; nothing was written", len(c.Partitions)))
	}
	return c.verdict(CutoverGo, fmt.Sprintf("GO: %d partitions committed on the target at the copy of each group's next record: 0 re-reads, 0 skips", len(c.Partitions)))
}

// commit is one group's committed offset on a source partition.
type commit struct {
	Group    string
	Topic    string
	Remote   string
	Part     int32
	At       int64
	Metadata string
}

// sourceCommits fetches the groups' committed offsets on the source topics this flow
// replicates (and co.Topics, when given).
func (o *Ops) sourceCommits(ctx context.Context, co CutoverOptions) ([]commit, error) {
	want := map[string]bool{}
	for _, t := range co.Topics {
		if !o.eng.Selected(t) {
			return nil, fmt.Errorf("-topics: topic %q is not replicated by flow %s->%s", t, o.opts.SourceAlias, o.opts.TargetAlias)
		}
		want[t] = true
	}
	var out []commit
	for _, g := range co.Groups {
		resp, err := o.srcAdm.FetchOffsets(ctx, g)
		if err != nil {
			return nil, fmt.Errorf("fetching committed offsets of group %q on the source: %w", g, err)
		}
		resp.Each(func(r kadm.OffsetResponse) {
			if r.Err != nil || r.At < 0 || !o.eng.Selected(r.Topic) || len(want) > 0 && !want[r.Topic] {
				return
			}
			out = append(out, commit{Group: g, Topic: r.Topic, Remote: o.opts.Policy.FormatRemoteTopic(o.opts.SourceAlias, r.Topic),
				Part: r.Partition, At: r.At, Metadata: r.Metadata})
		})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Part < b.Part
	})
	return out, nil
}

// watchLive lists the topics' end offsets, waits watch, lists them again and returns the
// partitions whose end moved.
func (o *Ops) watchLive(ctx context.Context, topics []string, watch time.Duration) ([]LivePartition, error) {
	if len(topics) == 0 {
		return nil, nil
	}
	_, before, err := cluster.ListOffsets(ctx, o.srcAdm, false, topics...)
	if err != nil {
		return nil, fmt.Errorf("listing source end offsets: %w", err)
	}
	t := time.NewTimer(watch)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
	}
	_, after, err := cluster.ListOffsets(ctx, o.srcAdm, false, topics...)
	if err != nil {
		return nil, fmt.Errorf("listing source end offsets: %w", err)
	}
	var live []LivePartition
	after.Each(func(l kadm.ListedOffset) {
		b, ok := before.Lookup(l.Topic, l.Partition)
		from := int64(0)
		if ok {
			from = b.Offset
		}
		if l.Offset != from {
			live = append(live, LivePartition{Topic: l.Topic, Partition: l.Partition, From: from, To: l.Offset})
		}
	})
	sort.Slice(live, func(i, j int) bool {
		if live[i].Topic != live[j].Topic {
			return live[i].Topic < live[j].Topic
		}
		return live[i].Partition < live[j].Partition
	})
	return live, nil
}

// membersOf returns the groups with members on the target and on the source.
func (o *Ops) membersOf(ctx context.Context, groups []string, allowSource bool) ([]GroupMembers, error) {
	var out []GroupMembers
	for _, side := range []engine.Side{engine.Target, engine.Source} {
		_, adm := o.client(side)
		described, err := adm.DescribeGroups(ctx, groups...)
		if err != nil {
			return nil, fmt.Errorf("describing groups on the %s: %w", side, err)
		}
		for _, g := range groups {
			d, ok := described[g]
			if !ok || len(d.Members) == 0 {
				continue
			}
			gm := GroupMembers{Group: g, Cluster: side.String(), State: d.State}
			for _, m := range d.Members {
				gm.ClientIDs = append(gm.ClientIDs, m.ClientID)
			}
			sort.Strings(gm.ClientIDs)
			if side == engine.Source && allowSource {
				continue
			}
			out = append(out, gm)
		}
	}
	return out, nil
}

func hasTarget(gs []GroupMembers) bool {
	for _, g := range gs {
		if g.Cluster == engine.Target.String() {
			return true
		}
	}
	return false
}

func describeInUse(gs []GroupMembers) string {
	var s []string
	for _, g := range gs {
		s = append(s, fmt.Sprintf("group %q has %d members on the %s (client ids %s)", g.Group, len(g.ClientIDs), g.Cluster, strings.Join(g.ClientIDs, ", ")))
	}
	return strings.Join(s, "; ")
}

func describeLive(ls []LivePartition) string {
	var s []string
	for _, l := range ls {
		s = append(s, fmt.Sprintf("%s-%d (end %d->%d)", l.Topic, l.Partition, l.From, l.To))
	}
	return strings.Join(s, ", ")
}

// drain runs bursts of an engine selecting only topics until they leave no lag, or the
// context ends. Gaps the bursts copied around are added to gaps.
func (o *Ops) drain(ctx context.Context, topics []string, rec *metrics.Recorder, gaps map[engine.TP][]engine.Gap) (*DrainSummary, error) {
	quoted := make([]string, len(topics))
	for i, t := range topics {
		quoted[i] = regexp.QuoteMeta(t)
	}
	only, err := filter.Topics(strings.Join(quoted, ","), "")
	if err != nil {
		return nil, fmt.Errorf("selecting the groups' topics: %w", err)
	}
	opts := o.opts
	opts.Topics, opts.Metrics = only, rec
	e, err := engine.New(ctx, opts, o.dial, o.log)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	start := time.Now()
	d := &DrainSummary{}
	for {
		s, err := e.Burst(ctx, engine.BurstOptions{})
		d.Bursts++
		d.Records += s.Records
		d.Lag = s.Lag
		for _, g := range s.Gaps {
			tp := engine.TP{Topic: g.Topic, Partition: g.Partition}
			gaps[tp] = append(gaps[tp], g)
		}
		o.log.Info("cutover drain burst", "burst", d.Bursts, "records", s.Records, "lag", s.Lag, "reason", s.Reason)
		if err != nil {
			return nil, fmt.Errorf("draining %s (burst %d): %w", strings.Join(topics, ", "), d.Bursts, err)
		}
		if s.Lag == 0 && s.Reason == engine.ReasonDone {
			// Lag 0 of the ends seen at the burst's start: one more burst copies what came since
			// (producers still writing under -allow-live); stop when it copies nothing.
			if s.Records == 0 || d.Bursts >= 3 {
				break
			}
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("draining %s: %d records left after %d bursts: %w", strings.Join(topics, ", "), s.Lag, d.Bursts, ctx.Err())
		}
	}
	d.DurationMS = time.Since(start).Milliseconds()
	return d, nil
}
