package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/ehfake"
)

// writeSeedFiles writes the user's two files: mm2-config.properties (the MM2
// file they ran connect-mirror-maker.sh with, addresses and secrets taken
// from access.properties through ${file:...}) and access.properties.
func writeSeedFiles(t *testing.T, target string, access map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	accessPath := filepath.Join(dir, "access.properties")
	var b strings.Builder
	for k, v := range access {
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	if err := os.WriteFile(accessPath, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := strings.ReplaceAll(target, "ACCESS", accessPath)
	path := filepath.Join(dir, "mm2-config.properties")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const seedFlow = `clusters = source, target
source->target.enabled = true
source->target.topics = %s
source.bootstrap.servers = ${file:ACCESS:SRC_BROKERS}
target.bootstrap.servers = ${file:ACCESS:EH_BROKERS}
replication.factor = 1
offset-syncs.topic.replication.factor = 1
offset.storage.replication.factor = 1
heartbeats.replication.enabled = false
`

// TestSeedSetupToEventHubs is the users' setup end to end with a connection
// string: their MM2 file and access.properties, unchanged in shape, drive
// `mirror run` into the Event Hubs double; the copy is byte-exact and the
// connection string shows up in no output.
func TestSeedSetupToEventHubs(t *testing.T) {
	c := testkit.Require(t)
	f := ehfake.New(t, ehfake.Config{})
	topic := createTopic(t, c.Source.Bootstrap, testkit.Name(t, "seed"), 4, nil)
	want := testkit.Produce(t, c.Source.Bootstrap, append(testkit.SampleRecords(topic, 4, 300), bigRecords(topic, 4, 8)...)...)
	file := writeSeedFiles(t, fmt.Sprintf(seedFlow, topic)+
		"target.eventhubs.connection.string = ${file:ACCESS:EH_CONNECTION_STRING}\n"+
		// The double's certificate comes from a test CA; Event Hubs' from a public one.
		"target.ssl.truststore.location = "+f.CAFile+"\n",
		map[string]string{"SRC_BROKERS": c.Source.Bootstrap, "EH_BROKERS": f.Addr, "EH_CONNECTION_STRING": f.ConnectionString})
	r := runMirrorEnv(t, "MM2_CONFIG_FILE="+file)
	if r.Code != 0 || r.Records() != int64(len(want)) {
		t.Fatalf("mirror run: exit %d, %d records (want %d)\nstdout: %s\nstderr: %s", r.Code, r.Records(), len(want), r.Stdout, lastLines(r.Stderr, 30))
	}
	testkit.AssertSameRecords(t, want, ehRead(t, f, "source."+topic))
	key := f.ConnectionString[strings.Index(f.ConnectionString, "SharedAccessKey=")+len("SharedAccessKey="):]
	if strings.Contains(r.Stdout+r.Stderr, key) {
		t.Fatal("the connection string's key is in the mirror's output")
	}
	if !strings.Contains(r.Stderr, "is Azure Event Hubs") {
		t.Errorf("no Event Hubs profile notice in the log:\n%s", lastLines(r.Stderr, 20))
	}
	if f.Oversized.Load() != 0 || f.Compressed.Load() != 0 {
		t.Fatalf("the double refused %d oversized and %d compressed requests", f.Oversized.Load(), f.Compressed.Load())
	}
}

// TestSeedSetupWithAzureAD is the same setup with Azure AD and no secret at
// all: the MM2 file says target.azure.auth=managed-identity, access.properties
// holds only addresses, and the Container Apps identity endpoint supplies the
// token.
func TestSeedSetupWithAzureAD(t *testing.T) {
	c := testkit.Require(t)
	fake := newFakeEntra(t)
	ob := startOAuthBroker(t, c, fake)
	topic := createTopic(t, c.Source.Bootstrap, testkit.Name(t, "seed-ad"), 4, nil)
	want := testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic, 4, 300)...)
	testkit.DeleteTopicsAtEnd(t, ob.Plain, "source."+topic)
	file := writeSeedFiles(t, fmt.Sprintf(seedFlow, topic)+
		"target.azure.auth = managed-identity\n"+
		// The stand-in broker listens on 127.0.0.1, so the namespace is named explicitly.
		"target.azure.scope = https://"+ehNamespace+"/.default\n"+
		"target.ssl.truststore.location = "+ob.CA+"\n",
		map[string]string{"SRC_BROKERS": c.Source.Bootstrap, "EH_BROKERS": ob.OAuth})
	body, _ := os.ReadFile(file)
	if strings.Contains(strings.ToLower(string(body)), "secret") || strings.Contains(string(body), "SharedAccessKey") {
		t.Fatal("the Azure AD setup file holds a secret")
	}
	r := runMirrorEnv(t, "MM2_CONFIG_FILE="+file, "IDENTITY_ENDPOINT="+fake.IdentityEndpoint, "IDENTITY_HEADER="+fake.IdentityHeader)
	if r.Code != 0 || r.Records() != int64(len(want)) {
		t.Fatalf("mirror run: exit %d, %d records (want %d)\nstdout: %s\nstderr: %s", r.Code, r.Records(), len(want), r.Stdout, lastLines(r.Stderr, 30))
	}
	testkit.AssertSameRecords(t, want, testkit.ReadAll(t, ob.Plain, "source."+topic))
	if n := len(fake.Issued()); n == 0 {
		t.Fatal("no managed identity token was issued")
	}
}
