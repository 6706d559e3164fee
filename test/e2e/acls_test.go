package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mm2go/mm2go/test/testkit"
)

// startAuthorizerBroker starts a cluster of its own with Kafka's StandardAuthorizer (anonymous
// PLAINTEXT clients are super users, so the test and mm2go may do anything; other principals
// only what ACLs allow) and returns its PLAINTEXT address. It is stopped when the test ends.
func startAuthorizerBroker(t *testing.T, c testkit.Clusters) string {
	t.Helper()
	home := c.KafkaHome
	if home == "" {
		home = filepath.Join(testkit.RepoRoot(t), "test", "kafka", "state")
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	name := "acl" + hex.EncodeToString(b)
	for attempt := 0; ; attempt++ {
		base := freePortBase(t)
		cmd := exec.Command(testkit.KafkaScript(t), "start", name, fmt.Sprint(base),
			"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
			"super.users=User:ANONYMOUS;User:admin",
			"allow.everyone.if.no.acl.found=true")
		cmd.Env = append(os.Environ(), "MM2GO_KAFKA_HOME="+home)
		if c.KafkaLib != "" {
			cmd.Env = append(cmd.Env, "MM2GO_KAFKA_LIB="+c.KafkaLib)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			log, _ := os.ReadFile(filepath.Join(home, name, "logs", "stdout.log"))
			if attempt < 2 && strings.Contains(string(log), "Address already in use") {
				_ = os.RemoveAll(filepath.Join(home, name))
				continue
			}
			t.Fatalf("starting the authorizer broker: %v\n%s\n%s", err, out, lastLines(string(log), 40))
		}
		t.Cleanup(func() {
			stop := exec.Command(testkit.KafkaScript(t), "stop", name)
			stop.Env = append(os.Environ(), "MM2GO_KAFKA_HOME="+home)
			if out, err := stop.CombinedOutput(); err != nil {
				t.Errorf("stopping %s: %v\n%s", name, err, out)
			}
			if !t.Failed() {
				_ = os.RemoveAll(filepath.Join(home, name))
			}
		})
		return fmt.Sprintf("127.0.0.1:%d", base)
	}
}

// topicACLs lists the ACL bindings on topic (LITERAL), as "PERMISSION principal OPERATION host".
func topicACLs(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) []string {
	t.Helper()
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeTopic
	req.ResourceName = &topic
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("describing ACLs of %s: %v (code %d)", topic, err, resp.ErrorCode)
	}
	var out []string
	for _, r := range resp.Resources {
		for _, a := range r.ACLs {
			out = append(out, fmt.Sprintf("%s %s %s %s", a.PermissionType, a.Principal, a.Operation, a.Host))
		}
	}
	sort.Strings(out)
	return out
}

