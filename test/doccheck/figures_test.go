package doccheck

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// benchRun is the part of test/bench's latest.json the README's headline figures come from.
type benchRun struct {
	Machine map[string]string `json:"machine"`
	Started time.Time         `json:"started"`
	Results []struct {
		Workload struct {
			Name string `json:"name"`
		} `json:"workload"`
		Contenders []benchContender `json:"contenders"`
	} `json:"results"`
}

type benchContender struct {
	Name       string  `json:"name"`
	DoneNS     int64   `json:"done_ns"`
	RecordsPS  float64 `json:"records_per_s"`
	MBPS       float64 `json:"mb_per_s"`
	PeakRSSKiB int64   `json:"peak_rss_kib"`
	CPUPerGB   float64 `json:"cpu_s_per_gb"`
	Mismatch   string  `json:"mismatch"`
}

func (r benchRun) contenders(t *testing.T, workload string) map[string]benchContender {
	t.Helper()
	for _, w := range r.Results {
		if w.Workload.Name == workload {
			out := map[string]benchContender{}
			for _, c := range w.Contenders {
				out[c.Name] = c
			}
			return out
		}
	}
	t.Fatalf("latest.json has no workload %s", workload)
	return nil
}

// betterMM2 is the faster of MM2 and tuned MM2 among those whose copy matched.
func betterMM2(cs map[string]benchContender) (benchContender, bool) {
	var best benchContender
	ok := false
	for _, n := range []string{"MM2", "MM2 tuned"} {
		c, found := cs[n]
		if found && c.Mismatch == "" && c.DoneNS > 0 && (!ok || c.DoneNS < best.DoneNS) {
			best, ok = c, true
		}
	}
	return best, ok
}

func secs(ns int64) string { return fmt.Sprintf("%.1f s", float64(ns)/1e9) }
func mib(kib int64) string { return thousands((kib+512)/1024) + " MiB" }

// TestReadmeHeadline: README.md's three headline figures are generated from the latest bench
// results file, with the run's date, commit and machine.
func TestReadmeHeadline(t *testing.T) {
	const results = "test/bench/results/latest.json"
	b, err := os.ReadFile(filepath.Join(root(t), results))
	if err != nil {
		t.Fatal(err)
	}
	var run benchRun
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatalf("%s: %v", results, err)
	}
	small := run.contenders(t, "1M-x-512B")
	mr, mm := small["mirror run"], small["MM2 tuned"]
	better, ok := betterMM2(small)
	if !ok || mr.DoneNS == 0 {
		t.Fatalf("%s: 1M-x-512B lacks mirror run or a matched MM2", results)
	}
	big := run.contenders(t, "10GB-backlog")
	bmr, bmm := big["mirror run"], big["MM2"]
	tunedNote := ""
	if c := big["MM2 tuned"]; c.Mismatch != "" && strings.Contains(c.Mismatch, "OutOfMemoryError") {
		tunedNote = ", tuned MM2 ran out of memory"
	}
	var h strings.Builder
	fmt.Fprintf(&h, "- **%.1f× MirrorMaker 2's speed**: 1M records × 512 B in 8 partitions copied in %s (%.0fk records/s); the better MM2 (%s) took %s.\n",
		float64(better.DoneNS)/float64(mr.DoneNS), secs(mr.DoneNS), mr.RecordsPS/1000, better.Name, secs(better.DoneNS))
	fmt.Fprintf(&h, "- **%.2f CPU-seconds per GB at %s peak RSS** on that copy; tuned MM2 used %.1f CPU-seconds per GB and %s.\n",
		mr.CPUPerGB, mib(mr.PeakRSSKiB), mm.CPUPerGB, mib(mm.PeakRSSKiB))
	fmt.Fprintf(&h, "- **A 10.24 GB backlog in %s** (%.0f MB/s) at %s peak RSS; MM2 took %s%s.\n",
		secs(bmr.DoneNS), bmr.MBPS, mib(bmr.PeakRSSKiB), secs(bmm.DoneNS), tunedNote)
	fmt.Fprintf(&h, "\nMeasured by `make bench` on %s (mm2go %s, %s vCPUs %s shared with both brokers, Kafka %s), every copy checked byte for byte.\n",
		run.Started.UTC().Format("2006-01-02"), run.Machine["mm2go commit"], run.Machine["cpus"], run.Machine["cpu"], run.Machine["kafka"])
	checkGenerated(t, "README.md", "headline", h.String())
}

