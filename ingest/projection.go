package ingest

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/event"
)

// ResourceKey identifies one row of the projection of current resources.
type ResourceKey struct {
	Cloud        string `json:"cloud"`
	ResourceType string `json:"resource_type"`
	ResourceID   string `json:"resource_id"`
}

// Key returns the key of the resource e concerns.
func Key(e *event.Event) ResourceKey {
	return ResourceKey{Cloud: e.Cloud, ResourceType: e.ResourceType, ResourceID: e.ResourceID}
}

// Resource is one row of the projection of current resources: what folding
// the resource's whole event history in [Compare] order gives
// (canonical-event.md, Event: "everything else is derived from it and
// rebuildable"). It is derived data: [Fold] over the stored events rebuilds
// it exactly.
type Resource struct {
	ResourceKey
	Platform  string `json:"platform"`
	ProjectID string `json:"project_id"`
	// State is the last state folded; "deleted" after a delete.
	State string `json:"state"`
	// Size is the last size folded, as exact JSON; nil when no event
	// carried one.
	Size jsontext.Value `json:"size"`
	// CreatedAt is the timestamp of the last create; nil when no create was
	// folded.
	CreatedAt *time.Time `json:"created_at"`
	// DeletedAt is the timestamp of the delete that ended the resource's
	// current life; nil while it is alive (a create clears it).
	DeletedAt     *time.Time `json:"deleted_at"`
	FirstEventAt  time.Time  `json:"first_event_at"`
	LastEventAt   time.Time  `json:"last_event_at"`
	LastEventType string     `json:"last_event_type"`
	LastEventID   string     `json:"last_event_id"`
}

// rank orders the categories of events with equal timestamps: a create
// before an update before a delete.
func rank(c event.Category) int {
	switch c {
	case event.CategoryCreate:
		return 0
	case event.CategoryUpdate:
		return 1
	default:
		return 2
	}
}

// Compare orders the events of one resource for the fold: by timestamp,
// then, for equal timestamps, create < update < delete (by [event.Categorize]
// of event_type), then by event_id. It returns -1, 0 or +1; 0 only for the
// same (timestamp, event_type category, event_id).
func Compare(a, b *event.Event) int {
	return comparePos(a.Timestamp, a.EventType, a.EventID, b.Timestamp, b.EventType, b.EventID)
}

func comparePos(at time.Time, atype, aid string, bt time.Time, btype, bid string) int {
	if c := at.Compare(bt); c != 0 {
		return c
	}
	if c := cmp.Compare(rank(event.Categorize(atype)), rank(event.Categorize(btype))); c != 0 {
		return c
	}
	return cmp.Compare(aid, bid)
}

// CompareKeyed orders events by resource key (cloud, resource_type,
// resource_id), then by [Compare]. Stores fold a batch in this order.
func CompareKeyed(a, b *event.Event) int {
	return cmp.Or(Key(a).Compare(Key(b)), Compare(a, b))
}

// Compare orders keys by cloud, then resource_type, then resource_id: the
// order listings of the projection use. It returns -1, 0 or +1.
func (k ResourceKey) Compare(o ResourceKey) int {
	return cmp.Or(cmp.Compare(k.Cloud, o.Cloud), cmp.Compare(k.ResourceType, o.ResourceType), cmp.Compare(k.ResourceID, o.ResourceID))
}

// After reports whether e sorts after the last event folded into r, in which
// case [Apply] folds it incrementally. When it does not (a late event), the
// resource's history must be replayed with [Fold].
func (r *Resource) After(e *event.Event) bool {
	return comparePos(e.Timestamp, e.EventType, e.EventID, r.LastEventAt, r.LastEventType, r.LastEventID) > 0
}

// Apply folds one event into r, which holds the fold of every earlier event
// of the same resource (the zero Resource before the first). The rules
// (canonical-event.md, Sources and categories):
//
//   - every event sets platform and project_id (the owner at or after the
//     event), and advances last_event_at, last_event_type, last_event_id;
//   - a create sets created_at to the event's timestamp, clears deleted_at
//     (a re-created resource lives again), and applies payload.state and
//     payload.size;
//   - an update applies payload.state and payload.size as the event carries
//     them (absent size means unchanged) — unless the resource is deleted:
//     only a create revives a deleted resource, so an update after a delete
//     changes neither state nor size;
//   - a delete sets deleted_at and forces state "deleted"; the size is kept.
//
// Apply assumes e sorts after every event already folded (see
// [Resource.After]); [Fold] sorts a history first.
func Apply(r *Resource, e *event.Event) {
	if r.LastEventID == "" && r.LastEventAt.IsZero() {
		r.ResourceKey = Key(e)
		r.FirstEventAt = e.Timestamp
	}
	r.Platform = e.Platform
	r.ProjectID = e.ProjectID
	ts := e.Timestamp
	switch event.Categorize(e.EventType) {
	case event.CategoryCreate:
		r.CreatedAt = &ts
		r.DeletedAt = nil
		applyPayload(r, e)
	case event.CategoryUpdate:
		if r.DeletedAt == nil {
			applyPayload(r, e)
		}
	case event.CategoryDelete:
		r.DeletedAt = &ts
		r.State = StateDeleted
	}
	r.LastEventAt = e.Timestamp
	r.LastEventType = e.EventType
	r.LastEventID = e.EventID
}

func applyPayload(r *Resource, e *event.Event) {
	if !e.Payload.State.Missing() {
		r.State = e.Payload.State.String()
	}
	if e.Payload.Size.Kind() == '{' {
		r.Size = e.Payload.Size
	}
}

