package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// A create whose caller gives up while its pipeline waits for a connection
// (the pool exhausted) answers its context's error and is not sent: an
// answered failure leaves nothing stored ("no create answered failure when
// its effect did commit"), as when it waited for a connection on its own.
// The create beside it, whose caller waits, is stored.
func TestPipelineCreateGivenUpWhileWaitingForAConnectionIsNotSent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := pgtest.Open(t, pgtest.URL(t), pgstore.Options{MaxConns: 2})
	s := db.Correlate()
	pool := pgstore.PoolOf(db)
	var held []*pgxpool.Conn
	for range 2 {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	time.AfterFunc(400*time.Millisecond, func() {
		for _, c := range held {
			c.Release()
		}
	})
	now := time.Now().UTC().Truncate(time.Microsecond)
	short, scancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer scancel()
	ds, errs := pgstore.PipeWrites(s, []context.Context{short, ctx}, []correlate.Create{occurrence("gave-up", `{}`, now), occurrence("waited", `{}`, now)})
	if !errors.Is(errs[0], context.DeadlineExceeded) {
		t.Errorf("the create given up: %q, %v; want its deadline", ds[0], errs[0])
	}
	if errs[1] != nil || ds[1] != correlate.Created {
		t.Errorf("the create that waited: %q, %v; want created", ds[1], errs[1])
	}
	time.Sleep(100 * time.Millisecond) // any write of the pipeline is done
	if d := cmp.Diff(map[string]int64{"waited": 1}, openCounts(t, s)); d != "" {
		t.Errorf("open events' counts (-want +got):\n%s", d)
	}
}

// A DeleteMany (or SetStatuses) of events of several keys never deadlocks
// with a pipeline of creates counting on those keys: both lock the open
// events in the order of their correlationKey. Before pipelining, a create
// locked one open event and could not be part of a deadlock; a pipeline
// locks many in one transaction, so a DeleteMany that locked them in
// another order was aborted after deadlock_timeout (SQLSTATE 40P01, 503 to
// its client) or made the pipeline's creates run again.
func TestPipelineAndDeleteManyDoNotDeadlock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := pgtest.Open(t, pgtest.URL(t), pgstore.Options{MaxConns: 6})
	s := db.Correlate()
	pool := pgstore.PoolOf(db)
	now := time.Now().UTC().Truncate(time.Microsecond)
	for _, op := range []struct {
		name string
		run  func(ids []string) ([]string, error)
	}{
		{"DeleteMany", func(ids []string) ([]string, error) { return s.DeleteMany(ctx, testCaller, ids, now) }},
		{"SetStatuses", func(ids []string) ([]string, error) {
			return s.SetStatuses(ctx, testCaller, ids, correlate.StatusRead, now)
		}},
	} {
		t.Run(op.name, func(t *testing.T) {
			a, b := op.name+"/a", op.name+"/b"
			// b's event is the newer, so the UPDATE, in the order of the
			// scope's index (newest first), meets it first.
			eb, _, err := s.Create(ctx, occurrence(b, `{}`, now.Add(time.Second)))
			if err != nil {
				t.Fatal(err)
			}
			ea, _, err := s.Create(ctx, occurrence(a, `{}`, now))
			if err != nil {
				t.Fatal(err)
			}
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx) //nolint:errcheck // the test's end
			if _, err := tx.Exec(ctx, `SELECT 1 FROM correlated_events WHERE id = $1 FOR UPDATE`, ea.ID); err != nil {
				t.Fatal(err)
			}
			var txPID int32
			if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&txPID); err != nil {
				t.Fatal(err)
			}
			// waiters waits until n backends wait on tx's lock, directly or
			// behind another such backend (this database serves others).
			waiters := func(n int) {
				t.Helper()
				for waiting := 0; waiting < n; {
					if err := pool.QueryRow(ctx, `WITH RECURSIVE w(pid) AS (SELECT $1::int
						UNION SELECT a.pid FROM pg_stat_activity a, w WHERE w.pid = ANY(pg_blocking_pids(a.pid)))
						SELECT count(*) - 1 FROM w`, txPID).Scan(&waiting); err != nil {
						t.Fatal(err)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			// A pipeline counting on a, keys between, then b: it waits on
			// a, behind tx.
			cs := []correlate.Create{occurrence(b, `{}`, now), occurrence(a, `{}`, now)}
			for i := range 40 {
				cs = append(cs, occurrence(fmt.Sprintf("%s%02d", a, i), `{}`, now))
			}
			piped := make(chan []error, 1)
			go func() {
				_, _, errs := pgstore.PipeCreates(s, nil, cs)
				piped <- errs
			}()
			waiters(1)
			changed := make(chan error, 1)
			go func() {
				_, err := op.run([]string{eb.ID, ea.ID})
				changed <- err
			}()
			waiters(2)
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-changed; err != nil {
				t.Errorf("%s beside the pipeline: %v", op.name, err)
			}
			if err := errors.Join(<-piped...); err != nil {
				t.Errorf("the pipeline: %v", err)
			}
		})
	}
	if got := db.PipelineStats().Reruns; got != 0 {
		t.Errorf("%d pipelines were rerun, want 0 (a deadlock?)", got)
	}
}
