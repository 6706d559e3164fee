package dispatcher_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/dispatcher"
)

// TestGenuineDispatcherEvent: the helper's dispatcher delivers a record to a sink as
// KafkaSource's binary-mode CloudEvent and commits its offset.
func TestGenuineDispatcherEvent(t *testing.T) {
	c := testkit.Require(t)
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "kd"), 1, nil)
	sink := dispatcher.NewSink(t, nil)
	d := dispatcher.Start(t, dispatcher.Config{Bootstrap: c.Source.Bootstrap, Topics: []string{topic}, Sink: sink.URL, Namespace: "mirror"})
	testkit.Produce(t, c.Source.Bootstrap, &kgo.Record{Topic: topic, Key: []byte("k1"), Value: []byte(`{"a":1}`),
		Headers: []kgo.RecordHeader{{Key: "X-Trace_Id", Value: []byte("abc 100%")}}})
	d.WaitCommitted(topic, map[int32]int64{0: 1}, time.Minute)
	reqs := sink.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	h := reqs[0].Header
	want := http.Header{
		"Ce-Id": {"partition:0/offset:0"}, "Ce-Source": {"/apis/v1/namespaces/mirror/kafkasources/" + d.Name + "#" + topic},
		"Ce-Type": {"dev.knative.kafka.event"}, "Ce-Key": {"k1"}, "Ce-Kafkaheaderxtraceid": {"abc 100%"},
		"Ce-Knativekafkapartition": {"0"}, "Ce-Knativekafkaoffset": {"0"},
	}
	for k, v := range want {
		if h.Get(k) != v[0] {
			t.Errorf("%s: %q, want %q", k, h.Get(k), v[0])
		}
	}
	if string(reqs[0].Body) != `{"a":1}` {
		t.Errorf("body %q", reqs[0].Body)
	}
}
