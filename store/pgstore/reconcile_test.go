package pgstore_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/ingest"
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

// TestRunsOnASmallPool: six concurrent runs of one cloud and three of
// others, through the Service, on a pool of two connections: every run
// completes, and the runs of the one cloud record one run that created
// and five that found everything unchanged.
func TestRunsOnASmallPool(t *testing.T) {
	db := pgtest.DB(t, pgstore.Options{MaxConns: 2, AcquireTimeout: 2 * time.Second})
	ing, err := ingest.New(db.Ingest(), ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := reconcile.New(ing, db.Projection(), db.Reconcile(), reconcile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	obs := reconcile.Observation{Platform: "openstack", ObservedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		CompleteTypes: []string{"instance"}, Resources: []reconcile.Resource{{ResourceType: "instance", ResourceID: "vm-1",
			ProjectID: "p1", State: "active", Size: jsontext.Value(`{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"}`)}}}
	clouds := []string{"c1", "c1", "c1", "c1", "c1", "c1", "c2", "c3", "c4"}
	outs := make([]reconcile.Outcome, len(clouds))
	var wg sync.WaitGroup
	for i, cloud := range clouds {
		wg.Go(func() {
			var err error
			if outs[i], err = rec.Run(context.Background(), "reconciler", cloud, obs); err != nil {
				t.Errorf("run %d of %s: %v", i, cloud, err)
			}
		})
	}
	wg.Wait()
	created := 0
	for i, o := range outs[:6] {
		created += o.Created
		if o.Created+o.Unchanged != 1 {
			t.Errorf("run %d of c1: %+v, want vm-1 created or unchanged", i, o)
		}
	}
	if created != 1 {
		t.Errorf("the runs of c1 created vm-1 %d times, want once", created)
	}
}

// TestSyncRunIDsInCommitOrder (docs/reconciliation.md: GET
// /api/v1/sync-runs lists the runs "newest first"; its cursor must never
// skip one): a run's id is taken in its commit's transaction, so a run of
// another cloud that commits while an earlier-numbered run is still
// committing would show a larger id first, and a reader that pages past it
// (or polls for runs after the newest id it saw) never sees the smaller
// one. When a run's commit returns, every run of a smaller id is visible.
// A trigger holds the commit of cloud "slow" after its run's row is
// inserted.
func TestSyncRunIDsInCommitOrder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := pgtest.URL(t)
	db := pgtest.Open(t, url, pgstore.Options{})
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `
CREATE FUNCTION slow_sync_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.cloud = 'slow' THEN PERFORM pg_sleep(1.5); END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER slow_sync_run AFTER INSERT ON sync_runs FOR EACH ROW EXECUTE FUNCTION slow_sync_run();`); err != nil {
		t.Fatal(err)
	}
	ing, err := ingest.New(db.Ingest(), ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := reconcile.New(ing, db.Projection(), db.Reconcile(), reconcile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	obs := reconcile.Observation{Platform: "openstack", ObservedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	var wg sync.WaitGroup
	var slowErr error
	wg.Go(func() { _, slowErr = rec.Run(ctx, "reconciler", "slow", obs) })
	time.Sleep(500 * time.Millisecond) // the slow run's row is inserted, its commit held
	fast, err := rec.Run(ctx, "reconciler", "fast", obs)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := db.Reconcile().SyncRuns(ctx, reconcile.RunQuery{})
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if slowErr != nil {
		t.Fatal(slowErr)
	}
	var ids []int64
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	for id := int64(1); id < fast.RunID; id++ {
		if !slices.Contains(ids, id) {
			t.Errorf("when run %d (fast) was answered the listing held runs %v: run %d is committed later, below a cursor a reader may have passed", fast.RunID, ids, id)
		}
	}
}
