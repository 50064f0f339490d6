package memstore_test

import (
	"testing"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/store/memstore"
	"github.com/tallyhq/tally/store/storetest"
)

func TestCorrelate(t *testing.T) {
	storetest.RunCorrelate(t, func(t *testing.T) correlate.Store {
		return memstore.New(memstore.Options{})
	})
}

func BenchmarkCreate(b *testing.B) {
	storetest.BenchCorrelateCreate(b, func(b *testing.B) correlate.Store {
		return memstore.New(memstore.Options{})
	})
}
