// Package ehfake is an Azure Event Hubs double for tests: franz-go's kfake
// behind a TLS listener, answering the way the Event Hubs Kafka endpoint does
// (as documented by Microsoft or observed by users; see
// ../shared/docs/eventhubs.md):
//
//   - SASL PLAIN only, user "$ConnectionString" with the namespace connection
//     string as password, over TLS;
//   - compressed produce batches refused with UNSUPPORTED_FOR_MESSAGE_FORMAT
//     (Standard tier: no codec at all);
//   - a request larger than 1,046,528 bytes makes it close the connection
//     without an answer;
//   - no AlterConfigs, IncrementalAlterConfigs, ACL, transaction or SCRAM APIs
//     advertised; Metadata capped at v9 and OffsetFetch at v8;
//   - consumer groups without live members are described as Dead;
//   - topic (event hub) count and per-topic partition caps on CreateTopics;
//     the replication factor asked for is ignored (Event Hubs keeps its own
//     copies); CreateTopics capped at v4 (no configs in its answer) and
//     Produce at v12 (no topic IDs): Java clients, MirrorMaker 2 among them,
//     cannot match kfake's later answers to their requests without topic IDs;
//   - OffsetCommit advertised at kfake's latest version, as Event Hubs does
//     (franz-go#1312), so a v10+ commit by name only (zero topic ID) fails;
//   - Standard tier: no partitions added to an existing event hub
//     (CreatePartitions refused with POLICY_VIOLATION);
//   - at most 4 offset commits per second per partition and group (Event
//     Hubs' documented throttle); a commit over it is refused with
//     THROTTLING_QUOTA_EXCEEDED (Event Hubs' exact answer is not documented);
//   - connections idle longer than IdleCut dropped.
//
// Everything refused is counted, so tests can assert what a client tried.
package ehfake

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// MaxRequestBytes is the request size above which Event Hubs drops the connection.
const MaxRequestBytes = 1_046_528

// Config shapes the double; zero values mean Standard-tier defaults.
type Config struct {
	// Namespace is the host in the connection string; default "mm2go-test.servicebus.windows.net".
	Namespace string
	// MaxTopics per namespace (default 10) and MaxPartitions per topic (default 32).
	MaxTopics     int
	MaxPartitions int32
	// AllowGzip accepts gzip batches (Premium/Dedicated); other codecs are always refused.
	AllowGzip bool
	// Premium answers as the Premium tier: gzip accepted, partitions may be added, and
	// defaults of 100 event hubs and 100 partitions per event hub.
	Premium bool
	// IdleCut drops connections that sent nothing for this long; 0: never.
	IdleCut time.Duration
	// Topics are created at start (name -> partitions).
	Topics map[string]int32
}

// Fake is a running double.
type Fake struct {
	// Cluster is the kfake cluster behind the listener.
	Cluster *kfake.Cluster
	// Addr is the TLS listener, 127.0.0.1:port.
	Addr string
	// ConnectionString is the namespace connection string the double accepts.
	ConnectionString string
	// CAFile is a PEM file of the CA that signed the listener's certificate.
	CAFile string

	cfg Config

	// Counters of what the double refused or cut.
	Compressed, Oversized, IdleCuts, QuotaRefusals atomic.Int64
	// ThrottledCommits counts offset commits refused for passing 4 per second per partition.
	ThrottledCommits atomic.Int64
	// Commits counts the partition offsets committed (accepted OffsetCommit entries).
	Commits atomic.Int64
	// LargestRequest is the largest request frame seen, in bytes.
	LargestRequest atomic.Int64

	mu        sync.Mutex
	topics    map[string]int32
	heartbeat map[string]time.Time // group -> last heartbeat/join/sync
	commits   map[commitKey][]time.Time
}

// CommitsPerSecond is Event Hubs' offset commit throttle, per partition (and group).
const CommitsPerSecond = 4

type commitKey struct {
	group, topic string
	partition    int32
}

