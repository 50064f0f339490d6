// Package tally is an embeddable Go library, with a thin reference server,
// for the two event contracts that operators of clouds and platforms live
// on: canonical lifecycle events and correlated events.
//
// This root package holds no code; it is the map of the library.
//
// # Canonical lifecycle events (docs/spec/canonical-event.md)
//
//   - [github.com/tallyhq/tally/event] is the leaf every package reads: the
//     ten-member Event, strict decoding, validation that reports every broken
//     rule at once, categorization from event_type alone, and the
//     deterministic event id. No I/O.
//   - [github.com/tallyhq/tally/sizenames] replaces provider ids in
//     payload.size by names (payload.provider.size_as_reported keeps what
//     arrived).
//   - [github.com/tallyhq/tally/ingest] is the pipeline: a batch of at most
//     1000 raw items goes in; each item is accepted, a duplicate by
//     (event_id, timestamp), or refused with a reason and dead-lettered
//     (scope violations are audited instead); the batch lands whole or not
//     at all. It also holds the size-schema registry and, with the
//     projection, the current resources derived from the events.
//   - [github.com/tallyhq/tally/ingest/reconcile] is the server-side sync
//     run: an observation of one cloud is compared with the projection, and
//     the drift goes through the pipeline as sync.create, sync.update and
//     sync.delete events, with the cloud's size names, in one transaction.
//
// # Correlated events (docs/spec/event-correlation.md)
//
//   - [github.com/tallyhq/tally/correlate] is the createEvent state machine:
//     occurrences count on one open event per (organization, user,
//     correlationKey), a resolution closes it, an idempotency key makes a
//     create safe to retry, and every answer has a Disposition.
//
// # Stores
//
// The pure packages above declare the small Store interfaces they need.
// [github.com/tallyhq/tally/store/memstore] (in memory, the embedded default)
// and [github.com/tallyhq/tally/store/pgstore] (PostgreSQL) implement them,
// and [github.com/tallyhq/tally/store/storetest] is the conformance suite
// both pass.
//
// # Server and examples
//
// cmd/tallyd wires the library into an HTTP server; the HTTP adapters live in
// importable packages so a program can mount them on its own mux. examples/
// holds runnable programs, among them an OpenStack collector fed with real
// oslo.messaging notifications.
package tally
