package reconcile

import (
	"context"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/sizenames"
)

// Store is what a run reads besides the projection, and where runs are
// serialised and listed. The Reconcile stores of store/memstore and
// store/pgstore (DB.Reconcile) implement it; store/storetest.Run holds the
// suite both pass. The run's writes go through ingest.Store.Commit (the
// SizeNames and SyncRun of an ingest.Batch). Every method is safe for
// concurrent use.
type Store interface {
	// SizeNames returns the size-name rows of one (cloud, resource_type),
	// as ingest.Store.SizeNames does.
	SizeNames(ctx context.Context, cloud, resourceType string) ([]sizenames.Row, error)
	// SyncRuns lists the recorded runs q selects, newest first (by ID,
	// descending).
	SyncRuns(ctx context.Context, q RunQuery) ([]ingest.SyncRun, error)
	// Exclusive calls fn while no other Exclusive call of the same cloud
	// runs, in this process or any other sharing the store's database, and
	// returns its error. It waits for the cloud's turn until ctx is done
	// (then returns an error wrapping ctx.Err()).
	Exclusive(ctx context.Context, cloud string, fn func(ctx context.Context) error) error
}

// RunQuery selects recorded runs. An empty Cloud matches every cloud; a
// positive Before keeps the runs of smaller ID; a positive Limit caps the
// rows returned, 0 means no cap.
type RunQuery struct {
	Cloud  string
	Before int64
	Limit  int
}