// New starts the double; it stops when the test ends.
func New(t testing.TB, cfg Config) *Fake {
	t.Helper()
	if cfg.Namespace == "" {
		cfg.Namespace = "mm2go-test.servicebus.windows.net"
	}
	if cfg.Premium {
		cfg.AllowGzip = true
	}
	if cfg.MaxTopics == 0 {
		cfg.MaxTopics = 10
		if cfg.Premium {
			cfg.MaxTopics = 100
		}
	}
	if cfg.MaxPartitions == 0 {
		cfg.MaxPartitions = 32
		if cfg.Premium {
			cfg.MaxPartitions = 100
		}
	}
	f := &Fake{cfg: cfg, topics: map[string]int32{}, heartbeat: map[string]time.Time{}, commits: map[commitKey][]time.Time{},
		ConnectionString: fmt.Sprintf("Endpoint=sb://%s/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=%s",
			cfg.Namespace, randKey())}
	tlsCfg := f.certs(t)

	vs := kversion.Stable()
	vs.SetMaxKeyVersion(int16(kmsg.Metadata), 9)
	vs.SetMaxKeyVersion(int16(kmsg.OffsetFetch), 8)
	for _, k := range []kmsg.Key{kmsg.AddPartitionsToTxn, kmsg.AddOffsetsToTxn, kmsg.EndTxn, kmsg.WriteTxnMarkers,
		kmsg.TxnOffsetCommit, kmsg.DescribeACLs, kmsg.CreateACLs, kmsg.DeleteACLs, kmsg.AlterConfigs,
		kmsg.IncrementalAlterConfigs, kmsg.DescribeUserSCRAMCredentials, kmsg.AlterUserSCRAMCredentials,
		kmsg.ConsumerGroupHeartbeat, kmsg.ConsumerGroupDescribe} {
		vs.SetMaxKeyVersion(int16(k), -1)
	}
	vs.SetMaxKeyVersion(int16(kmsg.DescribeConfigs), 2)
	vs.SetMaxKeyVersion(int16(kmsg.CreateTopics), 4)
	vs.SetMaxKeyVersion(int16(kmsg.Produce), 12)

	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "$ConnectionString", f.ConnectionString),
		kfake.MaxVersions(vs),
		kfake.ListenFn(func(network, addr string) (net.Listener, error) {
			ln, err := net.Listen(network, addr)
			if err != nil {
				return nil, err
			}
			return &listener{Listener: tls.NewListener(ln, tlsCfg), f: f}, nil
		}),
	)
	if err != nil {
		t.Fatalf("starting the Event Hubs double: %v", err)
	}
	t.Cleanup(c.Close)
	f.Cluster = c
	f.Addr = c.ListenAddrs()[0]
	for name, n := range cfg.Topics {
		f.CreateTopic(t, name, n)
	}

	c.ControlKey(int16(kmsg.Produce), f.produce)
	c.ControlKey(int16(kmsg.CreateTopics), f.createTopics)
	c.ControlKey(int16(kmsg.DeleteTopics), f.deleteTopics)
	c.ControlKey(int16(kmsg.CreatePartitions), f.createPartitions)
	c.ControlKey(int16(kmsg.OffsetCommit), f.offsetCommit)
	c.ControlKey(int16(kmsg.DescribeGroups), f.describeGroups)
	for _, k := range []kmsg.Key{kmsg.JoinGroup, kmsg.SyncGroup, kmsg.Heartbeat} {
		c.ControlKey(int16(k), f.observeGroup)
	}
	return f
}

// CreateTopic creates an event hub directly (as the portal or ARM would).
func (f *Fake) CreateTopic(t testing.TB, name string, partitions int32) {
	t.Helper()
	if err := f.Cluster.CreateTopic(name, partitions, nil); err != nil {
		t.Fatalf("creating %s on the Event Hubs double: %v", name, err)
	}
	f.mu.Lock()
	f.topics[name] = partitions
	f.mu.Unlock()
}

// Topics returns how many event hubs the namespace has.
func (f *Fake) Topics() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.topics)
}

