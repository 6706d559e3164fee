package kafkasource

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Config is a KafkaSource's spec as far as the driver needs it. Zero values mean KafkaSource's
// defaults.
type Config struct {
	// Bootstrap is the source cluster; Topics its topics (spec.topics); Group the consumer
	// group (spec.consumerGroup).
	Bootstrap string
	Topics    []string
	Group     string
	// Sink is the function's URL.
	Sink string
	// Source names the KafkaSource and sets key type and ceOverrides.
	Source Source
	// Unordered is spec.ordering: unordered (up to 50 requests in flight, any order) instead
	// of the default ordered (one in flight per partition).
	Unordered bool
	// Retry is delivery.retry, overriding the default of 10.
	Retry int
	// BackoffDelay is delivery.backoffDelay, overriding the default of 300ms.
	BackoffDelay time.Duration
	// LinearBackoff is delivery.backoffPolicy: linear (delay×n) instead of exponential
	// (delay×2^n).
	LinearBackoff bool
	// Timeout is delivery.timeout per request, overriding the default of 600s.
	Timeout time.Duration
	// DeadLetter receives an event that ran out of retries or got a non-retryable answer, with
	// KafkaSource's knativeerror* extensions. Nil is "no dead-letter sink": the record is
	// dropped. Either way the offset is committed, as KafkaSource does.
	DeadLetter func(ctx context.Context, e event.Event)
	// Client sends the requests; nil means a client with no overall timeout (Timeout applies
	// per request).
	Client *http.Client
	// Logger; nil discards.
	Logger *slog.Logger
}

// Stats counts what the driver did.
type Stats struct {
	Delivered    int64 // records answered 2xx
	Requests     int64 // HTTP requests sent, retries included
	Retries      int64
	DeadLettered int64
	Status       map[int]int64 // answers by status code; 0 = transport error
}

// Driver is a running imitation of KafkaSource's dispatcher.
type Driver struct {
	cfg Config
	cl  *kgo.Client
	log *slog.Logger

	mu    sync.Mutex
	stats Stats
	dead  []event.Event
}

// New validates cfg and connects the consumer (nothing is consumed before Run).
func New(cfg Config) (*Driver, error) {
	if cfg.Bootstrap == "" || len(cfg.Topics) == 0 || cfg.Group == "" || cfg.Sink == "" {
		return nil, errors.New("kafkasource: bootstrap, topics, group and sink are required")
	}
	if cfg.Retry == 0 {
		cfg.Retry = 10
	}
	if cfg.BackoffDelay <= 0 {
		cfg.BackoffDelay = 300 * time.Millisecond
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 600 * time.Second
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 100, IdleConnTimeout: 10 * time.Second}}
	}
	if cfg.Source.Namespace == "" {
		cfg.Source.Namespace = "default"
	}
	if cfg.Source.Name == "" {
		cfg.Source.Name = cfg.Group
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// The source data plane's consumer settings (triggers.md §1.1).
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(cfg.Bootstrap),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topics...),
		kgo.DisableAutoCommit(),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.Balancers(kgo.StickyBalancer()),
		kgo.SessionTimeout(10*time.Second),
		kgo.BlockRebalanceOnPoll(),
	)
	if err != nil {
		return nil, fmt.Errorf("kafkasource: consumer: %w", err)
	}
	return &Driver{cfg: cfg, cl: cl, log: logger, stats: Stats{Status: map[int]int64{}}}, nil
}

// Stats returns a copy of the counters.
func (d *Driver) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.stats
	s.Status = make(map[int]int64, len(d.stats.Status))
	for k, v := range d.stats.Status {
		s.Status[k] = v
	}
	return s
}

// DeadLettered returns the events that went to the dead letter so far.
func (d *Driver) DeadLettered() []event.Event {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]event.Event(nil), d.dead...)
}

// Run consumes and delivers until ctx ends, then commits what was delivered and leaves the
// group. It returns nil when stopped by ctx.
func (d *Driver) Run(ctx context.Context) error {
	defer d.cl.Close()
	for {
		fs := d.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			d.cl.AllowRebalance()
			return nil
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				ferr = fmt.Errorf("fetching %s[%d]: %w", t, p, err)
			}
		})
		if ferr != nil {
			d.log.Warn("kafkasource: fetch error", "err", ferr)
		}
		done := d.deliver(ctx, fs)
		if len(done) > 0 {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			if err := d.cl.CommitRecords(cctx, done...); err != nil {
				d.log.Warn("kafkasource: commit failed", "err", err)
			}
			cancel()
		}
		d.cl.AllowRebalance()
	}
}

