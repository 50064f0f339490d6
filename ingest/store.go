package ingest

import (
	"context"
	"hash/maphash"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/sizenames"
)

// Store is what the pipeline reads and writes: the events, dead letters and
// audit rows of [Store.Commit], the size-schema registry and the size names
// it resolves. The implementations are the Ingest stores of store/memstore
// and store/pgstore (DB.Ingest); store/storetest.Run holds the suite both
// pass. Every method is safe for concurrent use.
type Store interface {
	// SizeNames returns the size-name rows of one (cloud, resource_type).
	SizeNames(ctx context.Context, cloud, resourceType string) ([]sizenames.Row, error)

	// ResourceType returns the registry row of one (platform,
	// resource_type), or an error wrapping store.ErrNotFound.
	ResourceType(ctx context.Context, platform, resourceType string) (ResourceType, error)
	// ResourceTypes returns every registry row, ordered by platform then
	// resource_type.
	ResourceTypes(ctx context.Context) ([]ResourceType, error)
	// PutResourceType inserts or replaces one registry row and returns it as
	// stored (UpdatedAt set by the store, Version incremented).
	PutResourceType(ctx context.Context, rt ResourceType) (ResourceType, error)

	// Commit writes one batch in one transaction: each event unless one
	// with its (event_id, timestamp) is stored or comes earlier (a conflict
	// when that one names another resource, [event.Collides]: entry i of
	// b.Conflicts is written instead), the fold of the newly stored events
	// into the projection ([projection.FoldBatch]), every dead letter and
	// audit row (stamped with the store's clock only when their time is
	// zero; IDs assigned by the store), and, when set, the replacement of a
	// cloud's size names (b.SizeNames, before the events) and the record of
	// a sync run (b.SyncRun). On any error nothing is written.
	Commit(ctx context.Context, b Batch) (Committed, error)

	// DeadLetters lists the dead letters q selects, oldest first by
	// (ReceivedAt, ID).
	DeadLetters(ctx context.Context, q DeadLetterQuery) ([]DeadLetter, error)
	// Audit lists the audit rows q selects, oldest first by (At, ID).
	Audit(ctx context.Context, q AuditQuery) ([]AuditEntry, error)
	// Events lists the stored events q selects with when each was
	// received, each event as [projection.Store.History] returns it.
	Events(ctx context.Context, q EventQuery) ([]StoredEvent, error)
	// Feed reads the lifecycle feed ([FeedRead]): every event Commit
	// stored, once, in one order that is the same for every reader (the
	// events of one Commit together, oldest first: by timestamp to the
	// microsecond, then event_id; [FeedEvent.Late] against what was stored
	// before that Commit), and only up to a point before which no event can still appear (a
	// transaction that took an earlier position and commits later is
	// waited for, never skipped). A position it never gave is an error
	// wrapping [ErrFeedPosition]. The items are read-only: the feed keeps
	// recent ones in memory and hands the same bytes to every reader, so a
	// store may return its own copy of an event's payload.
	Feed(ctx context.Context, q FeedRead) (FeedBatch, error)
}

// Committed is what [Store.Commit] reports.
type Committed struct {
	// Inserted is parallel to Batch.Events: true when the event was newly
	// stored.
	Inserted []bool
	// Conflicted, nil when no event conflicts, is parallel to Batch.Events:
	// true when the event was not stored because its (event_id, timestamp)
	// names another resource ([event.Collides]).
	Conflicted []bool
	// Expired, nil when no event is, is parallel to Batch.Events: true
	// when the event was not stored because its timestamp is before the
	// store's retention horizon (Horizon); the store wrote the dead letter
	// of the event's entry of Batch.Conflicts with the reason
	// [RetentionReason] of Horizon instead, and no audit row. Only a store
	// with retention sets it.
	Expired []bool
	// Horizon is the retention horizon Expired was judged by; zero when
	// Expired is nil.
	Horizon time.Time
	// Replays counts, by cloud, the late events that made a resource replay
	// its history in the projection (tally_projection_replays_total).
	Replays map[string]int
	// SyncRunID is the ID the store gave Batch.SyncRun; 0 without one.
	SyncRunID int64
}

