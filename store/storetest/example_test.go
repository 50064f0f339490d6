package storetest_test

import (
	"testing"

	"github.com/tallyhq/tally/store/memstore"
	"github.com/tallyhq/tally/store/storetest"
)

// A backend runs the whole suite from one test, with a function that opens
// a fresh, empty database and returns its stores, and every benchmark from
// one benchmark. (Test functions, so the example is compiled, not run.)
func Example() {
	open := func(tb testing.TB) storetest.Stores {
		db, err := memstore.New(memstore.Options{})
		if err != nil {
			tb.Fatal(err)
		}
		return storetest.Stores{Ingest: db.Ingest(), Projection: db.Projection(), SizeNames: db.SizeNames(), Correlate: db.Correlate(), Usage: db.Ingest(), Reconcile: db.Reconcile()}
	}
	_ = func(t *testing.T) { storetest.Run(t, open) }
	_ = func(b *testing.B) { storetest.Bench(b, open) }
}
