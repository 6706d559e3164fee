package engine

import "sync"

// durable is what this process knows to be durable on the target: per source partition, the
// next offset to copy, every record below it being on the target with its position stored. It
// is learned from positions this engine wrote and saw acknowledged, and from the stored
// positions its plans started from. Event-driven calls for offsets below it are answered at
// once, without a copy (KafkaSource sends an event per record; one copy covers thousands).
//
// It only ever grows for a partition, except through forget: a lower stored position written
// later by someone else (an operator resetting the flow) is not seen until the process
// restarts, which can only mean fewer copies, never a record skipped that was not copied.
type durable struct {
	mu   sync.Mutex
	next map[TP]int64
}

// get returns the next offset to copy of tp, if known.
func (d *durable) get(tp TP) (int64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.next[tp]
	return n, ok
}

// advance records that every offset of tp below next is durable.
func (d *durable) advance(tp TP, next int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.next == nil {
		d.next = map[TP]int64{}
	}
	if n, ok := d.next[tp]; !ok || next > n {
		d.next[tp] = next
	}
}

// forget drops what is known of tp (its source partition started over: the topic was
// recreated).
func (d *durable) forget(tp TP) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.next, tp)
}
