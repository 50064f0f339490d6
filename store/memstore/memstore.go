// Package memstore is the in-memory implementation of tally's Store
// interfaces: the embedded default, and what the runnable examples use.
//
// A [DB] holds every table in memory and hands out one store per area of
// the library, as a database handle hands out services:
//
//   - [DB.Ingest] returns the [Ingest] store (ingest.Store: events, dead
//     letters, audit rows, the size-schema registry);
//   - [DB.Projection] returns the [Projection] store (projection.Store: the
//     projection of current resources Ingest keeps);
//   - [DB.Correlate] returns the [Correlate] store (correlate.Store: the
//     correlated events and their idempotency keys);
//   - [DB.SizeNames] returns the [SizeNames] store (sizenames.Store).
//
// The stores of one DB share its tables: size names replaced through
// SizeNames are what Ingest resolves. A DB is a real product, not a test
// double. It is safe for concurrent use, every write the pure packages
// describe as one unit is all-or-nothing (a failure, including a cancelled
// context, leaves no trace of it), and it passes the same conformance suite
// as the PostgreSQL store ([github.com/tallyhq/tally/store/storetest]).
// Nothing survives the process.
package memstore

import (
	"sync"
	"time"
)

// DB keeps every table in memory and hands out the store of each area. The
// zero value is not usable; call [New]. It is safe for concurrent use.
type DB struct {
	ingest     Ingest
	projection Projection
	correlate  Correlate
	sizeNames  SizeNames
	reconcile  Reconcile
}

// state is the tables every area store of one DB shares.
type state struct {
	// mu guards every area below. A write takes it for its whole unit of
	// work, which is what makes it atomic and isolated.
	mu  sync.Mutex
	now func() time.Time

	ingest      ingestData      // ingest.go
	correlation correlationData // correlate.go
	projection  projectionData  // projection.go
	sync        syncData        // reconcile.go
}

// Ingest is the store of lifecycle ingestion: it implements ingest.Store
// over the tables of the [DB] it came from. Get it from [DB.Ingest]; the
// zero value is not usable. Safe for concurrent use.
type Ingest struct{ *state }

// Projection is the store of the projection of current resources: it
// implements projection.Store over the rows [Ingest] keeps in the [DB] it
// came from. Get it from [DB.Projection]; the zero value is not usable.
// Safe for concurrent use.
type Projection struct{ *state }

// Correlate is the store of event correlation: it implements
// correlate.Store over the tables of the [DB] it came from. Get it from
// [DB.Correlate]; the zero value is not usable. Safe for concurrent use.
type Correlate struct{ *state }

// SizeNames is the store of the size-name table: it implements
// sizenames.Store over the tables of the [DB] it came from (the rows
// [Ingest] resolves). Get it from [DB.SizeNames]; the zero value is not
// usable. Safe for concurrent use.
type SizeNames struct{ *state }

// Options configures a [DB]. The zero value is valid.
type Options struct {
	// Now is the clock for the times the store stamps itself (received_at of
	// a dead letter, at of an audit row, updated_at of a registry row). Nil
	// means time.Now.
	Now func() time.Time
}

// New returns an empty database holding the seeded size schemas (see
// canonical-event.md, Size schemas). The error is nil today: New has the
// shape of every constructor of the library, New(…, Options) (*T, error),
// so that an option added later can be refused without breaking callers.
func New(opts Options) (*DB, error) {
	s := &state{now: opts.Now}
	if s.now == nil {
		s.now = time.Now
	}
	s.ingest.init()
	s.ingest.seed(s.stamp())
	s.correlation.init()
	s.projection.init()
	return &DB{ingest: Ingest{s}, projection: Projection{s}, correlate: Correlate{s}, sizeNames: SizeNames{s}, reconcile: Reconcile{s}}, nil
}

// Ingest returns the ingestion store of db. Every call returns the same
// store.
func (db *DB) Ingest() *Ingest { return &db.ingest }

// Projection returns the projection store of db. Every call returns the
// same store.
func (db *DB) Projection() *Projection { return &db.projection }

// Correlate returns the correlation store of db. Every call returns the
// same store.
func (db *DB) Correlate() *Correlate { return &db.correlate }

// SizeNames returns the size-name store of db. Every call returns the same
// store.
func (db *DB) SizeNames() *SizeNames { return &db.sizeNames }

// Reconcile returns the store of reconciliation runs of db. Every call
// returns the same store.
func (db *DB) Reconcile() *Reconcile { return &db.reconcile }
