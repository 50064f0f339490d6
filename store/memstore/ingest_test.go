package memstore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/store/memstore"
	"github.com/tallyhq/tally/store/storetest"
)

func newIngestStore(testing.TB) storetest.IngestStore { return memstore.New(memstore.Options{}) }

func TestIngest(t *testing.T) {
	storetest.RunIngest(t, func(t *testing.T) storetest.IngestStore { return newIngestStore(t) })
}

func BenchmarkIngest(b *testing.B) {
	storetest.BenchmarkIngest(b, func(b *testing.B) storetest.IngestStore { return newIngestStore(b) })
}

// The suite's concurrency case at full size: 8 goroutines ingesting
// overlapping batches of the same 1000 events.
func TestIngestConcurrentLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	st := memstore.New(memstore.Options{})
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
	evs, err := st.Events(context.Background(), ingest.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if accepted.Load() != n || len(evs) != n {
		t.Errorf("accepted %d, stored %d, want %d and %d", accepted.Load(), len(evs), n, n)
	}
}
