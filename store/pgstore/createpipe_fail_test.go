package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
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
			// behind another such backend.
			waiters := func(n int) { t.Helper(); waitWaiters(ctx, t, pool, txPID, n) }
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

// A statement of a pipeline whose answer tally cannot read (here a row of
// another shape than a write statement's; a client-side error, not the
// server's) does not make the others run twice: the server ran the
// pipeline to its Sync and committed it, so it is not rerun ("every
// occurrence counted exactly once"). Each create that was read is
// answered; the unreadable one answers its error.
func TestPipelineUnreadableAnswerIsNotRunTwice(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Open(t, pgtest.URL(t), pgstore.Options{})
	s := db.Correlate()
	pool := pgstore.PoolOf(db)
	if _, err := pool.Exec(ctx, `CREATE TABLE side_effects (n int)`); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	occ, args, err := pgstore.WriteOf(occurrence("k1", `{}`, now))
	if err != nil {
		t.Fatal(err)
	}
	errs := pgstore.PipeStatements(s,
		[]string{occ, `WITH i AS (INSERT INTO side_effects VALUES (1) RETURNING n) SELECT n FROM i`, occ},
		[][]any{args, nil, args2(t, "k2", now)})
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("the readable creates: %v, %v", errs[0], errs[2])
	}
	if errs[1] == nil {
		t.Error("the unreadable answer was read")
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM side_effects`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("the unreadable statement ran %d times, want once", n)
	}
	if d := cmp.Diff(map[string]int64{"k1": 1, "k2": 1}, openCounts(t, s)); d != "" {
		t.Errorf("open events' counts (-want +got):\n%s", d)
	}
}

// args2 is the arguments of an occurrence of key at now.
func args2(t *testing.T, key string, now time.Time) []any {
	t.Helper()
	_, args, err := pgstore.WriteOf(occurrence(key, `{}`, now))
	if err != nil {
		t.Fatal(err)
	}
	return args
}

// A connection whose prepared statements are gone (DISCARD ALL, as a
// connection pooler's reset runs it, or DEALLOCATE ALL) or no longer fit
// (a migration changed a column's type) keeps serving pipelined creates:
// the pipeline prepares its statements again. A create of a single-create
// pipeline on such a connection may answer the error, as the first
// statement after DISCARD ALL did before pipelining; the next create is
// stored.
func TestPipelinePreparesAgainAfterDiscardAll(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Open(t, pgtest.URL(t), pgstore.Options{MaxConns: 1})
	s := db.Correlate()
	pool := pgstore.PoolOf(db)
	now := time.Now().UTC().Truncate(time.Microsecond)
	if _, _, err := s.Create(ctx, occurrence("k1", `{}`, now)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `DISCARD ALL`); err != nil {
		t.Fatal(err)
	}
	_, _, errs := pgstore.PipeCreates(s, nil, []correlate.Create{occurrence("k1", `{}`, now), occurrence("k2", `{}`, now)})
	if err := errors.Join(errs...); err != nil {
		t.Errorf("a pipeline of two after DISCARD ALL: %v", err)
	}
	if _, err := pool.Exec(ctx, `DISCARD ALL`); err != nil {
		t.Fatal(err)
	}
	_, _, _ = s.Create(ctx, occurrence("k3", `{}`, now)) // may fail, once
	var last error
	for range 3 {
		_, _, last = s.Create(ctx, occurrence("k4", `{}`, now))
	}
	if last != nil {
		t.Errorf("creates after DISCARD ALL: %v", last)
	}
}

// A pipeline blocked in the database (behind a row lock another
// transaction holds) whose connection is killed (pg_terminate_backend) or
// whose statement times out (statement_timeout) answers no create success
// unless its effect is committed, and none failure when it is: killed,
// every create of the pipeline fails and none is stored; timed out, the
// pipeline's transaction rolls back and each create runs again on its
// own, the blocked one failing and the others stored once. Either way the
// pool serves the next create and no goroutine is left.
func TestPipelineKilledOrTimedOutWhileBlocked(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts pgstore.Options
		kill bool
		want map[string]int64 // open events' counts afterwards
	}{
		{"pg_terminate_backend", pgstore.Options{MaxConns: 4}, true, map[string]int64{"k1": 1, "k3": 1}},
		{"statement_timeout", pgstore.Options{MaxConns: 4, StatementTimeout: 300 * time.Millisecond}, false,
			map[string]int64{"k0": 1, "k1": 1, "k2": 1, "k3": 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			db := pgtest.Open(t, pgtest.URL(t), tt.opts)
			s := db.Correlate()
			pool := pgstore.PoolOf(db)
			now := time.Now().UTC().Truncate(time.Microsecond)
			if _, _, err := s.Create(ctx, occurrence("k1", `{}`, now)); err != nil {
				t.Fatal(err)
			}
			goroutines := runtime.NumGoroutine()
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx) //nolint:errcheck // the test's end
			var txPID int32
			if err := tx.QueryRow(ctx, `SELECT pg_backend_pid() FROM correlated_events WHERE correlation_key = 'k1' FOR UPDATE`).Scan(&txPID); err != nil {
				t.Fatal(err)
			}
			piped := make(chan []error, 1)
			go func() {
				_, _, errs := pgstore.PipeCreates(s, nil, []correlate.Create{occurrence("k0", `{}`, now), occurrence("k1", `{}`, now), occurrence("k2", `{}`, now)})
				piped <- errs
			}()
			var blocked int32
			for blocked == 0 {
				err := pool.QueryRow(ctx, `SELECT coalesce(max(pid), 0) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, txPID).Scan(&blocked)
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(5 * time.Millisecond)
			}
			var errs []error
			if tt.kill {
				if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, blocked); err != nil {
					t.Fatal(err)
				}
				errs = <-piped
				for i, err := range errs {
					if err == nil {
						t.Errorf("create %d of the killed pipeline succeeded", i)
					}
				}
			} else {
				errs = <-piped
				if errs[0] != nil || errs[1] == nil || errs[2] != nil {
					t.Errorf("errors %v; want only k1's create, blocked, to fail", errs)
				}
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if _, d, err := s.Create(ctx, occurrence("k3", `{}`, now)); err != nil || d != correlate.Created {
				t.Fatalf("the next create: %q, %v; want created", d, err)
			}
			if d := cmp.Diff(tt.want, openCounts(t, s)); d != "" {
				t.Errorf("open events' counts (-want +got):\n%s", d)
			}
			for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > goroutines && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			if n := runtime.NumGoroutine(); n > goroutines {
				t.Errorf("%d goroutines, %d before", n, goroutines)
			}
		})
	}
}

