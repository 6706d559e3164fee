package doccheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mm2go/mm2go/shared/cli"
)

// summaryTypes are the structs whose JSON `run` prints (and `serve` answers with), in the
// page's order: package directory, type, heading.
var summaryTypes = []struct{ dir, typ, heading string }{
	{"shared/engine", "Summary", "`mirror run`"},
	{"shared/engine", "TopicSummary", "`mirror run`: each of `topics`"},
	{"shared/engine", "Gap", "`mirror run`: each of `gaps`"},
	{"shared/checkpoint", "Summary", "`checkpoint run`"},
	{"shared/checkpoint", "GroupSummary", "`checkpoint run`: each of `per_group`"},
	{"shared/checkpoint", "GroupSync", "`checkpoint run`: `per_group[].sync`"},
	{"shared/heartbeat", "Summary", "`heartbeat run`"},
	{"shared/heartbeat", "Written", "`heartbeat run`: each of `written` (with the fields of a heartbeat)"},
	{"shared/heartbeat", "Heartbeat", "`heartbeat run`: a heartbeat (`newest_replicated_heartbeat`, `written[]`)"},
}

// fieldNotes describe the fields whose Go declaration has no comment, by "dir.Type.json".
var fieldNotes = map[string]string{
	"shared/engine.Summary.records":                      "records copied and acknowledged by the target",
	"shared/engine.Summary.partitions":                   "source partitions the burst selected",
	"shared/engine.Summary.lag":                          "records left to copy of the end offsets seen at the start (0: caught up)",
	"shared/engine.Summary.topics":                       "per source topic (below)",
	"shared/engine.Summary.duration_ms":                  "the burst's wall time",
	"shared/engine.Summary.reason":                       "why the burst ended (reasons below)",
	"shared/engine.Summary.error":                        "the error that ended a failed burst (no secret in it)",
	"shared/engine.Summary.exactly_once":                 "the burst copied in transactions (MM2_EXACTLY_ONCE)",
	"shared/engine.TopicSummary.remote":                  "the remote topic on the target",
	"shared/engine.TopicSummary.records":                 "records copied from the topic",
	"shared/engine.TopicSummary.bytes":                   "bytes copied from the topic (as `bytes`)",
	"shared/engine.TopicSummary.lag":                     "records of the topic left to copy",
	"shared/engine.Gap.topic":                            "the source topic",
	"shared/engine.Gap.partition":                        "the source partition",
	"shared/engine.Gap.kind":                             "`deleted` (retention or DeleteRecords removed records before they were mirrored) or `recreated` (the stored position is beyond the partition's end: the topic was deleted and recreated, or truncated)",
	"shared/engine.Gap.to":                               "end of the missing offsets (exclusive); -1 when unknown (`recreated`)",
	"shared/checkpoint.GroupSummary.partitions":          "its partitions with a committed offset on an accepted topic",
	"shared/checkpoint.GroupSync.committed":              "partitions whose translated offset was committed to the target group",
	"shared/checkpoint.GroupSync.skipped":                "partitions whose target offset was already at or past the translated one",
	"shared/checkpoint.GroupSync.failed":                 "partitions the target refused",
	"shared/checkpoint.Summary.source":                   "the flow's source alias",
	"shared/checkpoint.Summary.target":                   "the flow's target alias",
	"shared/checkpoint.Summary.started":                  "when the round started (RFC 3339)",
	"shared/checkpoint.Summary.duration_ms":              "the round's wall time",
	"shared/checkpoint.Summary.disabled":                 "emit.checkpoints.enabled=false: nothing written",
	"shared/checkpoint.Summary.offset_syncs_topic":       "the offset-syncs topic read",
	"shared/checkpoint.Summary.checkpoints_topic":        "the checkpoints topic written on the target",
	"shared/checkpoint.Summary.checkpoints_written":      "checkpoints written this round",
	"shared/checkpoint.Summary.per_group":                "per group (below)",
	"shared/checkpoint.GroupSummary.group":               "the consumer group",
	"shared/checkpoint.GroupSummary.checkpoints_written": "its checkpoints written",
	"shared/checkpoint.GroupSummary.checkpoints_skipped": "its checkpoints not newer than the stored ones",
	"shared/checkpoint.GroupSync.members":                "members of the target group",
	"shared/heartbeat.Summary.source":                    "the flow's source alias",
	"shared/heartbeat.Summary.target":                    "the flow's target alias",
	"shared/heartbeat.Summary.started":                   "when the round started (RFC 3339)",
	"shared/heartbeat.Summary.duration_ms":               "the round's wall time",
	"shared/heartbeat.Written.topic":                     "the heartbeats topic written",
	"shared/heartbeat.Written.offset":                    "the heartbeat's offset",
	"shared/heartbeat.Heartbeat.source_cluster_alias":    "the heartbeat's source alias",
	"shared/heartbeat.Heartbeat.target_cluster_alias":    "the heartbeat's target alias",
}