// TestTopicACLSync: on brokers with an authorizer, `mirror run` copies the source's topic ACLs
// to the remote topic as MM2 4.1.1 does (LITERAL bindings of mirrored topics; ALLOW WRITE
// skipped; ALLOW ALL narrowed to READ; DENY kept; PREFIXED and other topics' bindings left
// out), besides the records; sync.topic.acls.enabled=false copies none; a source without an
// authorizer is skipped with one INFO line.
func TestTopicACLSync(t *testing.T) {
	c := testkit.Require(t)
	bootstrap := startAuthorizerBroker(t, c)
	ctx := testkit.Context(t, 3*time.Minute)
	topic := testkit.CreateTopic(t, bootstrap, testkit.Name(t, "acl"), 2, nil)
	other := testkit.CreateTopic(t, bootstrap, testkit.Name(t, "aclother"), 1, nil)
	cl := testkit.Client(t, bootstrap)
	adm := kadm.NewClient(cl)

	add := func(b *kadm.ACLBuilder) {
		t.Helper()
		res, err := adm.CreateACLs(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("creating ACL: %v", r.Err)
			}
		}
	}
	add(kadm.NewACLs().Topics(topic).Allow("User:reader").AllowHosts("*").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	add(kadm.NewACLs().Topics(topic).Allow("User:writer").AllowHosts("*").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral))
	add(kadm.NewACLs().Topics(topic).Allow("User:owner").AllowHosts("10.0.0.1").Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternLiteral))
	add(kadm.NewACLs().Topics(topic).Deny("User:mallory").DenyHosts("*").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	add(kadm.NewACLs().Topics(topic).Allow("User:describer").AllowHosts("*").Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral))
	add(kadm.NewACLs().Topics(topic[:len(topic)-2]).Allow("User:prefixed").AllowHosts("*").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternPrefixed))
	add(kadm.NewACLs().Topics(other).Allow("User:elsewhere").AllowHosts("*").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))

	sent := testkit.Produce(t, bootstrap,
		&kgo.Record{Topic: topic, Partition: 0, Key: []byte("k0"), Value: []byte("v0"), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte{0, 1}}}},
		&kgo.Record{Topic: topic, Partition: 1, Value: []byte("v1")})

	// One cluster plays both sides (aliases source and target): the remote topic is
	// source.<topic> on the same authorizer broker.
	env := MirrorEnv(testkit.Clusters{Source: testkit.Cluster{Bootstrap: bootstrap}, Target: testkit.Cluster{Bootstrap: bootstrap}}, topic, "MM2_OFFSET_STORAGE_PARTITIONS=1")
	res := RunMirror(t, env)
	if res.Code != 0 {
		t.Fatalf("mirror run: exit %d\n%s", res.Code, res.Stderr)
	}
	remote := "source." + topic
	want := []string{"ALLOW User:describer DESCRIBE *", "ALLOW User:owner READ 10.0.0.1", "ALLOW User:reader READ *", "DENY User:mallory READ *"}
	var got []string
	// The broker applies created ACLs through its metadata log: poll until they show.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got = topicACLs(ctx, t, cl, remote)
		if len(got) >= len(want) || time.Now().After(deadline) {
			break
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("ACLs of %s:\n%s\nwant:\n%s\nmirror's log:\n%s", remote, strings.Join(got, "\n"), strings.Join(want, "\n"), lastLines(res.Stderr, 30))
	}
	if n := topicACLs(ctx, t, cl, "source."+other); len(n) != 0 {
		t.Errorf("ACLs of a topic not mirrored were copied: %v", n)
	}
	recs := testkit.ReadAll(t, bootstrap, remote)
	if len(recs) != len(sent) {
		t.Fatalf("%d records on %s, want %d", len(recs), remote, len(sent))
	}
	for _, r := range recs {
		s := sent[r.Partition]
		if string(r.Key) != string(s.Key) || string(r.Value) != string(s.Value) || len(r.Headers) != len(s.Headers) {
			t.Errorf("partition %d: got %q=%q, sent %q=%q", r.Partition, r.Key, r.Value, s.Key, s.Value)
		}
	}

	// sync.topic.acls.enabled=false: nothing copied.
	topic2 := testkit.CreateTopic(t, bootstrap, testkit.Name(t, "aclnosync"), 1, nil)
	add(kadm.NewACLs().Topics(topic2).Allow("User:reader").AllowHosts("*").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	env2 := MirrorEnv(testkit.Clusters{Source: testkit.Cluster{Bootstrap: bootstrap}, Target: testkit.Cluster{Bootstrap: bootstrap}}, topic2, "MM2_SYNC_TOPIC_ACLS_ENABLED=false", "MM2_OFFSET_STORAGE_PARTITIONS=1")
	if res := RunMirror(t, env2); res.Code != 0 || strings.Contains(res.Stderr, "topic ACLs synced") {
		t.Fatalf("mirror run without ACL sync: exit %d\n%s", res.Code, res.Stderr)
	}
	if n := topicACLs(ctx, t, cl, "source."+topic2); len(n) != 0 {
		t.Errorf("sync.topic.acls.enabled=false copied ACLs: %v", n)
	}

	// The harness brokers have no authorizer: the run succeeds and says so once.
	plain := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "aclplain"), 1, nil)
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, "source."+plain)
	res = RunMirror(t, MirrorEnv(c, plain))
	if res.Code != 0 || strings.Count(res.Stderr, "no ACL authorizer is configured on the source cluster") != 1 {
		t.Errorf("without an authorizer: exit %d\n%s", res.Code, res.Stderr)
	}
}
