package ops

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteJSON writes v as indented JSON.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func ms(v int64) string {
	return (time.Duration(v) * time.Millisecond).Round(time.Millisecond).String()
}

// cells renders a sync as upstream->downstream and its age; "-" twice when there is none.
func (s *SyncInfo) cells() (pair, age string) {
	if s == nil {
		return "-", "-"
	}
	return fmt.Sprintf("%d->%d", s.Upstream, s.Downstream), ms(s.AgeMS)
}

// cells renders a checkpoint as upstream->downstream and its age; "-" twice when there is
// none.
func (c *CheckpointInfo) cells() (pair, age string) {
	if c == nil {
		return "-", "-"
	}
	return fmt.Sprintf("%d->%d", c.Upstream, c.Downstream), ms(c.AgeMS)
}

func optInt(p *int64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

// WriteText writes the status as tables.
func (s *Status) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "flow %s->%s at %s\n", s.Source, s.Target, s.At.UTC().Format(time.RFC3339))
	fmt.Fprintf(tw, "positions %s (target), offset syncs %s (%s), checkpoints %s (target)\n\n", s.OffsetsTopic, s.OffsetSyncsTopic, s.OffsetSyncsCluster, s.CheckpointsTopic)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tREMOTE\tPOSITION\tSOURCE END\tLAG\tLAG TIME\tTARGET END\tLAST SYNC (UP->DOWN)\tSYNC AGE")
	for _, p := range s.Partitions {
		sync, age := p.LastSync.cells()
		lagTime := "-"
		if p.LagMS != nil {
			lagTime = ms(*p.LagMS)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", p.Topic, p.Partition, p.Remote, optInt(p.Position), p.SourceEnd, p.Lag, lagTime, neg(p.TargetEnd), sync, age)
	}
	fmt.Fprintf(tw, "total lag\t\t\t\t\t%d\n\n", s.TotalLag)
	if len(s.Groups) > 0 {
		fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tSOURCE COMMITTED\tCHECKPOINT (UP->DOWN)\tCHECKPOINT AGE\tTARGET COMMITTED\tFAILOVER RE-READS")
		for _, g := range s.Groups {
			cp, age := g.Checkpoint.cells()
			rr := "-"
			if g.ReReads >= 0 {
				rr = fmt.Sprint(g.ReReads)
				if g.ReReadsBound {
					rr = ">=" + rr
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", g.Group, g.Topic, g.Partition, neg(g.SourceCommitted), cp, age, neg(g.TargetCommitted), rr)
		}
		fmt.Fprintln(tw)
	}
	hb := s.Heartbeats
	if hb.Replicated != nil {
		fmt.Fprintf(tw, "heartbeat latency\t%s (newest in %s: %s->%s)\n", ms(*hb.LatencyMS), hb.ReplicatedTopic, hb.Replicated.SourceAlias, hb.Replicated.TargetAlias)
	} else {
		fmt.Fprintf(tw, "heartbeat latency\t- (see note)\n")
	}
	if hb.Emitted != nil {
		fmt.Fprintf(tw, "last heartbeat emitted\t%s ago\n", ms(hb.Emitted.AgeMS))
	}
	for _, n := range s.Notes {
		fmt.Fprintf(tw, "note: %s\n", n)
	}
	return tw.Flush()
}

func neg(v int64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprint(v)
}

// WriteText writes the verification as a table and the differences found.
func (v *Verification) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tSOURCE RANGE\tTARGET RANGE\tSOURCE\tTARGET\tMATCHED\tMISSING\tEXTRA\tDIFFERING\tLAG")
	for _, p := range v.Partitions {
		trange := "-"
		if p.TargetFrom >= 0 {
			trange = fmt.Sprintf("[%d,%d)", p.TargetFrom, p.TargetTo)
		}
		fmt.Fprintf(tw, "%s\t%d\t[%d,%d)\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", p.Topic, p.Partition, p.SourceFrom, p.SourceTo, trange,
			p.SourceRecords, p.TargetRecords, p.Matched, p.Missing, p.Extra, p.Differing, p.Lag)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range v.Partitions {
		if p.Alignment != "" && !strings.HasPrefix(p.Alignment, "offset sync") {
			fmt.Fprintf(w, "%s-%d: aligned by %s\n", p.Topic, p.Partition, p.Alignment)
		}
		if p.Note != "" {
			fmt.Fprintf(w, "%s-%d: %s\n", p.Topic, p.Partition, p.Note)
		}
		for _, d := range p.Differences {
			fmt.Fprintf(w, "%s-%d: %s source offset %s target offset %s\n", p.Topic, p.Partition, d.Kind, neg(d.SourceOffset), neg(d.TargetOffset))
		}
	}
	verdict := "complete: every copied record is on the target, unchanged, and nothing is left to copy"
	switch {
	case v.Gaps > 0:
		verdict = fmt.Sprintf("GAPS: %d partitions lost source records before they were mirrored (see above)", v.Gaps)
	case v.Differences > 0:
		verdict = fmt.Sprintf("DIFFERENCES: %d records missing, extra or differing", v.Differences)
	case v.Lag > 0:
		verdict = fmt.Sprintf("incomplete: %d records not copied yet (the copied ones match)", v.Lag)
	}
	_, err := fmt.Fprintln(w, verdict)
	return err
}

// WriteText writes the plan as tables.
func (p *Plan) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "plan for flow %s->%s (dry run: nothing was written)\n\n", p.Source, p.Target)
	fmt.Fprintln(tw, "TOPIC\tPARTITIONS\tREPLICATED\tREASON\tREMOTE\tACTION\tRECORDS TO COPY")
	for _, t := range p.Topics {
		sel := "no"
		if t.Selected {
			sel = "yes"
		}
		action := t.Action
		if action == "grow" {
			action = fmt.Sprintf("grow %d->%d", t.TargetPartitions, t.Partitions)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\n", t.Topic, t.Partitions, sel, t.Reason, dash(t.Remote), dash(action), t.Records)
	}
	fmt.Fprintf(tw, "total\t\t\t\t\t\t%d\n\n", p.Records)
	for _, t := range p.Topics {
		if len(t.Configs) > 0 {
			keys := make([]string, 0, len(t.Configs))
			for k := range t.Configs {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(tw, "create %s with\t%s=%s\n", t.Remote, k, t.Configs[k])
			}
		}
		for _, c := range t.ConfigChanges {
			if c.Op == "set" {
				fmt.Fprintf(tw, "sync %s\tset %s=%s (was %s)\n", t.Remote, c.Name, deref(c.Value), deref(c.Was))
			} else {
				fmt.Fprintf(tw, "sync %s\tdelete %s (was %s)\n", t.Remote, c.Name, deref(c.Was))
			}
		}
	}
	fmt.Fprintln(tw, "\nINTERNAL TOPIC\tCLUSTER\tPURPOSE\tEXISTS\tPARTITIONS\tCREATED BY")
	for _, i := range p.Internal {
		ex := "no (created)"
		if i.Exists {
			ex = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", i.Name, i.Cluster, i.Purpose, ex, i.Partitions, i.CreatedBy)
	}
	for _, b := range p.EventHubs {
		fmt.Fprintf(tw, "event hubs (%s): %s\n", b.Cluster, b.Notice)
		if b.Error != "" {
			fmt.Fprintf(tw, "event hubs (%s): THE RUN WOULD STOP: %s\n", b.Cluster, b.Error)
		} else {
			fmt.Fprintf(tw, "event hubs (%s): %d topics to create or grow fit the budget\n", b.Cluster, len(b.Topics))
		}
		if b.LaterError != "" {
			fmt.Fprintf(tw, "event hubs (%s): with the checkpoint and heartbeat topics: %s\n", b.Cluster, b.LaterError)
		}
		if len(b.MM2) > 0 {
			names := make([]string, 0, len(b.MM2))
			for n := range b.MM2 {
				names = append(names, n)
			}
			sort.Strings(names)
			verdict := "they would fit"
			if b.MM2Error != "" {
				verdict = b.MM2Error
			}
			fmt.Fprintf(tw, "event hubs (%s): MirrorMaker 2 on this flow would also need %s: %s\n", b.Cluster, strings.Join(names, ", "), verdict)
		}
	}
	for _, n := range p.Notes {
		fmt.Fprintf(tw, "note: %s\n", n)
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func deref(s *string) string {
	if s == nil {
		return "(null)"
	}
	return *s
}
