package storetest_test

import (
	"testing"

	"github.com/tallyhq/tally/store/memstore"
	"github.com/tallyhq/tally/store/storetest"
)

// A store runs every area's suite from its own tests, with a constructor
// that returns a fresh, empty store for each test. (A test function, so the
// example is compiled, not run.)
func Example() {
	_ = func(t *testing.T) {
		storetest.RunIngest(t, func(t *testing.T) storetest.IngestStore { return memstore.New(memstore.Options{}) })
		storetest.RunProjection(t, func(t *testing.T) storetest.IngestStore { return memstore.New(memstore.Options{}) })
	}
}