// reasonNotes say what each burst reason means to a user, and the exit code `run` gives it.
var reasonNotes = map[string]string{
	"done":         "the burst copied all it could: exit 0 when every selected partition reached the end offset seen at the burst's start (or another instance owns it now: in a burst group another member, in exactly-once mode the run that fenced this one's transactional id); exit 3 when partitions were given up with records left (`given_up` names each and why: an exactly-once commit not settled, or a source that yielded no record before its end offset), their records in `lag`",
	"max-records":  "`MM2_BURST_MAX_RECORDS` records were copied; exit 0 (exit 3 if none was copied while records were left), the rest is `lag`",
	"max-duration": "`MM2_BURST_MAX_DURATION` elapsed; exit 0 (exit 3 if nothing was copied while records were left), the rest is `lag`",
	"stopped":      "a stop signal (SIGTERM, SIGINT) ended the burst; positions of what was copied are stored; exit 3",
	"failed":       "an error ended the burst (in `error`): exit 3 when a cluster was unreachable or restarting for longer than the burst waits, exit 1 otherwise",
}

// TestSummaryAndExitCodesPage: docs/summary-and-exit-codes.md's generated sections are the
// exit-code table (cli.ExitCodes), the burst reasons (shared/engine's Reason constants and
// their comments) and every JSON field of the summaries (their declarations and comments, or
// fieldNotes), so a field, reason or code added in code without a word fails here.
func TestSummaryAndExitCodesPage(t *testing.T) {
	const page = "docs/summary-and-exit-codes.md"
	var codes strings.Builder
	codes.WriteString("| exit code | meaning | Kubernetes Job (CronJob, KEDA ScaledJob) | Azure Container Apps job |\n|---|---|---|---|\n")
	for _, c := range cli.ExitCodes {
		fmt.Fprintf(&codes, "| %d | %s | %s | %s |\n", c.Code, c.Meaning, c.Kubernetes, c.ContainerApps)
	}
	checkGenerated(t, page, "exit-codes", codes.String())

	var opsCodes strings.Builder
	opsCodes.WriteString("| command | exit code | meaning |\n|---|---|---|\n")
	for _, cmd := range []struct{ name, prefix string }{{"`mirror cutover`", "Cutover"}, {"`mirror verify`", "Verify"}} {
		for _, c := range intConstsWithPrefix(t, "shared/ops", cmd.prefix) {
			fmt.Fprintf(&opsCodes, "| %s | %s | %s |\n", cmd.name, c[0], cell(c[1]))
		}
	}
	checkGenerated(t, page, "ops-exit-codes", opsCodes.String())

	var reasons strings.Builder
	reasons.WriteString("| `reason` | meaning |\n|---|---|\n")
	seen := map[string]bool{}
	for _, r := range constsWithPrefix(t, "shared/engine", "Reason") {
		note, ok := reasonNotes[r[0]]
		if !ok {
			t.Errorf("engine reason %q (%s) has no reasonNotes entry", r[0], r[1])
		}
		seen[r[0]] = true
		fmt.Fprintf(&reasons, "| `%s` | %s |\n", r[0], note)
	}
	for r := range reasonNotes {
		if !seen[r] {
			t.Errorf("reasonNotes[%q]: shared/engine has no such reason", r)
		}
	}
	checkGenerated(t, page, "reasons", reasons.String())

	var fields strings.Builder
	used := map[string]bool{}
	goNames := map[string]bool{} // the summary structs' Go field names
	for _, st := range summaryTypes {
		for _, f := range structFields(t, st.dir, st.typ) {
			goNames[f.goName] = true
		}
	}
	for _, st := range summaryTypes {
		fmt.Fprintf(&fields, "\n#### %s\n\n| field | type | meaning |\n|---|---|---|\n", st.heading)
		for _, f := range structFields(t, st.dir, st.typ) {
			key := st.dir + "." + st.typ + "." + f.json
			desc := f.doc
			if note, ok := fieldNotes[key]; ok {
				desc, used[key] = note, true
			}
			if desc == "" {
				t.Errorf("%s.%s: JSON field %q has neither a comment nor a fieldNotes entry", st.dir, st.typ, f.json)
			}
			if leak := goIdentifier(desc, goNames); leak != "" {
				t.Errorf("%s.%s: JSON field %q: its description names the Go identifier %q, which a reader of the page does not know; write it for users (its comment, or a fieldNotes entry): %s", st.dir, st.typ, f.json, leak, desc)
			}
			omit := ""
			if f.omitempty {
				omit = " (left out when empty)"
			}
			fmt.Fprintf(&fields, "| `%s` | %s | %s%s |\n", f.json, f.typ, cell(desc), omit)
		}
	}
	for k := range fieldNotes {
		if !used[k] {
			t.Errorf("fieldNotes[%q]: no such JSON field, or its declaration has a comment of its own now", k)
		}
	}
	checkGenerated(t, page, "fields", fields.String())
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

type jsonField struct {
	json, typ, doc, goName string
	omitempty              bool
}

var (
	// camelCase is a Go identifier of several words (ForwardedRecords, FirstRecordMS) or a
	// selector (Options.DecodeRecords).
	camelCase = regexp.MustCompile(`\b[A-Z][a-z0-9]+[A-Z]\w*|\b[A-Za-z]+\.[A-Z]\w*|\bnil\b`)
	// kafkaNames are Kafka's own names a user meets in Kafka's documentation.
	kafkaNames = map[string]bool{"DeleteRecords": true}
	// word is a capitalized word that may be a Go field name (From, To, Position).
	word = regexp.MustCompile(`\b[A-Z][a-z]+\b`)
)

// goIdentifier returns the first Go identifier in a field description, or "": a CamelCase
// name, a selector, nil, or a summary struct's Go field name other than at a sentence start.
func goIdentifier(desc string, goNames map[string]bool) string {
	for _, m := range camelCase.FindAllString(desc, -1) {
		if !kafkaNames[m] {
			return m
		}
	}
	for _, loc := range word.FindAllStringIndex(desc, -1) {
		w := desc[loc[0]:loc[1]]
		before := strings.TrimRight(desc[:loc[0]], " ")
		if goNames[w] && before != "" && !strings.HasSuffix(before, ".") {
			return w
		}
	}
	return ""
}

// parsePkg parses a package's non-test files.
func parsePkg(t *testing.T, dir string) []*ast.File {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(root(t), dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, m := range matches {
		if strings.HasSuffix(m, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, m, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// structFields lists the JSON fields of type typ in dir, with their Go comments.
func structFields(t *testing.T, dir, typ string) []jsonField {
	t.Helper()
	var out []jsonField
	found := false
	for _, f := range parsePkg(t, dir) {
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || ts.Name.Name != typ {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return false
			}
			found = true
			for _, fl := range st.Fields.List {
				if fl.Tag == nil {
					continue
				}
				tag, _ := strconv.Unquote(fl.Tag.Value)
				name, opts, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
				if name == "" || name == "-" {
					continue
				}
				// The first paragraph of a field's comment is for users (the page); later
				// paragraphs are for developers and may name Go identifiers.
				users, _, _ := strings.Cut(fl.Doc.Text(), "\n\n")
				doc := strings.Join(strings.Fields(strings.TrimSpace(users+" "+fl.Comment.Text())), " ")
				if len(fl.Names) == 1 {
					// "FirstRecordMS is the time ..." reads "the time ..." in a table row.
					if rest, ok := strings.CutPrefix(doc, fl.Names[0].Name+" "); ok {
						for _, verb := range []string{"is ", "are "} {
							rest = strings.TrimPrefix(rest, verb)
						}
						doc = rest
					}
				}
				goName := ""
				if len(fl.Names) == 1 {
					goName = fl.Names[0].Name
				}
				out = append(out, jsonField{json: name, typ: jsonType(fl.Type), doc: doc, goName: goName, omitempty: strings.Contains(opts, "omitempty")})
			}
			return false
		})
	}
	if !found {
		t.Fatalf("%s: no struct %s", dir, typ)
	}
	return out
}

// jsonType names a Go type as JSON shows it.
func jsonType(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		switch {
		case e.Name == "string":
			return "string"
		case e.Name == "bool":
			return "boolean"
		case strings.HasPrefix(e.Name, "int") || strings.HasPrefix(e.Name, "uint") || strings.HasPrefix(e.Name, "float"):
			return "number"
		}
		return "object"
	case *ast.StarExpr:
		return jsonType(e.X) + " or null"
	case *ast.ArrayType:
		return "array of " + jsonType(e.Elt)
	case *ast.MapType:
		return "object of " + jsonType(e.Value)
	case *ast.SelectorExpr:
		if e.Sel.Name == "Time" {
			return "string (time)"
		}
	}
	return "object"
}

// constsWithPrefix lists dir's string constants named prefix* as (value, comment).
func constsWithPrefix(t *testing.T, dir, prefix string) [][2]string {
	t.Helper()
	return litConstsWithPrefix(t, dir, prefix, token.STRING)
}

// intConstsWithPrefix lists dir's integer constants named prefix* as (value, comment).
func intConstsWithPrefix(t *testing.T, dir, prefix string) [][2]string {
	t.Helper()
	return litConstsWithPrefix(t, dir, prefix, token.INT)
}

// litConstsWithPrefix lists dir's constants of literal kind named prefix* as (value, comment).
func litConstsWithPrefix(t *testing.T, dir, prefix string, kind token.Token) [][2]string {
	t.Helper()
	var out [][2]string
	for _, f := range parsePkg(t, dir) {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, prefix) || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != kind {
						continue
					}
					v := lit.Value
					if kind == token.STRING {
						v, _ = strconv.Unquote(lit.Value)
					}
					doc := strings.Join(strings.Fields(vs.Doc.Text()+" "+vs.Comment.Text()), " ")
					if doc == "" {
						t.Errorf("%s.%s has no comment saying what it means", dir, n.Name)
					}
					out = append(out, [2]string{v, doc})
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no %s* constants", dir, prefix)
	}
	return out
}
