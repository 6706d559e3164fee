package main

import (
	"strings"
	"testing"
	"time"
)

// TestMedianRun: a contender's row over several rounds is its median matched run by done
// time, with the matched runs' spread and the failures counted; with no matched run it is the
// first run, failure and all.
func TestMedianRun(t *testing.T) {
	run := func(done time.Duration, cpu float64, rss int64, mismatch string) *contender {
		return &contender{Name: "mirror run", Done: done, CPUSecondsPerGB: cpu, PeakRSSKiB: rss, Mismatch: mismatch}
	}
	row := medianRun([]*contender{
		run(9*time.Second, 6.2, 60<<10, ""),
		run(0, 0, 0, "run failed: exit 1"),
		run(6*time.Second, 4.6, 59<<10, ""),
		run(7*time.Second, 5.0, 66<<10, ""),
	})
	if row.Done != 7*time.Second || row.CPUSecondsPerGB != 5.0 {
		t.Errorf("row: done %s, %.1f CPU s/GB; want the median matched run (7s, 5.0)", row.Done, row.CPUSecondsPerGB)
	}
	want := roundSpread{Runs: 4, Matched: 3, DoneMin: 6 * time.Second, DoneMax: 9 * time.Second,
		CPUPerGBMin: 4.6, CPUPerGBMax: 6.2, PeakRSSMaxKiB: 66 << 10, FirstFailure: "run failed: exit 1"}
	if row.Rounds == nil || *row.Rounds != want {
		t.Fatalf("spread %+v, want %+v", row.Rounds, want)
	}
	note := row.Rounds.note()
	for _, part := range []string{"median of 4 rounds", "done 6s-9s", "CPU 4.6-6.2 s/GB", "peak RSS up to 66 MiB", "1 failed or differed, first: run failed: exit 1"} {
		if !strings.Contains(note, part) {
			t.Errorf("note %q lacks %q", note, part)
		}
	}

	// Two matched runs: the earlier of the middle two.
	if row := medianRun([]*contender{run(8*time.Second, 1, 1, ""), run(5*time.Second, 2, 1, "")}); row.Done != 5*time.Second {
		t.Errorf("two runs: row done %s, want 5s", row.Done)
	}
	// One run: no spread, no note.
	if row := medianRun([]*contender{run(5*time.Second, 2, 1, "")}); row.Rounds != nil || row.Rounds.note() != "" {
		t.Errorf("one run: spread %+v", row.Rounds)
	}
	// No matched run: the first, failure kept.
	row = medianRun([]*contender{run(0, 0, 0, "run failed: a"), run(0, 0, 0, "run failed: b")})
	if row.Mismatch != "run failed: a" || row.ok() {
		t.Errorf("no matched run: row %+v, want the first failure", row)
	}
	if n := row.Rounds.note(); n != "2 rounds; 2 failed or differed, first: run failed: a" {
		t.Errorf("no matched run: note %q", n)
	}
}

// TestRoundSuffix: the first round keeps the names a single-round run always used.
func TestRoundSuffix(t *testing.T) {
	h := &harness{}
	for round, want := range []string{"", "-r2", "-r3"} {
		h.round = round
		if got := h.roundSuffix(); got != want {
			t.Errorf("round %d: suffix %q, want %q", round, got, want)
		}
	}
}
