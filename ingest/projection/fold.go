package projection

import (
	"cmp"
	"slices"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/internal/page"
)

// Key identifies one row of the projection.
type Key struct {
	Cloud        string `json:"cloud"`
	ResourceType string `json:"resource_type"`
	ResourceID   string `json:"resource_id"`
}

// KeyOf returns the key of the resource e concerns.
func KeyOf(e *event.Event) Key {
	return Key{Cloud: e.Cloud, ResourceType: e.ResourceType, ResourceID: e.ResourceID}
}

// Compare orders keys by cloud, then resource_type, then resource_id: the
// order listings of the projection use. It returns -1, 0 or +1.
func (k Key) Compare(o Key) int {
	return cmp.Or(cmp.Compare(k.Cloud, o.Cloud), cmp.Compare(k.ResourceType, o.ResourceType), cmp.Compare(k.ResourceID, o.ResourceID))
}

// StateDeleted is the state the fold forces on a deleted resource.
const StateDeleted = "deleted"

// Resource is one row of the projection: what folding the resource's whole
// event history in [Compare] order gives. [Fold] over the stored events
// rebuilds it exactly.
type Resource struct {
	Key
	Platform  string `json:"platform"`
	ProjectID string `json:"project_id"`
	// State is the last state folded; [StateDeleted] after a delete.
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

// Bytes is the size of r counted against the byte budget of a page
// (ingest.MaxPageBytes), in bytes: its strings and exact JSON size plus a
// fixed allowance. Stores use it to stop reading at [Query.MaxBytes].
func (r Resource) Bytes() int {
	return page.ItemOverhead + len(r.Cloud) + len(r.ResourceType) + len(r.ResourceID) + len(r.Platform) +
		len(r.ProjectID) + len(r.State) + len(r.Size) + len(r.LastEventType) + len(r.LastEventID)
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

// CompareKeyed orders events by [Key], then by [Compare]. Stores fold a
// batch in this order.
func CompareKeyed(a, b *event.Event) int {
	return cmp.Or(KeyOf(a).Compare(KeyOf(b)), Compare(a, b))
}

// After reports whether e sorts after the last event folded into r, in which
// case [Apply] folds it incrementally. When it does not (a late event), the
// resource's history must be replayed with [Fold].
func (r *Resource) After(e *event.Event) bool {
	return comparePos(e.Timestamp, e.EventType, e.EventID, r.LastEventAt, r.LastEventType, r.LastEventID) > 0
}

// Apply folds one event into r, which holds the fold of every earlier event
// of the same resource (the zero Resource before the first), by the rules
// of the package documentation (canonical-event.md, Sources and
// categories). Apply assumes e sorts after every event already folded (see
// [Resource.After]); [Fold] sorts a history first.
func Apply(r *Resource, e *event.Event) {
	if r.LastEventID == "" && r.LastEventAt.IsZero() {
		r.Key = KeyOf(e)
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

// Fold returns the row of one resource from its whole history, in any
// order: it sorts a copy by [Compare] and applies each event. The history
// must not be empty and must concern one resource.
func Fold(history []event.Event) Resource {
	sorted := slices.Clone(history)
	slices.SortFunc(sorted, func(a, b event.Event) int { return Compare(&a, &b) })
	var r Resource
	for i := range sorted {
		Apply(&r, &sorted[i])
	}
	return r
}

// FoldFrom returns the row of one resource from start, the fold of every
// event before the earliest of history (a checkpoint a store wrote when it
// dropped those events: docs/operations.md, Retention), and history, in any
// order: it applies history's events, sorted by [Compare], to a copy of
// start. A zero start (no checkpoint) makes it [Fold], so history must not
// then be empty. Because the fold is a left fold over the [Compare] order,
// FoldFrom(Fold(h[:i]), h[i:]) equals Fold(h) whenever every event of
// h[:i] sorts before every event of h[i:].
func FoldFrom(start Resource, history []event.Event) Resource {
	sorted := slices.Clone(history)
	slices.SortFunc(sorted, func(a, b event.Event) int { return Compare(&a, &b) })
	r := start
	for i := range sorted {
		Apply(&r, &sorted[i])
	}
	return r
}

// FoldBatch computes the rows that folding a batch of newly stored events
// gives, the way both stores do it inside the ingest transaction:
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
func FoldBatch(newEvents []event.Event, current func(Key) (Resource, bool), history func(Key) ([]event.Event, error)) (rows map[Key]Resource, replays map[string]int, err error) {
	rows = make(map[Key]Resource)
	replayed := make(map[Key]bool)
	sorted := slices.Clone(newEvents)
	slices.SortFunc(sorted, func(a, b event.Event) int { return CompareKeyed(&a, &b) })
	for i := range sorted {
		e := &sorted[i]
		k := KeyOf(e)
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