// Fold returns the projection row of one resource from its whole history,
// in any order: it sorts a copy by [Compare] and applies each event. The
// history must not be empty and must concern one resource.
func Fold(history []event.Event) Resource {
	sorted := slices.Clone(history)
	slices.SortFunc(sorted, func(a, b event.Event) int { return Compare(&a, &b) })
	var r Resource
	for i := range sorted {
		Apply(&r, &sorted[i])
	}
	return r
}

// FoldBatch computes the projection rows that folding a batch of newly
// stored events gives, the way both stores do it inside the ingest
// transaction:
//
//   - the batch is folded in [CompareKeyed] order, so the order of the items
//     within a batch never matters;
//   - an event that sorts after its resource's row (current) is applied
//     incrementally with [Apply];
//   - an event older than the row's last event (a late event) replays the
//     resource's whole history with [Fold]; history must return every
//     stored event of the key, this batch's included. replays counts those
//     by cloud (tally_projection_replays_total{cloud}).
//
// current returns the row stored before the batch, if any. FoldBatch changes
// nothing itself; the caller writes the returned rows. The error is
// history's.
func FoldBatch(newEvents []event.Event, current func(ResourceKey) (Resource, bool), history func(ResourceKey) ([]event.Event, error)) (rows map[ResourceKey]Resource, replays map[string]int, err error) {
	rows = make(map[ResourceKey]Resource)
	replayed := make(map[ResourceKey]bool)
	sorted := slices.Clone(newEvents)
	slices.SortFunc(sorted, func(a, b event.Event) int { return CompareKeyed(&a, &b) })
	for i := range sorted {
		e := &sorted[i]
		k := Key(e)
		if replayed[k] {
			continue // the replay read every stored event of k
		}
		row, ok := rows[k]
		if !ok {
			row, ok = current(k)
		}
		if !ok || row.After(e) {
			Apply(&row, e)
			rows[k] = row
			continue
		}
		h, err := history(k)
		if err != nil {
			return nil, nil, err
		}
		if replays == nil {
			replays = make(map[string]int)
		}
		replays[k.Cloud]++
		replayed[k] = true
		rows[k] = Fold(h)
	}
	return rows, replays, nil
}

// ResourceQuery selects rows of the projection. Empty strings and a zero
// AliveAt match everything. Rows come ordered by key (cloud, resource_type,
// resource_id), strictly after After when set, at most Limit (1..1000).
type ResourceQuery struct {
	Cloud        string
	Platform     string
	ResourceType string
	ProjectID    string
	State        string
	// Status keeps the rows by whether their state is "deleted":
	// [StatusActive] the others, [StatusDeleted] those alone, "" or
	// [StatusAll] both. It and State are independent filters, as in the
	// Reporting API this replaces (state=active&status=deleted matches
	// nothing).
	Status Status
	// AliveAt keeps the rows whose current life covers the instant: created
	// (or, for a resource whose create was never seen, first seen) at or
	// before it, and not deleted at or before it. The projection keeps the
	// current life only, so a resource deleted and re-created after AliveAt
	// is judged by its current life.
	AliveAt time.Time
	After   *ResourceKey
	Limit   int
	// MaxBytes, when positive, lets the store stop reading once the items
	// it holds (at least two) total more; the Service passes [MaxPageBytes].
	MaxBytes int
}

// Status selects resources by whether their state is "deleted" (GET
// /api/v1/resources?status=…).
type Status string

// The values of [Status].
const (
	StatusActive  Status = "active"
	StatusDeleted Status = "deleted"
	StatusAll     Status = "all"
)

// StateDeleted is the state the projection forces on a deleted resource.
const StateDeleted = "deleted"

// Match reports whether a row in state matches s ("" matches every row).
func (s Status) Match(state string) bool {
	switch s {
	case StatusActive:
		return state != StateDeleted
	case StatusDeleted:
		return state == StateDeleted
	}
	return true
}

// RebuildQuery selects the resources a rebuild recomputes; empty strings
// match everything. BatchSize bounds how many resources one transaction
// rebuilds (default 500).
type RebuildQuery struct {
	Cloud        string
	ResourceType string
	BatchSize    int
}

// ResourceCount is how many rows of the projection of current resources
// share one (Platform, Cloud, ResourceType, State): what the gauge
// tally_current_resources reports ([Service.CountResources]).
type ResourceCount struct {
	Platform     string
	Cloud        string
	ResourceType string
	State        string
	// Count is the number of rows, at least 1.
	Count int64
}

// ProjectionStore reads and rebuilds the projection of current resources.
// Both stores implement it; they keep it current inside Store.Commit with
// [FoldBatch].
type ProjectionStore interface {
	// Resources lists rows matching q.
	Resources(ctx context.Context, q ResourceQuery) ([]Resource, error)
	// Resource returns one row, or an error wrapping store.ErrNotFound.
	Resource(ctx context.Context, k ResourceKey) (Resource, error)
	// History returns every stored event of one resource in fold order
	// ([Compare]); empty when there is none. Each event is returned as
	// stored: Source set, Timestamp in UTC, payload.size, payload.provider
	// and each unknown payload member (name and value) byte for byte as
	// Commit was given them (docs/decisions.md, Faithfulness; store/storetest
	// checks it).
	History(ctx context.Context, k ResourceKey) ([]event.Event, error)
	// CountResources counts the rows of the projection by (platform,
	// cloud, resource_type, state), ordered by those four (byte order);
	// each count is at least 1. One GROUP BY on PostgreSQL.
	CountResources(ctx context.Context) ([]ResourceCount, error)
	// RebuildResources recomputes the rows of the resources q selects from
	// the stored events with [Fold], q.BatchSize resources per transaction,
	// calling progress (when not nil) after each transaction with the number
	// of resources rebuilt so far. It returns that number. The result equals
	// the incremental one, and rebuilding twice changes nothing.
	RebuildResources(ctx context.Context, q RebuildQuery, progress func(done int)) (int, error)
}
