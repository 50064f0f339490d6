package memstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
)

// Property: 32 writers ingest small batches at random, overlapping times;
// 3 readers follow the feed with wait from the beginning. Each reader gets
// exactly the accepted events, none twice, in one order all readers share
// (the PostgreSQL store's TestFeedConcurrentWritersReaders).
func TestFeedConcurrentWritersReaders(t *testing.T) {
	svc, err := ingest.New(open(t).Ingest, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	const writers, batches = 32, 6
	var (
		mu       sync.Mutex
		accepted []string
		total    atomic.Int64
		wg       sync.WaitGroup
		errs     = make(chan error, writers+3)
	)
	total.Store(-1)
	for w := range writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for b := range batches {
				n := 1 + r.IntN(4)
				var mine []string
				items := make([][]byte, n)
				for i := range n {
					id := fmt.Sprintf("w%02d-b%d-%d", w, b, i)
					mine = append(mine, id)
					raw, err := feedEvent(id, ts).MarshalJSON()
					if err != nil {
						errs <- err
						return
					}
					items[i] = raw
				}
				time.Sleep(time.Duration(r.IntN(3000)) * time.Microsecond)
				res, err := svc.Ingest(context.Background(), ingest.Caller{Credential: "c"}, items)
				if err != nil || res.Accepted != n {
					errs <- fmt.Errorf("ingest %v: %+v, %v", mine, res, err)
					return
				}
				mu.Lock()
				accepted = append(accepted, mine...)
				mu.Unlock()
			}
		})
	}
	got := make([][]string, 3)
	var rg sync.WaitGroup
	for r := range got {
		rg.Go(func() {
			deadline := time.Now().Add(60 * time.Second)
			cursor := ""
			for {
				n := total.Load()
				if n >= 0 && int64(len(got[r])) >= n {
					return
				}
				if time.Now().After(deadline) {
					errs <- fmt.Errorf("reader %d: after 60s %d events", r, len(got[r]))
					return
				}
				p, err := svc.Feed(context.Background(), ingest.FeedQuery{After: cursor, Limit: 1 + rand.IntN(40), Wait: 300 * time.Millisecond})
				if err != nil {
					errs <- fmt.Errorf("reader %d: %w", r, err)
					return
				}
				for _, it := range p.Items {
					got[r] = append(got[r], it.Event.EventID)
				}
				cursor = p.NextCursor
			}
		})
	}
	wg.Wait()
	total.Store(int64(len(accepted)))
	rg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	want := slices.Sorted(slices.Values(accepted))
	for r, g := range got {
		if d := cmp.Diff(want, slices.Sorted(slices.Values(g))); d != "" {
			t.Errorf("reader %d: events (-accepted +read):\n%s", r, d)
		}
		if r > 0 {
			if d := cmp.Diff(got[0], g); d != "" {
				t.Errorf("reader %d's order against reader 0's (-0 +%d):\n%s", r, r, d)
			}
		}
	}
}

// feedEvent is a valid instance create event of its own resource.
func feedEvent(id string, ts time.Time) event.Event {
	return event.Event{
		EventID: id, Timestamp: ts, EventType: "compute.instance.create.end",
		Platform: "openstack", Cloud: "east", ResourceType: "instance", ResourceID: "vm-" + id,
		ProjectID: "p1", Source: event.SourceCollector,
		Payload: event.PayloadEnvelope{
			State: event.StateOf("active"),
			Size:  jsontext.Value(`{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"}`),
		},
	}
}
