package ops

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText writes the cutover as the go/no-go table.
func (c *Cutover) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	mode := ""
	if c.DryRun {
		mode = " (dry run: nothing copied or written)"
	}
	fmt.Fprintf(tw, "cutover of %s on flow %s->%s at %s%s\n", strings.Join(c.Groups, ", "), c.Source, c.Target, c.At.UTC().Format(time.RFC3339), mode)
	for _, l := range c.Live {
		fmt.Fprintf(tw, "producers writing: %s-%d end %d -> %d during the watch\n", l.Topic, l.Partition, l.From, l.To)
	}
	for _, g := range c.InUse {
		fmt.Fprintf(tw, "group %s has members on the %s (%s): client ids %s\n", g.Group, g.Cluster, g.State, strings.Join(g.ClientIDs, ", "))
	}
	if d := c.Drain; d != nil {
		fmt.Fprintf(tw, "drain: %d bursts, %d records copied, lag %d, %s\n", d.Bursts, d.Records, d.Lag, ms(d.DurationMS))
	}
	if len(c.Partitions) > 0 {
		fmt.Fprintln(tw, "\nGROUP\tTOPIC\tPARTITION\tCOMMITTED\tNEXT RECORD\tREMOTE\tTARGET OFFSET\tTARGET COMMITTED\tRE-READS\tSKIPS\tSTATE\tOFFSET SYNC")
		for _, r := range c.Partitions {
			next := neg(r.Next)
			if r.Next < 0 && r.TargetOffset >= 0 {
				next = "end"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Group, r.Topic, r.Partition, r.Committed, next, r.Remote,
				neg(r.TargetOffset), neg(r.TargetCommitted), neg(r.ReReads), neg(r.Skips), strings.ToUpper(r.State), dash(firstWord(r.OffsetSync)))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range c.Partitions {
		if r.Note != "" {
			fmt.Fprintf(w, "%s %s-%d: %s\n", r.Group, r.Topic, r.Partition, r.Note)
		}
		if strings.HasPrefix(r.OffsetSync, "not written") {
			fmt.Fprintf(w, "%s %s-%d: offset sync %s\n", r.Group, r.Topic, r.Partition, r.OffsetSync)
		}
	}
	for _, g := range c.Gaps {
		fmt.Fprintf(w, "gap: %s\n", g.String())
	}
	for _, n := range c.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	_, err := fmt.Fprintln(w, c.Verdict)
	return err
}

func firstWord(s string) string {
	if i := strings.IndexAny(s, ":"); i >= 0 {
		return s[:i]
	}
	return s
}
