package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/mm2go/mm2go/test/testkit/kafkasource"
)

// runServe measures fetch mode: `mirror serve` on a free port, driven by the KafkaSource-like
// driver (ordered delivery, a consumer group of its own per workload, so a resumed workload's
// second run continues from the first's commits) over the same backlog. Times are from the
// serve process's start; done = every record on the target. With settle (a resumed workload's
// unmeasured first run) the driver is stopped only once it has committed every record, as a
// KafkaSource does before its function scales to zero, so the measured run starts after them.
func (h *harness) runServe(ctx context.Context, w workload, topics []string, settle bool) (contender, error) {
	const alias = "svsrc"
	port, err := freePort()
	if err != nil {
		return contender{}, err
	}
	cmd, logFile, remote, err := h.mm2goCmd(ctx, w, topics, alias, "svtgt", "serve", []string{"serve"},
		fmt.Sprintf("PORT=%d", port), "MM2_HEARTBEATS_REPLICATION_ENABLED=false")
	if err != nil {
		return contender{}, err
	}
	defer logFile.Close()

	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	group := "bench-serve-" + topics[0]
	dctx, stopDriver := context.WithCancel(ctx)
	defer stopDriver()
	driverDone := make(chan error, 1)
	go func() {
		// The dispatcher runs already when the function starts (it is always on in Knative):
		// it joins its group and fetches beside the function's start, and its first request
		// is held until the function is ready, as Knative's activator holds it.
		gate := &activator{ready: base + "/readyz", next: &http.Transport{MaxIdleConnsPerHost: 100, IdleConnTimeout: 10 * time.Second}}
		d, err := kafkasource.New(kafkasource.Config{Bootstrap: h.source, Topics: topics,
			Group: group, Sink: base + "/", Client: &http.Client{Transport: gate},
			Source: kafkasource.Source{Namespace: "bench", Name: "mirror"}})
		if err != nil {
			driverDone <- err
			return
		}
		driverDone <- d.Run(dctx)
	}()
	c, err := h.watch(ctx, cmd, remote, int64(w.totalRecords()), w.totalBytes(), func() {
		if settle {
			h.waitCommitted(ctx, group, topics)
		}
		stopDriver()
		<-driverDone
		_ = cmd.Process.Signal(syscall.SIGTERM)
	})
	return c, err
}

// freePort returns a TCP port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitCommitted waits (at most a minute) until the driver's group has committed the end of
// every source partition of topics.
func (h *harness) waitCommitted(ctx context.Context, group string, topics []string) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ends, err := h.srcAdm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return
	}
	for _, t := range topics {
		want := map[int32]int64{}
		ends.Each(func(o kadm.ListedOffset) {
			if o.Topic == t {
				want[o.Partition] = o.Offset
			}
		})
		_ = kafkasource.WaitDelivered(ctx, h.source, group, t, want)
	}
}

// activator holds requests until the function answers its readiness probe, then passes them
// on, as Knative's activator does for a revision scaled to zero.
type activator struct {
	ready string
	next  http.RoundTripper

	once sync.Once
}

func (a *activator) RoundTrip(req *http.Request) (*http.Response, error) {
	a.once.Do(func() {
		for req.Context().Err() == nil {
			probe, err := http.NewRequestWithContext(req.Context(), http.MethodGet, a.ready, nil)
			if err != nil {
				return
			}
			if resp, err := a.next.RoundTrip(probe); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	return a.next.RoundTrip(req)
}
