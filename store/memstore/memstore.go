// Package memstore is the in-memory implementation of tally's Store
// interfaces: the embedded default, and what the runnable examples use.
//
// A [Store] is a real product, not a test double. It is safe for concurrent
// use, every write the pure packages describe as one unit is all-or-nothing
// (a failure, including a cancelled context, leaves no trace of it), and it
// passes the same conformance suite as the PostgreSQL store
// ([github.com/tallyhq/tally/store/storetest]). Nothing survives the
// process.
package memstore

import (
	"sync"
	"time"
)

// Store keeps every table in memory. The zero value is not usable; call
// [New].
type Store struct {
	// mu guards every area below. A write takes it for its whole unit of
	// work, which is what makes it atomic and isolated.
	mu  sync.Mutex
	now func() time.Time

	ingest      ingestData      // ingest.go
	correlation correlationData // correlate.go
	projection  projectionData  // projection.go
}

// Options configures a [Store]. The zero value is valid.
type Options struct {
	// Now is the clock for the times the store stamps itself (received_at of
	// a dead letter, at of an audit row). Nil means time.Now.
	Now func() time.Time
}

// New returns an empty store holding the seeded size schemas (see
// canonical-event.md, Size schemas).
func New(opts Options) *Store {
	s := &Store{now: opts.Now}
	if s.now == nil {
		s.now = time.Now
	}
	s.ingest.init()
	s.ingest.seed(s.stamp())
	s.correlation.init()
	s.projection.init()
	return s
}
