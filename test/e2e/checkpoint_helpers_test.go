package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/mm2"
	"github.com/mm2go/mm2go/test/testkit"
)

// mirrorClientTool compiles test/java/MirrorClientTool.java against the harness's Kafka jars
// and runs it: genuine MM2 client code (RemoteClusterUtils) answering about a cluster. It
// returns the non-empty lines of its standard output.
func mirrorClientTool(t *testing.T, c testkit.Clusters, args ...string) []string {
	t.Helper()
	if c.KafkaLib == "" {
		t.Fatal("MM2GO_TEST_KAFKA_LIB is not set: the Java interop tests need the harness jars")
	}
	dir := t.TempDir()
	cp := filepath.Join(c.KafkaLib, "*")
	src := filepath.Join(testkit.RepoRoot(t), "test", "java", "MirrorClientTool.java")
	if out, err := exec.Command("javac", "-cp", cp, "-d", dir, src).CombinedOutput(); err != nil {
		t.Fatalf("javac MirrorClientTool: %v\n%s", err, out)
	}
	cmd := exec.Command("java", append([]string{"-cp", dir + string(filepath.ListSeparator) + cp, "MirrorClientTool"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("MirrorClientTool %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// checkpointLines formats checkpoints of one group as MirrorClientTool's translate prints
// them: "<topic> <partition> <offset> <metadata>", sorted.
func checkpointLines(cps map[int32]mm2.Checkpoint) []string {
	var out []string
	for _, c := range cps {
		out = append(out, strings.TrimSpace(fmt.Sprintf("%s %d %d %s", c.Topic, c.Partition, c.DownstreamOffset, c.Metadata)))
	}
	sort.Strings(out)
	return out
}

// groupCheckpoints reads a checkpoints topic and returns the last checkpoint per partition of
// topic for group, as MirrorClient does.
func groupCheckpoints(ctx context.Context, bootstrap, checkpointsTopic, group, topic string) (map[int32]mm2.Checkpoint, error) {
	recs, err := testkit.ReadAllErr(ctx, bootstrap, checkpointsTopic)
	if err != nil {
		return nil, err
	}
	out := map[int32]mm2.Checkpoint{}
	for _, r := range recs {
		c, err := mm2.DecodeCheckpoint(r.Key, r.Value)
		if err != nil || c.Group != group || c.Topic != topic {
			continue
		}
		out[c.Partition] = c
	}
	return out, nil
}

// offsetSyncs reads an offset-syncs topic in order and keeps the syncs of topic.
func offsetSyncs(ctx context.Context, bootstrap, syncsTopic, topic string) ([]mm2.OffsetSync, error) {
	recs, err := testkit.ReadAllErr(ctx, bootstrap, syncsTopic)
	if err != nil {
		return nil, err
	}
	var out []mm2.OffsetSync
	for _, r := range recs {
		s, err := mm2.DecodeOffsetSync(r.Key, r.Value)
		if err == nil && s.Topic == topic {
			out = append(out, s)
		}
	}
	return out, nil
}

// commitGroup commits offsets (partition -> offset) of topic for group on a cluster and
// deletes the group when the test ends.
func commitGroup(t *testing.T, bootstrap, group, topic string, offsets map[int32]int64, metadata string) {
	t.Helper()
	os := kadm.Offsets{}
	for p, o := range offsets {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1, Metadata: metadata})
	}
	if err := testkit.Admin(t, bootstrap).CommitAllOffsets(testkit.Context(t, 30*time.Second), group, os); err != nil {
		t.Fatalf("committing %v for %s: %v", offsets, group, err)
	}
	t.Cleanup(func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
		if err != nil {
			return
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = kadm.NewClient(cl).DeleteGroup(ctx, group)
	})
}

// upstreamOffsetOf parses "p<partition>-u<offset>" record values.
func upstreamOffsetOf(t *testing.T, v []byte) int64 {
	t.Helper()
	s := string(v)
	i := strings.LastIndex(s, "-u")
	if i < 0 {
		t.Fatalf("record %q is not a numbered record", s)
	}
	u, err := strconv.ParseInt(s[i+2:], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
