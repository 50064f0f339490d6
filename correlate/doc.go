// Package correlate records events that report occurrences of an ongoing
// condition, as the event correlation contract (event-correlation.md)
// specifies for Meshery's createEvent and getEvents.
//
// A producer names a condition with a correlationKey, such as
//
//	meshery-server/k8s-connection/5b0b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d/unreachable
//
// Repeated occurrences count on one open event instead of recording a row
// each, and a resolution (a create carrying resolvedAt) closes the event
// when the condition clears. An idempotencyKey makes any create safe to
// retry.
//
// The package holds the rules only. It declares the [Store] it needs;
// the Correlate store that github.com/tallyhq/tally/store/memstore's and
// store/pgstore's DB hands out (DB.Correlate) implements it, and
// correlate/correlatehttp serves it over HTTP. It never imports a database
// driver or net/http.
//
// # The state machine
//
// [Service.Create] resolves each create of a [Caller] in the spec's order
// (`createEvent` semantics) and answers the resulting [Event] with a
// [Disposition]:
//
//  1. Replay. A [Payload.IdempotencyKey] the caller already bound answers
//     the bound event as it is now, [Replayed]; nothing is recorded or
//     changed. This runs first, so a retry never counts twice.
//  2. Record as sent. A payload without correlationKey, or any payload of a
//     caller that identifies no user (Caller.User ""), records a new event
//     with the correlation fields exactly as sent: no defaults, no matching.
//     [Created].
//  3. Occurrence. A correlationKey without resolvedAt either counts on the
//     caller's open event of that key (occurrenceCount grows by the payload's
//     count, 1 when omitted; lastSeenAt becomes the later one; updatedAt
//     advances; every other field keeps its first value): [Incremented]; or
//     opens the condition with a new event (occurrenceCount 1, firstSeenAt
//     the payload's firstSeenAt, else its lastSeenAt, else the time of
//     receipt; lastSeenAt the payload's, else firstSeenAt): [Created].
//  4. Resolution. A correlationKey with resolvedAt either closes the open
//     event (resolvedAt set; severity and description taken from the payload
//     when it carries them; lastSeenAt the later one; the count unchanged):
//     [Resolved]; or records an already-resolved event (count the payload's,
//     else 1; firstSeenAt and lastSeenAt the payload's, else resolvedAt):
//     [Created].
//  5. Binding. The idempotencyKey is bound to the event step 2, 3 or 4
//     recorded, incremented or resolved, in the same atomic unit as the
//     effect.
//
// Once closed, the next occurrence opens a new event with a new
// firstSeenAt. The states of one condition are therefore:
//
//	(none) --occurrence--> open --occurrence--> open (count grows)
//	(none) --resolution--> resolved event (already resolved)
//	open   --resolution--> resolved; the next occurrence opens a new event
//
// # Scope and invariant
//
// Correlation and idempotency are scoped to the caller's organization and
// user, never to the client-settable owner. A caller has at most one open
// event per correlationKey; the store enforces it atomically (on PostgreSQL
// a partial unique index and a single-statement upsert), so concurrent first
// occurrences never open two events and no occurrence is lost. Two
// concurrent creates with one idempotencyKey have exactly one effect. Reads
// and writes ([Service.List], [Service.Get], [Service.SetStatus],
// [Service.Delete]) see only the events of the caller's organization and
// user, except that a caller with [Caller].AllUsers set (a reader of the
// organization) lists every event of its organization (docs/decisions.md, Who
// reads correlated events). A caller with no user never correlates.
//
// # The change feed
//
// Every create that records, counts or resolves an event, every status
// change and every delete appends one [Change] per event changed to the
// store's change log ([Store].Feed), atomically with the change; a replay
// appends none. [Service.Feed] reads it for a caller, scoped and filtered
// as [Service.List] is, through the Service's own feed (one tail reader per
// Service, internal/feed; correlatehttp also streams it as Server-Sent
// Events).
// Cursors are opaque strings, valid on every replica and across restarts.
//
// # Counting dispositions
//
// [Options].Observer is told the [Disposition] of every successful
// [Service.Create], so a program that embeds the library counts what the
// HTTP server counts (tallyd: tally_correlate_dispositions_total).
//
// # Status codes and Event-Disposition
//
// Every 2xx answer of createEvent carries the Event-Disposition header.
// [Service.StatusCode] gives the status: 201 for [Created], 200 otherwise,
// and 200 for a created legacy create (neither correlationKey nor
// idempotencyKey) when [Options].LegacyCreate200 is set.
//
// # Validation
//
// [DecodePayload] decodes strictly and, like [Payload.Validate], reports
// every problem at once in an [*event.ValidationError] (tally's one
// validation error) whose problems name the member by JSON Pointer and the
// rule by an event.Rule* constant; it matches [event.ErrInvalid]. A refused create records
// nothing and binds no key.
package correlate