// Batch is what one ingest call writes.
type Batch struct {
	// Events are the surviving items, with duplicates within the batch
	// already removed, in index order, each with its stored Source set.
	Events []event.Event
	// DeadLetters are the refused items, except scope refusals.
	DeadLetters []DeadLetter
	// Audit holds the scope violations of the batch.
	Audit []AuditEntry
	// Conflicts, when not nil, is parallel to Events: what Commit writes
	// instead of an event that conflicts (docs/decisions.md, Same
	// (event_id, timestamp) stored for another resource). A store copies
	// the Raw bytes it keeps.
	Conflicts []Conflict
	// SizeNames, when not nil, replaces every size-name row of its Cloud by
	// its Rows in the same transaction, before the events are written (a
	// reconciliation run's list; only [Service.Sync] sets it).
	SizeNames *SizeNameSet
	// SyncRun, when not nil, gives the sync run to record in the same
	// transaction. The store calls it once, after it has judged every
	// event, with the Committed it is about to return (Inserted and, when
	// any, Conflicted, Expired and Horizon; SyncRunID still 0), records
	// what it returns (nothing for nil) and assigns the run's ID
	// (Committed.SyncRunID). Only [Service.Sync] sets it.
	SyncRun func(Committed) *SyncRun
	// checked is set by the pipeline that built the batch ([Batch.Checked]),
	// with sums, parallel to Events: payloadSum of each event's payload as
	// the pipeline checked it.
	checked bool
	sums    []uint64
}

// Checked reports whether every event of b came from [event.Decode]
// through this package's pipeline ([Service.Ingest], [Service.Sync]) with
// its payload's raw members (size, provider, the unknown members) as the
// pipeline checked them: each one valid JSON and the unknown members
// naming no member of the envelope. A store may then write the payloads
// without checking them again, as [event.PayloadEnvelope.MarshalJSON]
// does (the performance rules). It is false for a batch built by other
// code, which cannot set it, and for a batch of the pipeline whose
// events' payloads were changed since (by a Store between the pipeline and
// the store that rewrites what it forwards): each payload's sum is
// checked again (payloadSum, about 25 ns a payload, as when the pipeline
// admitted it), not the members' JSON. Dropping events keeps the mark.
func (b Batch) Checked() bool {
	if !b.checked {
		return false
	}
	// The events in order, each with the sum of one of the pipeline's in
	// order: a store that drops events (retention's expired ones) keeps
	// the mark.
	j := 0
	for i := range b.Events {
		sum := payloadSum(&b.Events[i].Payload)
		for j < len(b.sums) && b.sums[j] != sum {
			j++
		}
		if j == len(b.sums) {
			return false
		}
		j++
	}
	return true
}

// sumSeed seeds payloadSum for the process.
var sumSeed = maphash.MakeSeed()

// payloadSum is a hash of every part of p that the payload's JSON is
// written from: the state (absent, null or its string) and the bytes of
// size, provider and the unknown members, each hashed on its own and
// mixed in by its place (nil apart from empty).
func payloadSum(p *event.PayloadEnvelope) uint64 {
	const k = 0x9e3779b97f4a7c15
	sum := uint64(0)
	mix := func(h uint64, isNil bool) {
		if isNil {
			h = ^h
		}
		sum = (sum^h)*k + 1
	}
	switch {
	case p.State.IsZero():
		mix(1, false)
	case p.State.Missing():
		mix(2, false)
	default:
		mix(maphash.String(sumSeed, p.State.String()), false)
	}
	mix(maphash.Bytes(sumSeed, p.Size), p.Size == nil)
	mix(maphash.Bytes(sumSeed, p.Provider), p.Provider == nil)
	mix(maphash.Bytes(sumSeed, p.Unknown), p.Unknown == nil)
	return sum
}

// Conflict is what [Store.Commit] writes for an event of a [Batch] that
// collides with a stored one: a dead letter (reason "conflict: …") and an
// audit row of action [ActionConflict].
type Conflict struct {
	DeadLetter DeadLetter
	Audit      AuditEntry
}

