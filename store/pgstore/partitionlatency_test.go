package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// "Ingest p99 during partition creation and detach stays within 2× of its
// baseline": two writers commit 100-event batches into the current month
// for a baseline period, then for as long again while a third session
// makes a partition (create and ATTACH) and detaches it CONCURRENTLY and
// drops it, over and over. It logs p50 and p99 of a commit in both periods
// and fails when the p99 during the DDL is more than twice the baseline's.
// On demand (TALLY_PARTITION_LATENCY=1; it takes about 30 s), as its
// figures depend on the machine (docs/performance.md).
func TestIngestLatencyDuringPartitionDDL(t *testing.T) {
	if os.Getenv("TALLY_PARTITION_LATENCY") == "" {
		t.Skip("set TALLY_PARTITION_LATENCY=1 to measure (docs/performance.md)")
	}
	ctx := context.Background()
	db := pgtest.Open(t, pgtest.PartitionedURL(t), pgstore.Options{})
	now := time.Now().UTC()
	var seq atomic.Int64
	batch := func() ingest.Batch {
		evs := make([]event.Event, 100)
		for i := range evs {
			n := seq.Add(1)
			evs[i] = ev(fmt.Sprintf("lat-%d", n), now.Add(-time.Duration(n)*time.Microsecond))
		}
		return ingest.Batch{Events: evs}
	}
	measure := func(d time.Duration) []time.Duration {
		var (
			mu  sync.Mutex
			out []time.Duration
			wg  sync.WaitGroup
		)
		end := time.Now().Add(d)
		for range 2 {
			wg.Go(func() {
				for time.Now().Before(end) {
					b := batch()
					start := time.Now()
					if _, err := db.Ingest().Commit(ctx, b); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					out = append(out, time.Since(start))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		slices.Sort(out)
		return out
	}
	pct := func(l []time.Duration, p float64) time.Duration { return l[int(float64(len(l)-1)*p)] }
	const period = 12 * time.Second
	measure(2 * time.Second) // warm up
	base := measure(period)
	stop := make(chan struct{})
	ddl := make(chan int)
	go func() {
		n := 0
		for m := time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC); ; m = m.AddDate(0, 1, 0) {
			select {
			case <-stop:
				ddl <- n
				return
			default:
			}
			if _, err := db.MakePartitions(ctx, m, m); err != nil {
				t.Error(err)
			}
			if err := pgstore.DetachAndDrop(ctx, db, fmt.Sprintf("events_%04d_%02d", m.Year(), int(m.Month()))); err != nil {
				t.Error(err)
			}
			n++
		}
	}()
	during := measure(period)
	close(stop)
	cycles := <-ddl
	t.Logf("baseline: %d commits, p50 %v, p99 %v", len(base), pct(base, 0.5), pct(base, 0.99))
	t.Logf("during %d partition create+attach+detach+drop cycles: %d commits, p50 %v, p99 %v (%.2f× the baseline p99)",
		cycles, len(during), pct(during, 0.5), pct(during, 0.99), float64(pct(during, 0.99))/float64(pct(base, 0.99)))
	if pct(during, 0.99) > 2*pct(base, 0.99) {
		t.Errorf("p99 during the DDL %v is more than twice the baseline's %v", pct(during, 0.99), pct(base, 0.99))
	}
}
