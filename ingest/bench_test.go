package ingest_test

import (
	"context"
	"testing"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/store/storetest"
)

// discardCommit reads as memstore does and stores nothing: the pipeline's
// own cost, without a store's.
type discardCommit struct{ ingest.Store }

func (discardCommit) Commit(_ context.Context, b ingest.Batch) (ingest.Committed, error) {
	return ingest.Committed{Inserted: make([]bool, len(b.Events))}, nil
}

// BenchmarkIngest runs a batch of 1000 valid instance creates
// (storetest.GenerateBatch) through Service.Ingest's stages on a store
// whose Commit stores nothing. One op is the whole batch.
//
//	go test -run='^$' -bench=Ingest -benchmem ./ingest
func BenchmarkIngest(b *testing.B) {
	svc, err := ingest.New(discardCommit{memIngest(b)}, ingest.Options{})
	if err != nil {
		b.Fatal(err)
	}
	items := storetest.GenerateBatch(0, ingest.MaxBatch)
	caller := ingest.Caller{Credential: "bench", Platform: "openstack", Cloud: "bench"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := svc.Ingest(ctx, caller, items)
		if err != nil || len(res.Rejected) != 0 {
			b.Fatal(err, res.Rejected)
		}
	}
}
