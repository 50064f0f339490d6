package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest/usage"
)

// BenchUsage measures GET /api/v1/usage's library call on a store holding
// resources resources with 10 events each, stored in 1000-event batches:
// creates during February and March, resizes, state changes and
// transfers among 10 projects, a quarter deleted in March, of three
// resource types. Sub-benchmarks:
//
//   - month-by-day: March, window=day, group_by=project_id,resource_type,
//     every resource selected;
//   - one-project: the same for project_id=p0 (a tenth of the resources):
//     its cost grows with the resources selected, not with the table.
//
// Each reports resources/s (selected resources folded per second) and
// peak-heap-MB, the most heap in use while the queries ran, above what it
// was before. docs/performance.md has the figures (a 100,000-resource run on
// PostgreSQL: TALLY_BENCH_USAGE_RESOURCES=100000).
func BenchUsage(b *testing.B, open func(tb testing.TB) Stores, resources int) {
	s := open(b)
	seedUsage(b, s, resources)
	svc, err := usage.New(s.Usage)
	if err != nil {
		b.Fatal(err)
	}
	march := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name     string
		project  string
		selected int
	}{{"month-by-day", "", resources}, {"one-project", "p0", resources / 10}} {
		b.Run(c.name, func(b *testing.B) {
			q := usage.Query{From: march, To: march.AddDate(0, 1, 0), Window: usage.WindowDay, ProjectID: c.project,
				GroupBy: []string{"project_id", "resource_type"}, Quantity: "size.vcpus", Unit: usage.UnitHour, Limit: 1000}
			peak := watchHeap()
			b.ReportAllocs()
			for b.Loop() {
				a, err := svc.Usage(context.Background(), q)
				if err != nil {
					b.Fatal(err)
				}
				if len(a.Items) == 0 {
					b.Fatal("no usage")
				}
			}
			b.ReportMetric(float64(c.selected)*float64(b.N)/b.Elapsed().Seconds(), "resources/s")
			b.ReportMetric(float64(peak())/(1<<20), "peak-heap-MB")
		})
	}
}

// UsageBenchResources is the number of resources of [BenchUsage]: v (the
// value of an environment variable the caller read) when set, else 2000.
// A v that is not a number of at least 10 fails tb.
func UsageBenchResources(tb testing.TB, v string) int {
	if v == "" {
		return 2000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 10 {
		tb.Fatalf("usage benchmark resources %q: want a number, at least 10", v)
	}
	return n
}

// watchHeap samples the heap in use until the returned function is
// called, which returns the most seen above the first sample.
func watchHeap() func() uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var (
		max  atomic.Uint64
		stop = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if v := read(); v > base && v-base > max.Load() {
					max.Store(v - base)
				}
			}
		}
	}()
	return func() uint64 {
		close(stop)
		wg.Wait()
		return max.Load()
	}
}

// seedUsage stores the histories BenchUsage queries.
func seedUsage(b *testing.B, s Stores, resources int) {
	b.Helper()
	r := rand.New(rand.NewPCG(uint64(resources), 22))
	feb := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	types := []string{"instance", "volume", "floatingip"}
	var batch []event.Event
	flush := func() {
		if len(batch) > 0 {
			commitEvents(b, s.Ingest, batch...)
			batch = batch[:0]
		}
	}
	for i := range resources {
		id, rt := fmt.Sprintf("r-%06d", i), types[i%len(types)]
		at := feb.Add(time.Duration(r.Int64N(int64(45 * 24 * time.Hour))))
		project := fmt.Sprintf("p%d", i%10)
		for j := range 10 {
			typ, state, size := rt+".update", "", ""
			switch {
			case j == 0:
				typ, state, size = rt+".create.end", "active", fmt.Sprintf(`{"vcpus":%d,"flavor":"f%d"}`, 1+r.IntN(8), r.IntN(4))
			case j == 9 && i%4 == 0:
				typ = rt + ".delete.end"
			case j%3 == 0:
				size = fmt.Sprintf(`{"vcpus":%d,"flavor":"f%d"}`, 1+r.IntN(8), r.IntN(4))
			case j%3 == 1:
				state = []string{"active", "stopped"}[r.IntN(2)]
			case j == 8 && i%7 == 0:
				project = fmt.Sprintf("p%d", r.IntN(10))
			}
			e := usageEvent(fmt.Sprintf("%s-%d", id, j), id, typ, at, project, state, size)
			e.ResourceType = rt
			batch = append(batch, e)
			at = at.Add(time.Duration(r.Int64N(int64(3 * 24 * time.Hour))))
		}
		if len(batch) >= benchBatchSize {
			flush()
		}
	}
	flush()
}