// Every pipeline that may run at once blocked in the database (behind a
// row lock another transaction holds on one key) does not hold the creates
// of other keys: a create that arrives then runs on a connection of its
// own, as every create did before pipelining, and is stored, instead of
// waiting in the queue for as long as the lock is held.
func TestPipelinesAllBlockedDoNotHoldOthers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := pgtest.Open(t, pgtest.URL(t), pgstore.Options{MaxConns: 8}) // 4 flushers
	s := db.Correlate()
	now := time.Now().UTC().Truncate(time.Microsecond)
	tx, txPID := holdOpenEvent(ctx, t, db, "k1", now)
	blocked := make(chan error, 4)
	for i := range 4 {
		go func() {
			_, _, err := s.Create(ctx, occurrence("k1", `{}`, now))
			blocked <- err
		}()
		// until its pipeline waits on the lock, or behind another that does
		waitWaiters(ctx, t, pgstore.PoolOf(db), txPID, i+1)
		time.Sleep(30 * time.Millisecond) // more than the stall after which another pipeline starts
	}
	octx, ocancel := context.WithTimeout(ctx, 3*time.Second)
	defer ocancel()
	if _, d, err := s.Create(octx, occurrence("k2", `{}`, now)); err != nil || d != correlate.Created {
		t.Errorf("a create of another key while every pipeline is blocked: %q, %v; want created", d, err)
	}
	if got := db.PipelineStats().Bypasses; got != 1 {
		t.Errorf("PipelineStats().Bypasses = %d, want 1 (the create of k2)", got)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if err := <-blocked; err != nil {
			t.Errorf("a blocked create, once the lock is gone: %v", err)
		}
	}
	if d := cmp.Diff(map[string]int64{"k1": 5, "k2": 1}, openCounts(t, s)); d != "" {
		t.Errorf("open events' counts (-want +got):\n%s", d)
	}
}
