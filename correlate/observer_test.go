package correlate_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/store/memstore"
)

type dispositions struct {
	mu  sync.Mutex
	got []correlate.Disposition
}

func (o *dispositions) Disposition(d correlate.Disposition) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, d)
}

// "The disposition observer sits in correlate beside ingest's", so
// an embedder calling Service.Create counts dispositions as the server does;
// a refused create counts nothing.
func TestCreateTellsTheObserver(t *testing.T) {
	obs := &dispositions{}
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := correlate.New(db.Correlate(), correlate.Options{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	alice := correlate.Caller{Organization: "acme", User: "alice"}
	open := correlate.Payload{Category: "c", Action: "a", CorrelationKey: "k", IdempotencyKey: "i"}
	for _, p := range []correlate.Payload{open, {Category: "c", Action: "a", CorrelationKey: "k"}, open} {
		if _, _, err := svc.Create(ctx, alice, p); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := svc.Create(ctx, alice, correlate.Payload{}); !errors.Is(err, event.ErrInvalid) {
		t.Fatalf("refused create: %v, want ErrInvalid", err)
	}
	want := []correlate.Disposition{correlate.Created, correlate.Incremented, correlate.Replayed}
	if diff := cmp.Diff(want, obs.got); diff != "" {
		t.Errorf("observed dispositions (-want +got):\n%s", diff)
	}
}