// produce refuses compressed batches like Event Hubs.
func (f *Fake) produce(kreq kmsg.Request) (kmsg.Response, error, bool) {
	f.Cluster.KeepControl()
	req := kreq.(*kmsg.ProduceRequest)
	bad := false
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if codec := compression(p.Records); codec != 0 && !(codec == 1 && f.cfg.AllowGzip) {
				bad = true
			}
		}
	}
	if !bad {
		return nil, nil, false
	}
	f.Compressed.Add(1)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = kerr.UnsupportedForMessageFormat.Code
			msg := "The message format version on the broker does not support the request."
			rp.ErrorMessage = &msg
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil, true
}

// compression returns the codec of the first compressed batch in a v2
// record-batch blob, or 0.
func compression(b []byte) int16 {
	for len(b) >= 61 {
		n := int(binary.BigEndian.Uint32(b[8:12])) + 12
		if codec := int16(binary.BigEndian.Uint16(b[21:23])) & 0x7; codec != 0 {
			return codec
		}
		if n > len(b) {
			break
		}
		b = b[n:]
	}
	return 0
}

func (f *Fake) createTopics(kreq kmsg.Request) (kmsg.Response, error, bool) {
	f.Cluster.KeepControl()
	req := kreq.(*kmsg.CreateTopicsRequest)
	f.mu.Lock()
	defer f.mu.Unlock()
	count := len(f.topics)
	problems := map[string]*kerr.Error{}
	msgs := map[string]string{}
	for _, t := range req.Topics {
		if _, ok := f.topics[t.Topic]; ok {
			continue
		}
		switch {
		case t.NumPartitions > f.cfg.MaxPartitions:
			problems[t.Topic] = kerr.InvalidPartitions
			msgs[t.Topic] = fmt.Sprintf("Partition count %d exceeds the maximum of %d for this tier.", t.NumPartitions, f.cfg.MaxPartitions)
		case count+1 > f.cfg.MaxTopics:
			problems[t.Topic] = kerr.PolicyViolation
			msgs[t.Topic] = fmt.Sprintf("The maximum number of event hubs (%d) for this namespace has been reached.", f.cfg.MaxTopics)
		default:
			count++
		}
	}
	if len(problems) == 0 {
		for i := range req.Topics {
			// Event Hubs keeps its own copies: any replication factor is accepted.
			req.Topics[i].ReplicationFactor = -1
		}
		if !req.ValidateOnly {
			for _, t := range req.Topics {
				f.topics[t.Topic] = t.NumPartitions
			}
		}
		return nil, nil, false
	}
	f.QuotaRefusals.Add(int64(len(problems)))
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		e, ok := problems[t.Topic]
		if !ok {
			e = kerr.PolicyViolation
			msgs[t.Topic] = "not created: another topic in the request exceeded a quota"
		}
		m := msgs[t.Topic]
		rt.ErrorCode, rt.ErrorMessage = e.Code, &m
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil, true
}

// createPartitions refuses to add partitions on the Standard tier.
func (f *Fake) createPartitions(kreq kmsg.Request) (kmsg.Response, error, bool) {
	f.Cluster.KeepControl()
	if f.cfg.Premium {
		return nil, nil, false
	}
	req := kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		rt.ErrorCode = kerr.PolicyViolation.Code
		msg := "The partition count of an event hub cannot be changed on the Standard tier."
		rt.ErrorMessage = &msg
		resp.Topics = append(resp.Topics, rt)
	}
	f.QuotaRefusals.Add(int64(len(req.Topics)))
	return resp, nil, true
}

// offsetCommit refuses a commit that would be the fifth within a second for one of its
// partitions (in the group), and counts the accepted ones.
func (f *Fake) offsetCommit(kreq kmsg.Request) (kmsg.Response, error, bool) {
	f.Cluster.KeepControl()
	req := kreq.(*kmsg.OffsetCommitRequest)
	now := time.Now()
	f.mu.Lock()
	over := false
	n := 0
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			k := commitKey{req.Group, t.Topic, p.Partition}
			recent := f.commits[k][:0]
			for _, at := range f.commits[k] {
				if now.Sub(at) < time.Second {
					recent = append(recent, at)
				}
			}
			f.commits[k] = recent
			if len(recent) >= CommitsPerSecond {
				over = true
			}
			n++
		}
	}
	if !over {
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				k := commitKey{req.Group, t.Topic, p.Partition}
				f.commits[k] = append(f.commits[k], now)
			}
		}
	}
	f.mu.Unlock()
	if !over {
		f.Commits.Add(int64(n))
		return nil, nil, false
	}
	f.ThrottledCommits.Add(1)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, kerr.ThrottlingQuotaExceeded.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil, true
}

