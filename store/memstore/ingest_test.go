package memstore_test

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/store/memstore"
	"github.com/tallyhq/tally/store/storetest"
)

// open returns the stores of a new, empty in-memory database.
func open(tb testing.TB) storetest.Stores {
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return storetest.Stores{Ingest: db.Ingest(), Projection: db.Projection(), SizeNames: db.SizeNames(), Correlate: db.Correlate(), Usage: db.Ingest(), Reconcile: db.Reconcile()}
}

func TestConformance(t *testing.T) { storetest.Run(t, open) }

func BenchmarkStore(b *testing.B) { storetest.Bench(b, open) }

// The suite's concurrency case at full size: 8 goroutines ingesting
// overlapping batches of the same 1000 events.
func TestIngestConcurrentLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	st := open(t).Ingest
	svc, err := ingest.New(st, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	all := storetest.GenerateBatch(0, n)
	var (
		wg       sync.WaitGroup
		accepted atomic.Int64
	)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for start := 0; start < n; start += 250 {
				var batch [][]byte
				for k := range 250 {
					batch = append(batch, all[(w*125+start+k)%n])
				}
				res, err := svc.Ingest(context.Background(), ingest.Caller{}, batch)
				if err != nil {
					t.Error(err)
					return
				}
				accepted.Add(int64(res.Accepted))
			}
		}()
	}
	wg.Wait()
	evs := storetest.Events(t, st)
	if accepted.Load() != n || len(evs) != n {
		t.Errorf("accepted %d, stored %d, want %d and %d", accepted.Load(), len(evs), n, n)
	}
}

// BenchmarkUsage runs storetest.BenchUsage on 2,000 resources, or on
// TALLY_BENCH_USAGE_RESOURCES of them.
func BenchmarkUsage(b *testing.B) {
	storetest.BenchUsage(b, open, storetest.UsageBenchResources(b, os.Getenv("TALLY_BENCH_USAGE_RESOURCES")))
}
