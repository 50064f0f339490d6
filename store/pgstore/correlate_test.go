package pgstore_test

import (
	"context"
	"testing"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
	"github.com/tallyhq/tally/store/storetest"
)

func TestCorrelate(t *testing.T) {
	storetest.RunCorrelate(t, func(t *testing.T) correlate.Store {
		return pgtest.Store(t)
	})
}

// TestCorrelateConcurrencyTwoPools runs the concurrency claims through two
// Services on two separate pools (pgstore.Open twice on one URL), as two
// processes sharing one database would.
func TestCorrelateConcurrencyTwoPools(t *testing.T) {
	storetest.RunCorrelateConcurrency(t, func(t *testing.T) (correlate.Store, correlate.Store) {
		u := pgtest.URL(t)
		open := func() *pgstore.Store {
			s, err := pgstore.Open(context.Background(), u)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			return s
		}
		return open(), open()
	})
}

func BenchmarkCreate(b *testing.B) {
	storetest.BenchCorrelateCreate(b, func(b *testing.B) correlate.Store {
		return pgtest.Store(b)
	})
}
