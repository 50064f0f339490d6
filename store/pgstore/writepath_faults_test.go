package pgstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// TestAttackOperatorFaultsMidCommit: a Commit whose merge of projection
// rows is cut short (its backend terminated by an operator, its statement
// past statement_timeout, its context's deadline) returns an error and
// leaves nothing of the batch; the fault gone, the same batch commits
// through the same DB (the pool drops the dead connection).
func TestAttackOperatorFaultsMidCommit(t *testing.T) {
	for _, fault := range []string{"terminate", "statement_timeout", "deadline"} {
		t.Run(fault, func(t *testing.T) {
			ctx := context.Background()
			u := pgtest.URL(t)
			if fault == "statement_timeout" {
				u += "&statement_timeout=300"
			}
			db := pgtest.Open(t, u, pgstore.Options{})
			admin := pgtest.Open(t, u, pgstore.Options{})
			pool := pgstore.PoolOf(db)
			if _, err := pool.Exec(ctx, `
CREATE FUNCTION slow_merge() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_sleep(3); RETURN NEW; END $$;
CREATE TRIGGER slow_merge BEFORE INSERT ON current_resources
FOR EACH ROW EXECUTE FUNCTION slow_merge();`); err != nil {
				t.Fatal(err)
			}
			batch := ingest.Batch{Events: []event.Event{ev("a", t0), ev("b", t0.Add(time.Second))}}
			done := make(chan error, 1)
			cctx := ctx
			if fault == "deadline" {
				var cancel context.CancelFunc
				cctx, cancel = context.WithTimeout(ctx, 500*time.Millisecond)
				defer cancel()
			}
			go func() {
				_, err := db.Ingest().Commit(cctx, batch)
				done <- err
			}()
			if fault == "terminate" {
				deadline := time.Now().Add(5 * time.Second)
				for {
					var n int
					if err := pgstore.PoolOf(admin).QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE query LIKE '%current_resources%' AND wait_event = 'PgSleep' AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
						t.Fatal(err)
					}
					if n > 0 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("no Commit seen in its merge")
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			var err error
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("Commit did not return")
			}
			if err == nil {
				t.Fatal("Commit cut short: no error")
			}
			t.Logf("error: %v", err)
			var n int
			if err := pgstore.PoolOf(admin).QueryRow(ctx, `SELECT (SELECT count(*) FROM events) + (SELECT count(*) FROM current_resources)`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("%d rows of the batch stored", n)
			}
			if _, err := pgstore.PoolOf(admin).Exec(ctx, `DROP TRIGGER slow_merge ON current_resources`); err != nil {
				t.Fatal(err)
			}
			for i := range 3 { // every connection of the pool, whichever is dead
				res, err := db.Ingest().Commit(ctx, batch)
				if err != nil {
					if i == 0 && strings.Contains(err.Error(), "closed") {
						t.Logf("first retry on the dead connection: %v", err)
						continue
					}
					t.Fatalf("retry %d: %v", i, err)
				}
				if i == 0 && (!res.Inserted[0] || !res.Inserted[1]) {
					t.Errorf("retry: inserted %v", res.Inserted)
				}
			}
			if err := pgstore.PoolOf(admin).QueryRow(ctx, `SELECT (SELECT count(*) FROM events) + (SELECT count(*) FROM current_resources)`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 4 {
				t.Errorf("%d rows after the retry, want 2 events and 2 resources", n)
			}
		})
	}
}
