package replay

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/mirrorevents"
	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/dispatcher"
)

// activator stands where Knative's activator stands for a Service scaled to zero: the first
// request starts the revision's pod (startPod: the process, probed with the Service's readiness
// probe as Knative probes it) and is held until the pod is ready; every request is then passed
// to the pod. scaleToZero stops the pod as Knative does for an idle Service, and the next
// request starts a new one. It records the record events the dispatcher sent.
type activator struct {
	t   *testing.T
	bin string
	svc Service
	env map[string]string

	podMu  sync.Mutex // held while a pod starts or stops: requests wait for it
	pod    *pod       // nil: scaled to zero
	proxy  *httputil.ReverseProxy
	podErr error // the last start's failure
	cold   *pod  // the first pod
	starts int

	mu         sync.Mutex
	atZero     bool // scaled to zero
	zeroEvents int  // record events that arrived once scaled to zero
	firstEvent time.Time
	events     int
	statuses   map[int]int
	inFlight   map[string]int // per partition (ce-knativekafkapartition)
	maxFlight  map[string]int
	offsets    map[string][]string // per partition, the offsets of the events, in arrival order
	firstByPar map[string]time.Time
}

func (a *activator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	par, off := r.Header.Get("ce-knativekafkapartition"), r.Header.Get("ce-knativekafkaoffset")
	record := r.Header.Get("ce-type") == mirrorevents.TypeKafkaEvent
	if record {
		a.mu.Lock()
		if a.firstEvent.IsZero() {
			a.firstEvent = time.Now()
		}
		if _, ok := a.firstByPar[par]; !ok {
			a.firstByPar[par] = time.Now()
		}
		a.events++
		if a.atZero {
			a.zeroEvents++
		}
		a.inFlight[par]++
		a.maxFlight[par] = max(a.maxFlight[par], a.inFlight[par])
		a.offsets[par] = append(a.offsets[par], off)
		a.mu.Unlock()
		defer func() {
			a.mu.Lock()
			a.inFlight[par]--
			a.mu.Unlock()
		}()
	}
	proxy, err := a.running()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
	proxy.ServeHTTP(rec, r)
	if record {
		a.mu.Lock()
		a.statuses[rec.code]++
		a.mu.Unlock()
	}
}

// running returns the proxy to the running pod, starting one if the Service is at zero (a
// cold start: the request waits until the pod is ready, as do the requests behind it).
func (a *activator) running() (*httputil.ReverseProxy, error) {
	a.podMu.Lock()
	defer a.podMu.Unlock()
	if a.pod == nil {
		p, err := startPodErr(a.t, a.bin, a.svc, a.env)
		if err != nil {
			a.podErr = err
			return nil, err
		}
		u, _ := url.Parse(p.base)
		a.pod, a.proxy = p, httputil.NewSingleHostReverseProxy(u)
		a.starts++
		if a.cold == nil {
			a.cold = p
		}
	}
	return a.proxy, nil
}

// scaleToZero stops the running pod as Knative does when a Service has been idle: SIGTERM,
// and the process finishes its in-flight work and exits. It fails the test unless the process
// exited 0. The next request starts a new pod.
func (a *activator) scaleToZero(t *testing.T) {
	t.Helper()
	a.podMu.Lock()
	defer a.podMu.Unlock()
	if a.pod == nil {
		return
	}
	if err := a.pod.stop(); err != nil {
		t.Errorf("%s: scaling to zero, the pod's process: %v, want exit 0", a.svc.Name, err)
	}
	a.pod, a.proxy = nil, nil
	a.mu.Lock()
	a.atZero = true
	a.mu.Unlock()
}

// eventsAtZero returns how many record events arrived once scaleToZero had stopped the pod.
func (a *activator) eventsAtZero() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.zeroEvents
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

// contract turns a derived KafkaSource into the genuine dispatcher's configuration, as
// Knative's control plane writes the contract: its delivery, ordering and key type, its
// consumer group (made unique to the run), the sink's address and the dead-letter sink's.
func (ks KafkaSource) contract(bootstrap, topic, sink, deadLetter, sfx string) dispatcher.Config {
	cfg := dispatcher.Config{Bootstrap: bootstrap, Topics: []string{topic}, Sink: sink, Name: ks.Name + "-" + sfx,
		Group: ks.ConsumerGroup + "-" + sfx, Namespace: "mm2go", Unordered: !ks.Ordered, KeyType: ks.KeyType,
		Retry: ks.Retry, LinearBackoff: !ks.Exponential, BackoffDelay: ks.BackoffDelay, Timeout: ks.Timeout, DeadLetter: deadLetter}
	if cfg.Retry == 0 {
		cfg.Retry = dispatcher.NoRetries
	}
	return cfg
}

