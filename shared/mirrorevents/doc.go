// Package mirrorevents is the mirror function's event handler for `mirror serve`: it turns
// Knative KafkaSource record events and burst triggers (PingSource, MM2_BURST_EVENT_TYPES) into
// copies by the replication engine, and answers with status codes that make KafkaSource's
// dispatcher retry what can succeed later and dead-letter what never can.
//
// Fetch mode (default) uses an event only as a trigger: the engine copies the event's partition
// from its stored position through at least the event's offset, with exact bytes read from the
// source. Concurrent events for one partition share one copy. Payload mode rebuilds the record
// from the event (lossy, see docs/events.md) and writes it when its offset is the partition's
// next one; gaps are fetched from the source.
//
// Either way a 2xx means the record, its offset sync and the stored position (MM2's Connect
// offsets topic) are durable on the target, so a redelivered event writes nothing twice.
package mirrorevents
