package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// An idempotent create whose write fails inside its transaction (here a
// metadata value PostgreSQL refuses as json, which the service's validation
// would have refused first) leaves nothing behind: no event and no binding
// of the key ("nothing half-written"), and the pool's one connection still
// serves the retry, which records the event and binds the key once
// (event-correlation.md, step 1 and step 5: "in the same transaction as the
// effect").
func TestIdempotentCreateFailedWriteLeavesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := pgtest.Open(t, pgtest.URL(t), pgstore.Options{MaxConns: 1})
	store := db.Correlate()
	now := time.Now().UTC().Truncate(time.Microsecond)
	caller := correlate.Caller{Organization: "org-1", User: "user-1"}
	create := func(metadata string) correlate.Create {
		return correlate.Create{
			Caller: caller, IdempotencyKey: "key-1", Step: correlate.StepRecord, Now: now,
			Event: correlate.Event{
				ID: uuid.Must(uuid.NewV7()).String(), Organization: caller.Organization, User: caller.User,
				Category: "connection", Action: "failed", Severity: correlate.SeverityError,
				Status: correlate.StatusUnread, Metadata: []byte(metadata), CreatedAt: now, UpdatedAt: now,
			},
		}
	}
	if _, _, err := store.Create(ctx, create(`{"broken":`)); err == nil {
		t.Fatal("a create whose metadata is not JSON succeeded")
	}
	l, err := store.List(ctx, caller, correlate.Query{PageSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	if l.Total != 0 {
		t.Fatalf("after the failed create, %d events are stored, want 0", l.Total)
	}
	for i, want := range []correlate.Disposition{correlate.Created, correlate.Replayed} {
		_, d, err := store.Create(ctx, create(`{"ok":true}`))
		if err != nil {
			t.Fatalf("create %d after the failed one: %v", i+1, err)
		}
		if d != want {
			t.Errorf("create %d after the failed one: disposition %q, want %q", i+1, d, want)
		}
	}
}
