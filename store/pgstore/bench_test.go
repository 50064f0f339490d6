package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/storetest"
)

// benchBatch returns 1000 distinct valid events; n makes the batch unique.
func benchBatch(n int) []event.Event {
	ts := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	evs := make([]event.Event, 1000)
	for i := range evs {
		evs[i] = ev(fmt.Sprintf("bench-%d-%04d", n, i), ts.Add(time.Duration(n*1000+i)*time.Millisecond))
	}
	return evs
}

// BenchmarkCommit measures Store.Commit on 1000-event batches: "fresh"
// stores new events every iteration, "replay" commits a batch whose events
// are all stored already (every one a duplicate).
func BenchmarkCommit(b *testing.B) {
	ctx := context.Background()
	b.Run("fresh", func(b *testing.B) {
		s := pgtest.Store(b)
		batches := make([][]event.Event, b.N)
		for i := range batches {
			batches[i] = benchBatch(i)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if _, err := s.Commit(ctx, ingest.Batch{Events: batches[i]}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("replay", func(b *testing.B) {
		s := pgtest.Store(b)
		batch := benchBatch(0)
		if _, err := s.Commit(ctx, ingest.Batch{Events: batch}); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if _, err := s.Commit(ctx, ingest.Batch{Events: batch}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "events/s")
	})
}

// BenchmarkIngest measures the whole pipeline (ingest.Service.Ingest:
// decode, validate, size names, size schema, one Commit) on PostgreSQL with
// 1000-item batches. "fresh" is the shared storetest.BenchmarkIngest (new
// events every iteration, the figure every store reports); "replay" resends
// one stored batch, every item a duplicate.
//
//	go test -run '^$' -bench BenchmarkIngest ./store/pgstore/
func BenchmarkIngest(b *testing.B) {
	b.Run("fresh", func(b *testing.B) {
		storetest.BenchmarkIngest(b, func(b *testing.B) storetest.IngestStore { return pgtest.Store(b) })
	})
	b.Run("replay", func(b *testing.B) {
		ctx := context.Background()
		svc, err := ingest.New(pgtest.Store(b), ingest.Options{})
		if err != nil {
			b.Fatal(err)
		}
		batch := storetest.GenerateBatch(0, 1000)
		if res, err := svc.Ingest(ctx, ingest.Caller{Credential: "bench"}, batch); err != nil || res.Accepted != 1000 {
			b.Fatalf("first ingest: %+v, %v", res, err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			res, err := svc.Ingest(ctx, ingest.Caller{Credential: "bench"}, batch)
			if err != nil {
				b.Fatal(err)
			}
			if res.Duplicates != 1000 {
				b.Fatalf("duplicates %d of 1000", res.Duplicates)
			}
		}
		b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "events/s")
	})
}
