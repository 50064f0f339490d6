package pgstore_test

import (
	"context"
	"errors"
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
