package memstore_test

import (
	"testing"

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
