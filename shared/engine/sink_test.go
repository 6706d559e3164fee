package engine

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRecordSinkStopsUnderBound: the record sink hands a partition's run to the producer while
// the in-flight bound has room, and when its context ends while it waits for room it returns
// the records it handed over (the copy counts them against MaxRecords) and errSinkStopped.
// Control records move the ledger's fetch mark only.
//
// The broker accepts connections and never answers, and the records are produced under a live
// context: nothing can acknowledge or fail the first record while the second waits. (With a
// refused connection or a cancelled record context, the first record failed at once under load,
// freed its room, and the second was handed over too: CI at 80ce6c8 beside two busy loops.)
func TestRecordSinkStopsUnderBound(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn // open, unread: every request waits
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	cl, err := kgo.NewClient(kgo.SeedBrokers(ln.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	e := &Engine{core: core{opts: Options{MaxBufferedBytes: 100, OffsetLagMax: 100}}}
	w := &work{tp: TP{"topic", 0}, remote: "src.topic", end: 10, initPos: -2}
	c := newCopier(&e.core, BurstOptions{}, []*work{w}, readyTopic(25), disabledEmitter())
	ctx, cancel := context.WithCancel(context.Background())
	c.prod, c.writeCtx, c.wide = cl, ctx, true // wide: the bound is the budget at once
	st := c.states[0]
	st.ctx = context.Background() // the records' context: alive, so none fails on its own
	var s sink = recordSink{c}
	recs := []*kgo.Record{
		{Topic: "topic", Value: make([]byte, 64), Offset: 0},
		{Topic: "topic", Value: make([]byte, 64), Offset: 1},
	}
	cancel() // nothing acknowledges: the second record would wait for room for ever
	n, err := s.write(ctx, st, sinkInput{recs: recs})
	if n != 1 || !errors.Is(err, errSinkStopped) {
		t.Fatalf("write: %d records handed over, %v; want 1 and errSinkStopped", n, err)
	}
	st.mu.Lock()
	inflight, seen := len(st.inflight)-st.head, st.lastSeen
	st.mu.Unlock()
	if inflight != 1 || seen != 0 {
		t.Fatalf("ledger: %d in flight, fetched up to %d; want 1 in flight, fetched up to 0", inflight, seen)
	}
}