// measured matches a figure that is a measurement rather than a setting: a rate, CPU per GB,
// a speed-up, a peak RSS, a time to the first record, a cold start's parts (the replay's
// "ready 28 ms after process start", "first record 290 ms after the first event").
var measured = regexp.MustCompile(`(?i)\d[\d,.]*\s?(k )?(rec(ords)?/s|MB/s|GB/s|CPU[- ]s(econds)?(/| per )GB|×|x faster)|peak RSS[^.|]*\d|\d+\s?ms to (its )?first record|\d[\d,.]*\s?m?s after (process start|the first event)`)

// dated matches a date and a run: an ISO date, or a link to a results file in the repository.
var (
	isoDate    = regexp.MustCompile(`20\d\d-\d\d-\d\d`)
	resultLink = regexp.MustCompile(`test/bench/results/|results/[\w.-]+\.md`)
	runRef     = regexp.MustCompile(`commit [0-9a-f]{7}|\bat [0-9a-f]{7}\b|Test[A-Z]\w+`)
)

// TestFiguresCarryTheirRun: a measured figure in README.md or docs/ is generated from a
// results file, or its section (the text under the nearest heading) carries the date and the
// run it came from (an ISO date and a commit, a results file or a named test).
func TestFiguresCarryTheirRun(t *testing.T) {
	pages := []string{"README.md"}
	for _, p := range userPages(t) {
		if strings.HasPrefix(p, "docs/") {
			pages = append(pages, p)
		}
	}
	for _, page := range pages {
		for _, sec := range sections(read(t, page)) {
			if strings.Contains(sec.text, "<!-- BEGIN headline") {
				continue // generated from a results file
			}
			m := measured.FindString(sec.text)
			if m == "" {
				continue
			}
			hasRun := resultLink.MatchString(sec.context) || runRef.MatchString(sec.context)
			if !isoDate.MatchString(sec.context) || !hasRun {
				t.Errorf("%s, section %q: the figure %q carries no date and run (an ISO date, and a results file, commit or test)", page, sec.heading, m)
			}
		}
	}
}

type section struct {
	heading string
	// text is the section's own text; context adds its heading and those of the sections
	// it is part of, with their text (a date and a run there cover the subsections).
	text, context string
}

// sections splits a Markdown page at its headings (outside code blocks).
func sections(doc string) []section {
	var out []section
	type open struct {
		level int
		text  string
	}
	var stack []open
	cur := section{heading: "(top)"}
	level := 0
	flush := func() {
		ctx := ""
		for _, o := range stack {
			ctx += o.text
		}
		cur.context = ctx + cur.heading + "\n" + cur.text
		out = append(out, cur)
	}
	fence := false
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(l, "```") {
			fence = !fence
		}
		if !fence && strings.HasPrefix(l, "#") {
			flush()
			n := len(l) - len(strings.TrimLeft(l, "#"))
			stack = append(stack, open{level, cur.heading + "\n" + cur.text})
			for len(stack) > 0 && stack[len(stack)-1].level >= n {
				stack = stack[:len(stack)-1]
			}
			cur, level = section{heading: strings.TrimSpace(strings.TrimLeft(l, "#"))}, n
			continue
		}
		cur.text += l + "\n"
	}
	flush()
	return out
}

// thousands writes n with comma separators (1,412).
func thousands(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