// kafkaSourceReplay replays a rendered Knative shape's KafkaSource through the genuine
// dispatcher into the mirror Service, which starts cold on the first event: a backlog produced
// before the source is applied (initialOffset decides whether it is sent), live records with a
// binary key, then a record whose header value HTTP forbids as the last of its partition, which
// the dispatcher cannot send and which the burst PingSource's tick must copy.
func kafkaSourceReplay(t *testing.T, shape string, objs []map[string]any, secretFile string) {
	if testing.Short() {
		t.Skip("-short: the replay builds the functions and needs the brokers")
	}
	c := testkit.Require(t)
	svcs, pings, err := KnativeServices(objs, secretFile)
	if err != nil {
		t.Fatal(err)
	}
	sources, err := KafkaSources(objs)
	if err != nil {
		t.Fatal(err)
	}
	if len(sources) != 1 {
		t.Fatalf("%s: %d KafkaSources, want 1", shape, len(sources))
	}
	ks := sources[0]
	var svc Service
	for _, s := range svcs {
		if s.Name == ks.Sink {
			svc = s
		}
	}
	if svc.Name == "" || svc.Function != "mirror" || len(svc.Args) == 0 || svc.Args[0] != "serve" {
		t.Fatalf("%s: KafkaSource %s sinks to %q, which is not a mirror Service running serve (%+v)", shape, ks.Name, ks.Sink, svc)
	}
	burst := ""
	for _, p := range pings {
		if p.Sink == svc.Name {
			burst = p.Name
		}
	}
	if burst == "" {
		t.Fatalf("%s: no PingSource wakes %s for its scheduled burst", shape, svc.Name)
	}
	// The tokens the source sends carry the Service's own audience (ignored while Eventing's
	// authentication-oidc feature is off, which the dispatcher here has).
	if want := orDefault(svc.Env["MM2_SERVE_OIDC_AUDIENCE"], svc.Name); ks.Audience != want {
		t.Errorf("%s: KafkaSource %s audience %q, want the sink's own %q", shape, ks.Name, ks.Audience, want)
	}

	bin := functionBinaries(t)
	sfx := suffix(t)
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, ks.Topics[0]), 4, nil)
	env := localize(t, svc.Env, c, topic, sfx)
	remote := env["MM2_SOURCE_ALIAS"] + "." + topic
	srcCl := testkit.Client(t, c.Source.Bootstrap, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := testkit.Context(t, 4*time.Minute)
	adm := kadm.NewClient(srcCl)

	// Before the source is applied: a backlog.
	const backlog = 2000
	produce(t, srcCl, topic, 0, backlog)
	expected := map[string]bool{}
	for i := 0; i < backlog; i++ {
		expected[fmt.Sprintf("%08d", i)] = true
	}
	act := &activator{t: t, bin: bin, svc: svc, env: env, statuses: map[int]int{}, inFlight: map[string]int{},
		maxFlight: map[string]int{}, offsets: map[string][]string{}, firstByPar: map[string]time.Time{}}
	front := &http.Server{Handler: act}
	ln := listen(t)
	go func() { _ = front.Serve(ln) }()
	t.Cleanup(func() { _ = front.Close() })
	dls := dispatcher.NewSink(t, nil)
	dlsURL := ""
	if ks.DeadLetter != "" {
		dlsURL = dls.URL
	}
	cfg := ks.contract(c.Source.Bootstrap, topic, "http://"+ln.Addr().String()+"/", dlsURL, sfx)
	// The control plane's part (it cannot run here): with initialOffset latest it commits the end
	// offsets for the new group before the source turns ready.
	backlogEnds, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if ks.InitialOffset == "latest" {
		if err := adm.CommitAllOffsets(ctx, cfg.Group, backlogEnds.Offsets()); err != nil {
			t.Fatalf("committing the end offsets for %s: %v", cfg.Group, err)
		}
	}
	d := dispatcher.Start(t, cfg)

	// Live records: the trigger. The first record on the target after it is the cold start as
	// the platform does it: the dispatcher's poll, the activator starting the pod, readiness,
	// the first event's copy.
	first := make(chan time.Time, 1)
	// Metadata refreshed every 10 ms: the remote topic does not exist until the first copy, and
	// with franz-go's default (5 s) the unknown topic's metadata would be read again only then.
	tgtAdm := kadm.NewClient(testkit.Client(t, c.Target.Bootstrap, kgo.MetadataMinAge(10*time.Millisecond)))
	go func() {
		for ctx.Err() == nil {
			if ends, err := tgtAdm.ListEndOffsets(ctx, remote); err == nil {
				var n int64
				ends.Each(func(o kadm.ListedOffset) { n += max(o.Offset, 0) })
				if n > 0 {
					first <- time.Now()
					return
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	trigger := time.Now()
	const live = 400
	binKey := []byte{0, 0xff, '\n', 0x7f} // sent as base64 under key type byte-array
	recs := []*kgo.Record{{Topic: topic, Partition: 0, Key: binKey, Value: []byte("binary key")}}
	expected[string(binKey)] = true
	if err := srcCl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for i := backlog; i < backlog+live; i += 50 {
		produce(t, srcCl, topic, i, 50)
		time.Sleep(20 * time.Millisecond)
	}
	for i := backlog; i < backlog+live; i++ {
		expected[fmt.Sprintf("%08d", i)] = true
	}
	var firstRecord time.Time
	select {
	case firstRecord = <-first:
	case <-ctx.Done():
		t.Fatalf("%s: no record reached the target after the first event (pod: %v)", shape, act.podErr)
	}
	// The target holds every record so far (the events' copies).
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	endMap := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { endMap[o.Partition] = o.Offset })
	waitKeys(t, c.Target.Bootstrap, remote, expected, time.Minute)
	// Every event answered: the group's committed offsets reach the ends. The target can hold
	// every record well before that: each event starts a catch-up copy of what the source
	// gained since the last copy (mirrorevents' FollowEvents), so a dispatcher that lags sends
	// events for records already on the target.
	d.WaitCommitted(topic, endMap, 2*time.Minute)
	// Idle, the Service scales to zero. A running pod would copy the record produced next
	// through the catch-up copy of any later event; with none running, only the burst can.
	act.scaleToZero(t)

	// The last record of partition 3 carries a header value with CR LF: the dispatcher cannot
	// build the request, retries, gives up and commits past it. No event copies it.
	bad := &kgo.Record{Topic: topic, Partition: 3, Key: []byte("unsendable"), Value: []byte("header value with CR LF"),
		Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("a\r\nb")}}}
	if err := srcCl.ProduceSync(ctx, bad).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Every event answered or given up: the group's committed offsets reach the ends.
	endMap[3] = bad.Offset + 1
	gaveUp := time.Now()
	d.WaitCommitted(topic, endMap, 2*time.Minute)
	gaveUpAfter := time.Since(gaveUp)
	if act.sent(3, bad.Offset) {
		t.Errorf("%s: the record with CR LF in a header value (partition 3 offset %d) reached the Service as an event", shape, bad.Offset)
	}
	if n := act.eventsAtZero(); n > 0 {
		t.Errorf("%s: %d record events arrived after the dispatcher had committed past every event and the Service had scaled to zero", shape, n)
	}
	if keys := readKeys(t, c.Target.Bootstrap, remote); keys["unsendable"] > 0 {
		t.Errorf("%s: the unsendable record is on the target before the burst, with no pod running: the test shows nothing", shape)
	}
	// The scheduled burst: the PingSource's tick starts the Service cold, and its burst copies
	// the record.
	if code, body := pingAt(t, "http://"+ln.Addr().String(), burst); code/100 != 2 {
		t.Fatalf("%s: burst tick: %d %s", shape, code, body)
	}
	expected["unsendable"] = true
	got := readKeys(t, c.Target.Bootstrap, remote)
	missing, dups, extra := 0, 0, 0
	for k := range expected {
		if got[k] == 0 {
			missing++
		}
	}
	for k, n := range got {
		dups += n - 1
		if !expected[k] {
			extra++
		}
	}
	if missing > 0 || extra > 0 {
		t.Errorf("%s: after the burst tick %d of %d records are missing on the target, %d unknown", shape, missing, len(expected), extra)
	}
	// No run was stopped and the mirror serves a partition with one copier at a time: the
	// at-least-once bound is 0 duplicates here.
	if dups > 0 {
		t.Errorf("%s: %d records copied twice: two copiers on one partition", shape, dups)
	}
	// Byte for byte, partition by partition in the source's order: keys (the binary one),
	// values, timestamps, headers (CR LF in the unsendable record's).
	testkit.AssertSameRecords(t, testkit.ReadAll(t, c.Source.Bootstrap, topic), testkit.ReadAll(t, c.Target.Bootstrap, remote))
	// Lag 0: the dispatcher's group is at the ends (WaitCommitted above) and so is the mirror.
	act.mu.Lock()
	defer act.mu.Unlock()
	for par, n := range act.maxFlight {
		if ks.Ordered && n > 1 {
			t.Errorf("%s: %d events of partition %s in flight at once under ordering: ordered", shape, n, par)
		}
	}
	// initialOffset latest: no event for a backlog record.
	sentBacklog := 0
	for par, offs := range act.offsets {
		var p int32
		fmt.Sscan(par, &p)
		be, _ := backlogEnds.Lookup(topic, p)
		for _, o := range offs {
			var n int64
			fmt.Sscan(o, &n)
			if n < be.Offset {
				sentBacklog++
			}
		}
	}
	if ks.InitialOffset == "latest" && sentBacklog > 0 {
		t.Errorf("%s: initialOffset latest, yet %d events for backlog records", shape, sentBacklog)
	}
	for code, n := range act.statuses {
		if code/100 != 2 {
			t.Errorf("%s: %d events answered %d", shape, n, code)
		}
	}
	var order []string
	for par, at := range act.firstByPar {
		order = append(order, fmt.Sprintf("p%s +%v", par, at.Sub(act.firstEvent).Round(time.Millisecond)))
	}
	t.Logf("%s: KafkaSource %s (group %s, initialOffset %s, ordered %v, key type %s, retry %d, backoff %v, dead letter %q) into %s:\n"+
		"  trigger to first record on the target %v: first event at the activator after %v, pod ready %v after process start (%d probes of %s, period %v), "+
		"first record %v after the first event; %d pod starts\n  %d events (%d backlog records sent), answers %v, first event per partition %s; "+
		"the unsendable record given up after %v, %d dead-lettered; %d records on the target, %d duplicates; dispatcher refusals logged: %d",
		shape, ks.Name, ks.ConsumerGroup, ks.InitialOffset, ks.Ordered, ks.KeyType, ks.Retry, ks.BackoffDelay, ks.DeadLetter, svc.Name,
		firstRecord.Sub(trigger).Round(time.Millisecond), act.firstEvent.Sub(trigger).Round(time.Millisecond), act.cold.ready.Round(time.Millisecond),
		act.cold.probes, svc.ReadinessPath, svc.ReadinessPeriod, firstRecord.Sub(act.firstEvent).Round(time.Millisecond), act.starts,
		act.events, sentBacklog, act.statuses, strings.Join(order, ", "), gaveUpAfter.Round(time.Millisecond), len(dls.Requests()),
		len(got), dups, strings.Count(d.Log(), "prohibited character")+strings.Count(d.Log(), "only ' ' and '\\t' are allowed"))
}

// sent reports whether an event for partition p at offset o arrived.
func (a *activator) sent(p int32, o int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, off := range a.offsets[fmt.Sprint(p)] {
		if off == fmt.Sprint(o) {
			return true
		}
	}
	return false
}

// readKeys counts the records of topic on the target by key.
func readKeys(t *testing.T, bootstrap, topic string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, r := range testkit.ReadAll(t, bootstrap, topic) {
		out[string(r.Key)]++
	}
	return out
}

// waitKeys waits until topic holds every key of want.
func waitKeys(t *testing.T, bootstrap, topic string, want map[string]bool, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		recs, err := testkit.ReadAllErr(ctx, bootstrap, topic)
		missing := len(want)
		if err == nil {
			seen := map[string]bool{}
			for _, r := range recs {
				if want[string(r.Key)] && !seen[string(r.Key)] {
					seen[string(r.Key)] = true
					missing--
				}
			}
		}
		if missing == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %d of %d records still missing after %v (%v)", topic, missing, len(want), timeout, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestReplayKnativeKafkaSource: knative/'s KafkaSource, through the genuine dispatcher, into the
// mirror Service started cold from its Service as Knative would.
func TestReplayKnativeKafkaSource(t *testing.T) {
	t.Parallel()
	objs, err := KustomizeBuild(RepoFile("knative"))
	if err != nil {
		t.Fatal(err)
	}
	kafkaSourceReplay(t, "knative", objs, RepoFile("knative", "secret.example.yaml"))
}