func (f *Fake) deleteTopics(kreq kmsg.Request) (kmsg.Response, error, bool) {
	f.Cluster.KeepControl()
	req := kreq.(*kmsg.DeleteTopicsRequest)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range req.Topics {
		if t.Topic != nil {
			delete(f.topics, *t.Topic)
		}
	}
	for _, t := range req.TopicNames {
		delete(f.topics, t)
	}
	return nil, nil, false
}

func (f *Fake) observeGroup(kreq kmsg.Request) (kmsg.Response, error, bool) {
	f.Cluster.KeepControl()
	var g string
	switch r := kreq.(type) {
	case *kmsg.JoinGroupRequest:
		g = r.Group
	case *kmsg.SyncGroupRequest:
		g = r.Group
	case *kmsg.HeartbeatRequest:
		g = r.Group
	}
	f.mu.Lock()
	f.heartbeat[g] = time.Now()
	f.mu.Unlock()
	return nil, nil, false
}

// describeGroups reports groups without recent member activity as Dead, as
// Event Hubs does for Kafka groups with no active members.
func (f *Fake) describeGroups(kreq kmsg.Request) (kmsg.Response, error, bool) {
	f.Cluster.KeepControl()
	req := kreq.(*kmsg.DescribeGroupsRequest)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, g := range req.Groups {
		if time.Since(f.heartbeat[g]) < 10*time.Second {
			return nil, nil, false
		}
	}
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, g := range req.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group, rg.State, rg.ProtocolType = g, "Dead", "consumer"
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil, true
}

// listener hands kfake connections that enforce the request size cap and
// the idle cut, below kfake and above TLS.
type listener struct {
	net.Listener
	f *Fake
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &conn{Conn: c, f: l.f}, nil
}

// conn follows Kafka's length-prefixed framing of what the client sends.
type conn struct {
	net.Conn
	f      *Fake
	hdr    [4]byte
	nhdr   int
	remain int64 // bytes left in the current frame
	dead   bool
}

var errCut = errors.New("ehfake: connection closed by the Event Hubs double")

func (c *conn) Read(p []byte) (int, error) {
	if c.dead {
		return 0, errCut
	}
	if d := c.f.cfg.IdleCut; d > 0 {
		_ = c.Conn.SetReadDeadline(time.Now().Add(d))
	}
	n, err := c.Conn.Read(p)
	var ne net.Error
	if err != nil && errors.As(err, &ne) && ne.Timeout() {
		c.f.IdleCuts.Add(1)
		c.dead = true
		_ = c.Conn.Close()
		return 0, errCut
	}
	for i := 0; i < n; {
		if c.remain > 0 {
			step := min(int64(n-i), c.remain)
			c.remain -= step
			i += int(step)
			continue
		}
		c.hdr[c.nhdr] = p[i]
		c.nhdr++
		i++
		if c.nhdr == 4 {
			c.nhdr = 0
			size := int64(binary.BigEndian.Uint32(c.hdr[:]))
			total := size + 4
			for {
				old := c.f.LargestRequest.Load()
				if total <= old || c.f.LargestRequest.CompareAndSwap(old, total) {
					break
				}
			}
			if total > MaxRequestBytes {
				c.f.Oversized.Add(1)
				c.dead = true
				_ = c.Conn.Close()
				return 0, errCut
			}
			c.remain = size
		}
	}
	return n, err
}

func (f *Fake) certs(t testing.TB) *tls.Config {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ehfake test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: f.cfg.Namespace},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		DNSNames: []string{f.cfg.Namespace, "*.servicebus.windows.net", "localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	f.CAFile = filepath.Join(t.TempDir(), "ehfake-ca.pem")
	if err := os.WriteFile(f.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
}

func randKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x=", b)
}
