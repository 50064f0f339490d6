package storetest

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallyhq/tally/correlate"
)

// benchCreate measures [correlate.Service.Create] on a store, one
// fresh store per sub-benchmark, and reports creates/s:
//
//   - hot-key: every create is an occurrence of one open key (incremented);
//   - fresh-keys: every create opens a new key (created);
//
// each serially and with b.RunParallel (GOMAXPROCS goroutines, or
// -cpu), which on hot-key measures contention on one row; and
//
//   - spread-keys-64-producers: 64 goroutines (32 per GOMAXPROCS on 2
//     cores, as tally-bench's 64 producers) each sending occurrences of
//     one of 800 keys at random, one in eight a resolution: what a store
//     does with many concurrent creates (pgstore pipelines them).
func benchCreate(b *testing.B, newStore func(b *testing.B) correlate.Store) {
	caller := correlate.Caller{Organization: "bench-org", User: "bench-user"}
	setup := func(b *testing.B) *correlate.Service {
		svc, err := correlate.New(newStore(b), correlate.Options{Now: time.Now})
		if err != nil {
			b.Fatal(err)
		}
		return svc
	}
	create := func(b *testing.B, svc *correlate.Service, key string, want correlate.Disposition) {
		_, d, err := svc.Create(context.Background(), caller, correlate.Payload{
			Category: "connection", Action: "connect", Severity: correlate.SeverityError,
			Description: new("cluster unreachable"), CorrelationKey: key,
		})
		if err != nil {
			b.Fatal(err)
		}
		if d != want {
			b.Fatalf("disposition %s, want %s", d, want)
		}
	}
	report := func(b *testing.B) {
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
	}
	b.Run("hot-key", func(b *testing.B) {
		svc := setup(b)
		create(b, svc, "hot", correlate.Created)
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			create(b, svc, "hot", correlate.Incremented)
		}
		report(b)
	})
	b.Run("hot-key-parallel", func(b *testing.B) {
		svc := setup(b)
		create(b, svc, "hot", correlate.Created)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				create(b, svc, "hot", correlate.Incremented)
			}
		})
		report(b)
	})
	b.Run("fresh-keys", func(b *testing.B) {
		svc := setup(b)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			create(b, svc, "key-"+strconv.Itoa(i), correlate.Created)
		}
		report(b)
	})
	b.Run("spread-keys-64-producers", func(b *testing.B) {
		svc := setup(b)
		var seq atomic.Uint64
		b.ReportAllocs()
		b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n := seq.Add(1)
				h := n * 0x9e3779b97f4a7c15 // spread n over the keys
				p := correlate.Payload{Category: "connection", Action: "connect", Severity: correlate.SeverityError,
					Description: new("cluster unreachable"), CorrelationKey: "key-" + strconv.FormatUint(h%800, 10)}
				if h>>32%8 == 0 {
					p.ResolvedAt = new(time.Now())
				}
				if _, _, err := svc.Create(context.Background(), caller, p); err != nil {
					b.Fatal(err)
				}
			}
		})
		report(b)
	})
	b.Run("fresh-keys-parallel", func(b *testing.B) {
		svc := setup(b)
		var i atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				create(b, svc, "key-"+strconv.FormatInt(i.Add(1), 10), correlate.Created)
			}
		})
		report(b)
	})
}
