package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/store/pgstore"
)

// Concurrent batches committed straight to the store (a Go caller's
// nanosecond timestamps, several truncating to one microsecond, ids taken
// by several batches, some for another resource: duplicates, conflicts
// and the ON CONFLICT redo) neither deadlock nor fail, and each event's
// Late is what the feed's order says: before its resource's latest event
// in an earlier batch of the feed.
func TestConcurrentSubMicroBatchesLateMatchesFeedOrder(t *testing.T) {
	s, conn := open(t, pgstore.Options{})
	ctx := context.Background()
	ts := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	const workers = 6
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 9))
			for it := range 6 {
				var b []event.Event
				for range 300 {
					i := r.IntN(400)
					e := ev(fmt.Sprintf("ev-%02d", i), ts.Add(time.Duration(i%5)*time.Microsecond+time.Duration(r.IntN(1000))))
					e.ResourceID = fmt.Sprintf("vm-%d", i%4)
					if i%10 == 0 {
						e.ResourceID = fmt.Sprintf("vm-w%d", w)
					}
					e.ProjectID = fmt.Sprintf("w%d-b%d", w, it)
					b = append(b, e)
				}
				if _, err := s.Commit(ctx, ingest.Batch{Events: b}); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	t.Logf("events: %d", count(t, conn, "events"))
	var late int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM events WHERE late").Scan(&late); err != nil {
		t.Fatal(err)
	}
	t.Logf("late: %d", late)
	var all []ingest.FeedEvent
	var after ingest.FeedPosition
	for deadline := time.Now().Add(10 * time.Second); len(all) < 400 && time.Now().Before(deadline); {
		if len(all) > 0 {
			time.Sleep(20 * time.Millisecond)
		}
		b, err := s.Feed(ctx, ingest.FeedRead{After: after, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b.Items...)
		after = b.Next
	}
	if len(all) != 400 {
		t.Fatalf("feed: %d", len(all))
	}
	// late(e) must be ts(e) < max ts of the same resource in earlier batches (in feed order)
	maxBy := map[string]time.Time{}    // resource -> max ts of completed earlier batches
	batchMax := map[string]time.Time{} // resource -> max ts within the current batch run
	cur := ""
	bad := 0
	for _, fe := range all {
		e := fe.Event
		if e.ProjectID != cur {
			for k, v := range batchMax {
				if v.After(maxBy[k]) {
					maxBy[k] = v
				}
			}
			batchMax = map[string]time.Time{}
			cur = e.ProjectID
		}
		want := e.Timestamp.Before(maxBy[e.ResourceID])
		if want != fe.Late {
			bad++
			if bad <= 10 {
				t.Errorf("%s %s %s %v: late %v, want %v (max before %v)", e.ProjectID, e.EventID, e.ResourceID, e.Timestamp, fe.Late, want, maxBy[e.ResourceID])
			}
		}
		if e.Timestamp.After(batchMax[e.ResourceID]) {
			batchMax[e.ResourceID] = e.Timestamp
		}
	}
}