// ResourceType is one row of the size-schema registry (canonical-event.md,
// Size schemas): the JSON Schema that payload.size of a (Platform,
// ResourceType) event must satisfy.
type ResourceType struct {
	Platform     string `json:"platform"`
	ResourceType string `json:"resource_type"`
	// SizeSchema is the JSON Schema document, as exact JSON.
	SizeSchema jsontext.Value `json:"size_schema"`
	// Version starts at 1 and grows by one on every put; the registry's
	// compiled-schema cache is keyed by it.
	Version int64 `json:"version"`
	// UpdatedAt is when the row was last put, UTC.
	UpdatedAt time.Time `json:"updated_at"`
}

// DeadLetter is a refused item kept with the reason it was refused
// (canonical-event.md, Delivery).
type DeadLetter struct {
	// ID is assigned by the store, increasing.
	ID int64 `json:"id"`
	// UUID is assigned by the store, random (RFC 9562 version 4, lower
	// case): the id GET /api/v1/rejected-events serves, as Tally's dead
	// letters have one.
	UUID string `json:"uuid"`
	// Raw is the item exactly as it arrived, up to MaxDeadLetterBytes; nil
	// when the item was larger (then only RawSize is kept).
	Raw []byte `json:"-"`
	// RawSize is the item's size in bytes.
	RawSize int `json:"raw_size"`
	// Reason is "schema: …" or "size_schema: …".
	Reason string `json:"reason"`
	// EventID is the event_id the item carried, "" when none could be read.
	EventID string `json:"event_id"`
	// ReceivedAt is when the batch was received, UTC, microseconds.
	ReceivedAt time.Time `json:"received_at"`
}

// AuditEntry is one row of the audit log.
type AuditEntry struct {
	// ID is assigned by the store, increasing.
	ID int64 `json:"id"`
	// At is when the row was written, UTC, microseconds.
	At time.Time `json:"at"`
	// Action names what happened, such as "events.scope_violation".
	Action string `json:"action"`
	// Credential names the credential of the call.
	Credential string `json:"credential"`
	// EventID, Platform and Cloud are the item's, for a scope violation.
	EventID  string `json:"event_id,omitempty"`
	Platform string `json:"platform,omitempty"`
	Cloud    string `json:"cloud,omitempty"`
}

// Position is a place in a listing ordered by (time, ID): the listing
// continues strictly after it.
type Position struct {
	At time.Time
	ID int64
}

// DeadLetterQuery selects dead letters. A zero From or To leaves that end
// open. A positive Limit caps the rows returned (the Service asks for one
// more than its page, so up to 1001); 0 means no cap.
type DeadLetterQuery struct {
	From, To time.Time
	After    *Position
	Limit    int
	// MaxBytes, when positive, lets the store stop reading once the items
	// it holds (at least two) total more; the Service passes [MaxPageBytes].
	MaxBytes int
}

// AuditQuery selects audit rows. A zero From or To leaves that end open.
// A positive Limit caps the rows returned (up to 1001 from the Service); 0
// means no cap.
type AuditQuery struct {
	Action   string
	From, To time.Time
	After    *Position
	Limit    int
	// MaxBytes, when positive, lets the store stop reading once the items
	// it holds (at least two) total more; the Service passes [MaxPageBytes].
	MaxBytes int
}

// StoredEvent is one event as the events table holds it: the event as
// stored, and when the store received it (Tally's Reporting API
// StoredEvent, GET /api/v1/events and a resource's /events).
type StoredEvent struct {
	Event event.Event
	// ReceivedAt is when the batch that stored the event was committed,
	// UTC, microseconds.
	ReceivedAt time.Time
}

// EventPosition is a place in the listing of stored events, ordered by
// (timestamp, event_id): the listing continues strictly after it.
type EventPosition struct {
	Timestamp time.Time
	EventID   string
}

// EventQuery selects stored events. Empty strings match everything; From
// and To bound the event timestamp to [From, To), a zero end left open.
// Rows come ordered by (timestamp, event_id), strictly after After when
// set; a positive Limit caps them (the Service asks for one more than its
// page), 0 means no cap.
type EventQuery struct {
	Cloud, Platform, ProjectID, ResourceType, ResourceID, EventType string
	Source                                                          event.Source
	From, To                                                        time.Time
	After                                                           *EventPosition
	Limit                                                           int
	// MaxBytes, when positive, lets the store stop reading once the items
	// it holds (at least two) total more; the Service passes [MaxPageBytes].
	MaxBytes int
}
