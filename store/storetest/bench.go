package storetest

import (
	"context"
	"testing"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
)

const benchBatchSize = 1000

// benchIngest is Bench's Ingest group: fresh (new events every
// iteration) and replay (one stored batch again, every item a duplicate),
// through the public [ingest.Service].
func benchIngest(b *testing.B, newStore func(b *testing.B) ingest.Store) {
	ctx := context.Background()
	caller := ingest.Caller{Credential: "bench"}
	b.Run("fresh", func(b *testing.B) {
		svc := benchService(b, newStore(b))
		batches := make([][][]byte, 0, 16)
		b.ReportAllocs()
		b.ResetTimer()
		i := 0
		for b.Loop() {
			b.StopTimer()
			if len(batches) == 0 {
				for range 16 {
					batches = append(batches, GenerateBatch(i*benchBatchSize, benchBatchSize))
					i++
				}
			}
			batch := batches[0]
			batches = batches[1:]
			b.StartTimer()
			res, err := svc.Ingest(ctx, caller, batch)
			if err != nil {
				b.Fatal(err)
			}
			if res.Accepted != benchBatchSize {
				b.Fatalf("accepted %d of %d: %+v", res.Accepted, benchBatchSize, res.Rejected[:min(3, len(res.Rejected))])
			}
		}
		b.ReportMetric(float64(b.N*benchBatchSize)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("replay", func(b *testing.B) {
		svc := benchService(b, newStore(b))
		batch := GenerateBatch(0, benchBatchSize)
		if res, err := svc.Ingest(ctx, caller, batch); err != nil || res.Accepted != benchBatchSize {
			b.Fatalf("first ingest: %+v, %v", res, err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			res, err := svc.Ingest(ctx, caller, batch)
			if err != nil {
				b.Fatal(err)
			}
			if res.Duplicates != benchBatchSize {
				b.Fatalf("duplicates %d of %d", res.Duplicates, benchBatchSize)
			}
		}
		b.ReportMetric(float64(b.N*benchBatchSize)/b.Elapsed().Seconds(), "events/s")
	})
}

func benchService(b *testing.B, st ingest.Store) *ingest.Service {
	svc, err := ingest.New(st, ingest.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return svc
}

// benchEvents decodes GenerateBatch(first, n) as the pipeline would store
// it.
func benchEvents(b *testing.B, first, n int) []event.Event {
	items := GenerateBatch(first, n)
	out := make([]event.Event, n)
	for i, it := range items {
		ev, err := event.DecodeValidate(it)
		if err != nil {
			b.Fatal(err)
		}
		ev.Source = event.SourceCollector
		out[i] = ev
	}
	return out
}

// benchCommit is Bench's Commit group: [ingest.Store.Commit] alone on
// decoded 1000-event batches, fresh and replay.
func benchCommit(b *testing.B, newStore func(b *testing.B) ingest.Store) {
	ctx := context.Background()
	b.Run("fresh", func(b *testing.B) {
		st := newStore(b)
		var batches [][]event.Event
		b.ReportAllocs()
		b.ResetTimer()
		i := 0
		for b.Loop() {
			b.StopTimer()
			if len(batches) == 0 {
				for range 16 {
					batches = append(batches, benchEvents(b, i*benchBatchSize, benchBatchSize))
					i++
				}
			}
			batch := batches[0]
			batches = batches[1:]
			b.StartTimer()
			if _, err := st.Commit(ctx, ingest.Batch{Events: batch}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*benchBatchSize)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("replay", func(b *testing.B) {
		st := newStore(b)
		batch := benchEvents(b, 0, benchBatchSize)
		if _, err := st.Commit(ctx, ingest.Batch{Events: batch}); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if _, err := st.Commit(ctx, ingest.Batch{Events: batch}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*benchBatchSize)/b.Elapsed().Seconds(), "events/s")
	})
}
