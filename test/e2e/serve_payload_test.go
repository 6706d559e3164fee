package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/dispatcher"
	"github.com/mm2go/mm2go/test/testkit/oidcissuer"
)

// TestServeGenuineDispatcherPayload: payload mode (key type byte-array, as shipped) under the
// genuine dispatcher. Records it can send are written from their events with exactly the losses
// docs/events.md lists (payloadExpectation); a record that already is a CloudEvent, a record the
// dispatcher cannot send and a poll spoiled by a null header value are gaps, fetched from the
// source byte for byte by the next event. Unordered delivery: every record once, in order.
func TestServeGenuineDispatcherPayload(t *testing.T) {
	c := testkit.Require(t)
	tp := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "gpo"), 2, nil)
	tu := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "gpu"), 2, nil)
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, "source."+tp, "source."+tu)
	// Payload mode trusts only its KafkaSource's OIDC identity. The dispatcher kit runs without a
	// Kubernetes API to request that token from, so a proxy in front of the function adds it.
	iss := oidcissuer.Start(t, oidcissuer.Options{}).StartTLSFront(t, oidcissuer.FrontOptions{}) // payload mode needs an https issuer
	fn := startServe(t, c, c.Target.Bootstrap, tp+","+tu, "MM2_EVENT_MODE=payload", "MM2_EVENT_KEY_TYPE=byte-array",
		"MM2_SERVE_OIDC_ISSUER="+iss.Issuer(oidcissuer.DefaultIssuer), "MM2_SERVE_OIDC_CA_FILE="+iss.CAFile, "MM2_SERVE_OIDC_AUDIENCE=mm2go", "MM2_SERVE_OIDC_ALLOWED_SUBJECTS="+kafkaSourceSubject)
	sink := bearerProxy(t, fn.URL, iss.Token(oidcissuer.DefaultIssuer, kafkaSourceSubject, "mm2go"))
	cfg := shippedDelivery(t, c.Source.Bootstrap, []string{tp}, sink)
	if cfg.KeyType != dispatcher.KeyByteArray {
		t.Fatalf("knative/kafkasource.yaml ships key type %s; payload mode needs byte-array", cfg.KeyType)
	}
	// A forwarded CloudEvent record keeps its own source: the topic comes from ceOverrides.
	cfg.CEOverrides = map[string]string{"mm2gotopic": tp}
	dOrd := dispatcher.New(t, cfg)
	cfgU := shippedDelivery(t, c.Source.Bootstrap, []string{tu}, sink)
	cfgU.Unordered = true
	dUn := dispatcher.New(t, cfgU)
	dispatcher.StartAll(t, dOrd, dUn)
	settle := func() {
		dOrd.WaitCommitted(tp, endOffsets(t, c.Source.Bootstrap, tp), 2*time.Minute)
		dUn.WaitCommitted(tu, endOffsets(t, c.Source.Bootstrap, tu), 2*time.Minute)
	}

	// Seeds: no stored position yet, so each partition's first event is fetched (exact).
	var want, wantU []*kgo.Record
	seeds := []*kgo.Record{{Topic: tp, Partition: 0, Value: []byte("seed0")}, {Topic: tp, Partition: 1, Value: []byte("seed1")}}
	seedsU := []*kgo.Record{{Topic: tu, Partition: 0, Value: []byte("seed0")}, {Topic: tu, Partition: 1, Value: []byte("seed1")}}
	testkit.Produce(t, c.Source.Bootstrap, append(seeds, seedsU...)...)
	want, wantU = append(want, seeds...), append(wantU, seedsU...)
	settle()

	// Sendable records: written from the events, with the documented losses.
	mapped := []*kgo.Record{
		{Topic: tp, Partition: 0, Key: []byte{0, 1, 2, 0xff}, Value: []byte(`{"a":1}`), Timestamp: time.UnixMilli(1_700_000_000_123),
			Headers: []kgo.RecordHeader{{Key: "Content-Type", Value: []byte("Application/JSON")}, {Key: "X-Trace_ID", Value: []byte("abc")},
				{Key: "x.trace.id", Value: []byte("wins")}, {Key: "utf8", Value: []byte("héllo wörld %41")}, {Key: "euro", Value: []byte("5 €")},
				{Key: "bad", Value: []byte{'a', 0xff, 'b'}}, {Key: "pad", Value: []byte("  padded ")}, {Key: "", Value: []byte("no name")}}},
		{Topic: tp, Partition: 1, Key: []byte{}, Value: nil},
		{Topic: tp, Partition: 1, Value: []byte{}},
	}
	mapped = append(mapped, cleanRecords(tp, 2, 20, "p")...)
	testkit.Produce(t, c.Source.Bootstrap, mapped...)
	for _, r := range mapped {
		want = append(want, payloadExpectation(r))
	}
	var unordered []*kgo.Record
	for round := 0; round < 5; round++ {
		for i := 0; i < 40; i++ {
			unordered = append(unordered, &kgo.Record{Topic: tu, Partition: int32(i % 2), Key: []byte{byte(i)}, Value: []byte(fmt.Sprintf("r%d-%d", round, i))})
		}
		testkit.Produce(t, c.Source.Bootstrap, unordered[len(unordered)-40:]...)
	}
	wantU = append(wantU, unordered...)
	settle()

	// A CloudEvent record: the event lacks its key and non-ce_ headers, so it is fetched (exact).
	ce := &kgo.Record{Topic: tp, Partition: 0, Key: []byte("ce-key"), Value: []byte(`{"n":1}`), Timestamp: time.UnixMilli(1_700_000_000_000), Headers: []kgo.RecordHeader{
		{Key: "ce_specversion", Value: []byte("1.0")}, {Key: "ce_id", Value: []byte("order-1")}, {Key: "ce_source", Value: []byte("/shop")},
		{Key: "ce_type", Value: []byte("order.created")}, {Key: "content-type", Value: []byte("application/json")}, {Key: "not-ce", Value: []byte{0, 1}}}}
	testkit.Produce(t, c.Source.Bootstrap, ce)
	want = append(want, ce)
	settle()

	// Records the dispatcher cannot send, and a poll it drops: gaps, fetched by the next event.
	h := hardRecords(tp)
	hard := []*kgo.Record{h[0], {Topic: tp, Partition: 0, Value: []byte("after-crlf")}, h[1], {Topic: tp, Partition: 1, Value: []byte("after-bin")},
		nullHeaderRecord(tp, 1), {Topic: tp, Partition: 1, Value: []byte("after-nullhdr")}}
	testkit.Produce(t, c.Source.Bootstrap, hard...)
	want = append(want, hard...)
	settle()
	tails := tailRecords(tp, 2, "tail")
	testkit.Produce(t, c.Source.Bootstrap, tails...)
	want = append(want, tails...)

	waitTargetCount(t, c.Target.Bootstrap, "source."+tp, int64(len(want)), 2*time.Minute)
	waitTargetCount(t, c.Target.Bootstrap, "source."+tu, int64(len(wantU)), 2*time.Minute)
	got := testkit.ReadAll(t, c.Target.Bootstrap, "source."+tp)
	for _, r := range got { // records produced without a timestamp get the producer's
		for _, w := range want {
			if w.Timestamp.IsZero() && string(w.Value) == string(r.Value) && w.Partition == r.Partition {
				w.Timestamp = r.Timestamp
			}
		}
	}
	testkit.AssertSameRecords(t, want, got)
	gotU := testkit.ReadAll(t, c.Target.Bootstrap, "source."+tu)
	for _, r := range gotU {
		for _, w := range wantU {
			if string(w.Value) == string(r.Value) && w.Partition == r.Partition {
				w.Timestamp = r.Timestamp
			}
		}
	}
	testkit.AssertSameRecords(t, wantU, gotU)
}

// kafkaSourceSubject is the OIDC subject of the shipped KafkaSource (knative/kafkasource.yaml).
const kafkaSourceSubject = "system:serviceaccount:mm2go:mm2go-mirror-oidc-sources.knative.dev-kafkasource"

// bearerProxy returns the URL of a proxy to target that adds Authorization: Bearer token to
// every request, as the dispatcher does when its sink has an audience. It forwards each request
// as it came, on its own connection: httputil.ReverseProxy would add Content-Length: 0 to a
// request without a body, which turns a null record value into an empty one.
func bearerProxy(t *testing.T, target, token string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer conn.Close()
		h := r.Header.Clone()
		h.Set("Authorization", "Bearer "+token)
		h.Set("Connection", "close")
		if len(r.TransferEncoding) > 0 { // a chunked body arrives whole: forward its length
			h.Set("Content-Length", strconv.Itoa(len(body)))
		}
		var req bytes.Buffer
		fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: %s\r\n", r.Method, r.URL.RequestURI(), u.Host)
		_ = h.Write(&req)
		req.WriteString("\r\n")
		req.Write(body)
		if _, err := conn.Write(req.Bytes()); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}