// deliver sends a polled batch and returns, per partition, the last record whose offset may be
// committed (every record up to it answered or dead-lettered).
func (d *Driver) deliver(ctx context.Context, fs kgo.Fetches) []*kgo.Record {
	var mu sync.Mutex
	var done []*kgo.Record
	var wg sync.WaitGroup
	if !d.cfg.Unordered {
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				var last *kgo.Record
				for _, r := range p.Records {
					if !d.dispatch(ctx, r) {
						break
					}
					last = r
				}
				if last != nil {
					mu.Lock()
					done = append(done, last)
					mu.Unlock()
				}
			}()
		})
		wg.Wait()
		return done
	}
	// Unordered: up to max.poll.records (50) in flight; commit per partition up to the first
	// record not finished (the OffsetManager's lowest-not-done rule).
	sem := make(chan struct{}, 50)
	type res struct {
		r  *kgo.Record
		ok bool
	}
	var all []*res
	fs.EachRecord(func(r *kgo.Record) {
		x := &res{r: r}
		all = append(all, x)
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			x.ok = d.dispatch(ctx, r)
		}()
	})
	wg.Wait()
	last := map[string]map[int32]*kgo.Record{}
	stopped := map[string]map[int32]bool{}
	for _, x := range all {
		t, p := x.r.Topic, x.r.Partition
		if stopped[t] == nil {
			stopped[t], last[t] = map[int32]bool{}, map[int32]*kgo.Record{}
		}
		if stopped[t][p] {
			continue
		}
		if !x.ok {
			stopped[t][p] = true
			continue
		}
		last[t][p] = x.r
	}
	for _, ps := range last {
		for _, r := range ps {
			done = append(done, r)
		}
	}
	return done
}

// dispatch sends one record with retries; it returns false only if ctx ended first (the record
// is then neither delivered nor dead-lettered, and not committed).
func (d *Driver) dispatch(ctx context.Context, r *kgo.Record) bool {
	e := EventFor(d.cfg.Source, r)
	for attempt := 0; ; attempt++ {
		status, body, err := d.send(ctx, e)
		if ctx.Err() != nil {
			return false
		}
		d.mu.Lock()
		d.stats.Requests++
		d.stats.Status[status]++
		if attempt > 0 {
			d.stats.Retries++
		}
		d.mu.Unlock()
		if err == nil && status >= 200 && status < 300 {
			d.mu.Lock()
			d.stats.Delivered++
			d.mu.Unlock()
			return true
		}
		if !Retryable(status, err) || attempt >= d.cfg.Retry {
			d.deadLetter(ctx, e, status, body, err)
			return true
		}
		d.log.Debug("kafkasource: retrying", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset,
			"status", status, "err", err, "attempt", attempt+1)
		select {
		case <-time.After(d.backoff(attempt + 1)):
		case <-ctx.Done():
			return false
		}
	}
}

// Retryable is KafkaSource's rule: 5xx, 404, 408, 409, 429 and transport errors are retried;
// every other status >= 300 is final.
func Retryable(status int, err error) bool {
	if err != nil {
		return true
	}
	switch {
	case status >= 500, status == 404, status == 408, status == 409, status == 429:
		return true
	}
	return false
}

func (d *Driver) backoff(n int) time.Duration {
	if d.cfg.LinearBackoff {
		return d.cfg.BackoffDelay * time.Duration(n)
	}
	return d.cfg.BackoffDelay * time.Duration(1<<min(n, 20))
}

// send posts e in binary mode with the dispatcher's extra headers. status is 0 on a transport
// error.
func (d *Driver) send(ctx context.Context, e event.Event) (int, []byte, error) {
	rctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, d.cfg.Sink, nil)
	if err != nil {
		return 0, nil, err
	}
	if err := cehttp.WriteRequest(rctx, binding.ToMessage(&e), req); err != nil {
		return 0, nil, fmt.Errorf("encoding event: %w", err)
	}
	req.Header.Set("Prefer", "reply")
	req.Header.Set("Kn-Namespace", d.cfg.Source.Namespace)
	resp, err := d.cfg.Client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, body, nil
}

// deadLetter adds KafkaSource's error extensions and hands e to the dead-letter function.
func (d *Driver) deadLetter(ctx context.Context, e event.Event, status int, body []byte, err error) {
	dl := e.Clone()
	dl.SetExtension("knativeerrordest", d.cfg.Sink)
	dl.SetExtension("knativeerrorcode", strconv.Itoa(status))
	if len(body) > 0 {
		dl.SetExtension("knativeerrordata", base64.StdEncoding.EncodeToString(body))
	} else if err != nil {
		dl.SetExtension("knativeerrordata", base64.StdEncoding.EncodeToString([]byte(err.Error())))
	}
	d.mu.Lock()
	d.stats.DeadLettered++
	d.dead = append(d.dead, dl)
	d.mu.Unlock()
	d.log.Warn("kafkasource: dead-lettered", "id", e.ID(), "status", status, "err", err, "body", string(body))
	if d.cfg.DeadLetter != nil {
		d.cfg.DeadLetter(ctx, dl)
	}
}

// Committed returns the group's committed offsets for topic.
func Committed(ctx context.Context, bootstrap, group, topic string) (map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			out[o.Partition] = o.At
		}
	})
	return out, nil
}

// WaitDelivered polls until the driver's group has committed ends (partition → end offset) of
// topic, i.e. every record before them was answered 2xx or dead-lettered.
func WaitDelivered(ctx context.Context, bootstrap, group, topic string, ends map[int32]int64) error {
	for {
		got, err := Committed(ctx, bootstrap, group, topic)
		if err == nil {
			ok := true
			for p, end := range ends {
				if got[p] < end {
					ok = false
				}
			}
			if ok {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to commit %v on %s: committed %v: %w", group, ends, topic, got, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
