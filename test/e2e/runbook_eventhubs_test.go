package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/ehfake"
)

var functionBuilds sync.Map // function name -> *functionBuild

type functionBuild struct {
	once sync.Once
	path string
	err  error
}

// functionBinary builds functions/<name> once per test process and returns its path (the
// mirror binary is MirrorBinary's).
func functionBinary(t *testing.T, name string) string {
	t.Helper()
	if name == "mirror" {
		return MirrorBinary(t)
	}
	v, _ := functionBuilds.LoadOrStore(name, &functionBuild{})
	b := v.(*functionBuild)
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "mm2go-e2e-"+name+"-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", b.path, "./functions/"+name)
		cmd.Dir = testkit.RepoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = errors.New(string(out) + err.Error())
		}
	})
	if b.err != nil {
		t.Fatalf("building functions/%s: %v", name, b.err)
	}
	return b.path
}

// runbookCommands returns the command lines of page's sh code blocks (mirror, checkpoint,
// heartbeat) in order, and the variables its export lines set.
func runbookCommands(t *testing.T, page string) (cmds [][]string, exported []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), page))
	if err != nil {
		t.Fatal(err)
	}
	fence := ""
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "```") {
			if fence == "" {
				fence = strings.TrimPrefix(l, "```")
			} else {
				fence = ""
			}
			continue
		}
		if fence != "sh" || l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		f := strings.Fields(l)
		switch f[0] {
		case "export":
			name, _, _ := strings.Cut(f[1], "=")
			exported = append(exported, name)
		case "mirror", "checkpoint", "heartbeat":
			cmds = append(cmds, f)
		default:
			t.Fatalf("%s: a command the runbook test does not know how to run: %s", page, l)
		}
	}
	return cmds, exported
}

// TestRunbookMigratingToEventHubs runs the commands of docs/migrating-to-event-hubs.md in the
// page's order against real Kafka and the Event Hubs double (Standard), with the MM2 files of
// the page (mm2-config.properties and access.properties, the connection string read with
// ${file:...}); each must exit 0 as the page says, and what the page says to check holds: the
// plan shows the namespace's budget and MirrorMaker 2's needs, the burst copies the records,
// the cutover puts the group on the namespace at the source's committed offsets (a 1:1 copy),
// nothing on Kafka is written after it.
func TestRunbookMigratingToEventHubs(t *testing.T) {
	c := testkit.Require(t)
	const page = "docs/migrating-to-event-hubs.md"
	cmds, exported := runbookCommands(t, page)
	if len(cmds) < 8 {
		t.Fatalf("%s: %d commands found, want the runbook's (at least 8)", page, len(cmds))
	}
	f := ehfake.New(t, ehfake.Config{})
	topic := createTopic(t, c.Source.Bootstrap, testkit.Name(t, "orders"), 3, nil)
	group := "orders-app"
	want := testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic, 3, 90)...)
	file := writeSeedFiles(t, fmt.Sprintf(seedFlow, topic)+
		"target.eventhubs.connection.string = ${file:ACCESS:EH_CONNECTION_STRING}\n"+
		"target.ssl.truststore.location = "+f.CAFile+"\n",
		map[string]string{"SRC_BROKERS": c.Source.Bootstrap, "EH_BROKERS": f.Addr, "EH_CONNECTION_STRING": f.ConnectionString})
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "MM2_LOG_FORMAT=json", "MM2_CONFIG_FILE=" + file,
		"MM2_BURST_MAX_DURATION=50s", "MM2_SYNC_GROUP_OFFSETS_ENABLED=true"}
	for _, name := range exported {
		if !strings.Contains(strings.Join(env, "\n"), name+"=") {
			t.Errorf("%s exports %s; the test does not set it", page, name)
		}
	}
	groupAt := map[int32]int64{0: 7, 1: 30, 2: 0}
	commitGroup(t, c.Source.Bootstrap, group, topic, groupAt, "")
	ran := map[string]int{}
	for _, cmd := range cmds {
		line := strings.Join(cmd, " ")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		run := exec.CommandContext(ctx, functionBinary(t, cmd[0]), cmd[1:]...)
		run.Env = env
		var stdout, stderr bytes.Buffer
		run.Stdout, run.Stderr = &stdout, &stderr
		err := run.Run()
		cancel()
		if err != nil {
			t.Fatalf("%s: `%s`: %v\nstdout: %s\nstderr: %s", page, line, err, lastLines(stdout.String(), 30), lastLines(stderr.String(), 20))
		}
		ran[line]++
		out := stdout.String()
		switch {
		case line == "mirror plan":
			for _, s := range []string{"event hubs (target):", "topics to create or grow fit the budget", "MirrorMaker 2 on this flow would also need mm2-configs.source.internal, mm2-status.source.internal"} {
				if !strings.Contains(out, s) {
					t.Errorf("`%s` does not say %q:\n%s", line, s, out)
				}
			}
		case line == "mirror run" && ran[line] == 1:
			if r := RunMirrorSummary(t, stdout.Bytes()); r["records"] != float64(len(want)) {
				t.Errorf("`%s` copied %v records, want %d", line, r["records"], len(want))
			}
		case line == "mirror cutover -groups "+group:
			got, err := ehAdmin(t, f).FetchOffsets(testkit.Context(t, 30*time.Second), group)
			if err != nil {
				t.Fatal(err)
			}
			for p, at := range groupAt {
				if o, ok := got.Lookup("source."+topic, p); !ok || o.At != at {
					t.Errorf("after `%s`: %s on the namespace at %+v for partition %d, want %d", line, group, o, p, at)
				}
			}
		}
	}
	testkit.AssertSameRecords(t, want, ehRead(t, f, "source."+topic))
	for _, must := range []string{"mirror plan", "mirror run", "mirror status", "mirror verify", "checkpoint run", "mirror cutover -groups " + group} {
		if ran[must] == 0 {
			t.Errorf("%s has no `%s` step", page, must)
		}
	}
}
