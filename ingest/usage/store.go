package usage

import (
	"context"
	"time"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/ingest/timeline"
)

// Store is what usage reads: the stored histories of the selected
// resources as of a position of the lifecycle feed. The Ingest stores of
// store/memstore and store/pgstore implement it; store/storetest.Run holds
// the suite both pass. Every method is safe for concurrent use.
type Store interface {
	// Snapshot resolves a position of the lifecycle feed: nil means the
	// feed's head (the last readable event). It returns the position and
	// the received_at of the last event at or before it in feed order (the
	// zero time when there is none). A position after the head, or one
	// the store never gave, is an error wrapping [ingest.ErrFeedPosition].
	Snapshot(ctx context.Context, at *ingest.FeedPosition) (Snapshot, error)
	// Histories calls fn once per selected resource, in [projection.Key]
	// order, with its events stored at or before q.AsOf (in feed order)
	// whose timestamp is before q.Before, sorted by [projection.Compare].
	// It reads resource by resource (the events index by resource on
	// PostgreSQL), holding one history at a time. An error of fn stops the
	// read and is returned as it is.
	Histories(ctx context.Context, q HistoryQuery, fn func(History) error) error
	// Events is [ingest.Store.Events]: the stored events q selects, each
	// with when it was received, as committed (not bounded by the feed's
	// head), reading at most q.Limit of them and stopping at q.MaxBytes.
	// [Service.Lifecycle] reads a resource's history with it.
	Events(ctx context.Context, q ingest.EventQuery) ([]ingest.StoredEvent, error)
	// Checkpoint returns the checkpoint retention wrote for k when it
	// dropped k's events before at (docs/operations.md, Retention): the
	// resource as they made it; nil when there is none (always in memory).
	Checkpoint(ctx context.Context, k projection.Key) (start *projection.Resource, at time.Time, err error)
}

// Snapshot is a resolved position of the lifecycle feed.
type Snapshot struct {
	Position ingest.FeedPosition
	// At is the received_at of the last event at or before Position: the
	// instant after which an answer as of Position counts no time.
	At time.Time
}

// HistoryQuery selects resources for [Store.Histories]. A resource is
// selected when its key matches Cloud and ResourceType (an empty string
// matches everything) and one of its events that the other bounds keep
// matches Platform and ProjectID.
type HistoryQuery struct {
	Cloud, ResourceType, Platform, ProjectID string
	// ResourceID, when not empty, selects that one resource.
	ResourceID string
	// AsOf bounds the events by their feed position (inclusive).
	AsOf ingest.FeedPosition
	// Before, when not zero, keeps the events with a timestamp before it.
	Before time.Time
	// After, when set, starts strictly after that key; Limit, when
	// positive, stops after that many resources.
	After *projection.Key
	Limit int
}

// History is one resource's events, as stored.
type History struct {
	Key projection.Key
	// Start, when not nil, is the resource as its events before StartAt
	// made it: a checkpoint retention wrote when it dropped them
	// (docs/operations.md, Retention; PostgreSQL only). Events then holds
	// only the events from StartAt on, and may be empty.
	Start   *projection.Resource
	StartAt time.Time
	Events  []event.Event
}

// Timeline is the timeline of h ([timeline.BuildFrom] its checkpoint and
// events).
func (h History) Timeline() timeline.Timeline {
	return timeline.BuildFrom(h.Start, h.StartAt, h.Events)
}
