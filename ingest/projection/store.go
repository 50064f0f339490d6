package projection

import (
	"context"
	"time"

	"github.com/tallyhq/tally/event"
)

// Query selects rows of the projection. Empty strings and a zero AliveAt
// match everything. Rows come ordered by [Key], strictly after After when
// set, at most Limit (at least 1).
type Query struct {
	Cloud        string
	Platform     string
	ResourceType string
	ProjectID    string
	State        string
	// Status keeps the rows by whether their state is "deleted"
	// ([Status.Match]). It and State are independent filters, as in the
	// Reporting API this replaces (state=active&status=deleted matches
	// nothing).
	Status Status
	// AliveAt keeps the rows whose current life covers the instant: created
	// (or, for a resource whose create was never seen, first seen) at or
	// before it, and not deleted at or before it. The projection keeps the
	// current life only, so a resource deleted and re-created after AliveAt
	// is judged by its current life.
	AliveAt time.Time
	After   *Key
	Limit   int
	// MaxBytes, when positive, lets the store stop reading once the rows it
	// holds (at least two) total more by [Resource.Bytes]; the Service
	// passes ingest.MaxPageBytes.
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

// Match reports whether a row in state matches s: [StatusActive] the rows
// not in [StateDeleted], [StatusDeleted] those alone, "" and [StatusAll]
// every row.
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

// Count is how many rows of the projection share one (Platform, Cloud,
// ResourceType, State): what the gauge tally_current_resources reports.
type Count struct {
	Platform     string
	Cloud        string
	ResourceType string
	State        string
	// N is the number of rows, at least 1.
	N int64
}

// Store reads and rebuilds the projection. The Projection stores of
// store/memstore and store/pgstore (DB.Projection) implement it over the
// rows their ingest.Store.Commit keeps current with [FoldBatch];
// store/storetest.Run holds the suite both pass. Every method is safe for
// concurrent use.
type Store interface {
	// List returns the rows q selects.
	List(ctx context.Context, q Query) ([]Resource, error)
	// Get returns one row, or an error wrapping store.ErrNotFound.
	Get(ctx context.Context, k Key) (Resource, error)
	// History returns every stored event of one resource in fold order
	// ([Compare]); empty when there is none. Each event is returned as
	// stored: Source set, Timestamp in UTC, payload.size, payload.provider
	// and each unknown payload member byte for byte as Commit was given
	// them (docs/decisions.md, Faithfulness).
	History(ctx context.Context, k Key) ([]event.Event, error)
	// Count counts the rows by (platform, cloud, resource_type, state),
	// ordered by those four (byte order); one GROUP BY on PostgreSQL.
	Count(ctx context.Context) ([]Count, error)
	// Rebuild recomputes the rows of the resources q selects from the
	// stored events with [Fold], q.BatchSize resources per transaction,
	// calling progress (when not nil) after each transaction with the
	// number of resources rebuilt so far. It returns that number. The
	// result equals the incremental one, and rebuilding twice changes
	// nothing.
	Rebuild(ctx context.Context, q RebuildQuery, progress func(done int)) (int, error)
}
