package pgstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tallyhq/tally/ingest/reconcile"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// TestExclusiveWaitersHoldNoConnection (reconcile.Store: Exclusive "waits
// for the cloud's turn"; docs/reconciliation.md: "overlapping runs only
// wait"): runs waiting for a cloud's turn, or holding the turns of other
// clouds, must leave the holder the connections its run needs. A waiter
// that parks on a pool connection starves the pool: with a cron entry
// firing every cloud's reconciler at once, every connection waits on a
// lock and no run, nor any other request, gets one.
func TestExclusiveWaitersHoldNoConnection(t *testing.T) {
	for _, tc := range []struct {
		name   string
		clouds []string
	}{
		{"runs of one cloud wait without a connection", []string{"c1", "c1", "c1"}},
		{"runs of several clouds leave the holders a connection", []string{"c1", "c2", "c3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := pgtest.DB(t, pgstore.Options{MaxConns: 2, AcquireTimeout: time.Second})
			st := db.Reconcile()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var wg sync.WaitGroup
			errs := make([]error, len(tc.clouds))
			for i, cloud := range tc.clouds {
				wg.Go(func() {
					errs[i] = st.Exclusive(ctx, cloud, func(ctx context.Context) error {
						// Give every other caller time to arrive and wait.
						time.Sleep(300 * time.Millisecond)
						_, err := st.SyncRuns(ctx, reconcile.RunQuery{Cloud: cloud})
						return err
					})
				})
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("run %d of cloud %s: %v", i, tc.clouds[i], err)
				}
			}
		})
	}
}

// TestExclusiveWaitOutlastsStatementTimeout (docs/reconciliation.md: "the
// server serialises runs of one cloud anyway; overlapping runs only
// wait"): a replica waiting for another replica's run of the same cloud
// waits until its context ends, not for the statement timeout.
func TestExclusiveWaitOutlastsStatementTimeout(t *testing.T) {
	url := pgtest.URL(t)
	opts := pgstore.Options{MaxConns: 4, StatementTimeout: 500 * time.Millisecond}
	a, b := pgtest.Open(t, url, opts).Reconcile(), pgtest.Open(t, url, opts).Reconcile()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	entered := make(chan struct{})
	var errA error
	var wg sync.WaitGroup
	wg.Go(func() {
		errA = a.Exclusive(ctx, "c1", func(context.Context) error {
			close(entered)
			time.Sleep(1500 * time.Millisecond) // three statement timeouts
			return nil
		})
	})
	<-entered
	errB := b.Exclusive(ctx, "c1", func(context.Context) error { return nil })
	wg.Wait()
	if errA != nil {
		t.Errorf("first replica: %v", errA)
	}
	if errB != nil {
		t.Errorf("second replica, waiting for the first: %v", errB)
	}
}
