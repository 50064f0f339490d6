// Package storetest is the conformance suite every tally store must pass.
//
// [Run] is the single entry point: a backend's test calls it with a
// function that opens a fresh, empty database and returns its [Stores],
// and Run runs the suite of every area (ingestion, the projection of
// current resources, listing windows, correlation and its concurrency
// claims), each case on its own database and in parallel with the others
// (t.Parallel). [Bench] is the single benchmark entry, with the same
// names on every backend. store/memstore and store/pgstore call both, so
// both stores run the identical suite; the PostgreSQL run uses a real
// server over a real connection, one schema per test (internal/pgtest).
//
//	func TestConformance(t *testing.T) { storetest.Run(t, open) }
//	func BenchmarkStore(b *testing.B)  { storetest.Bench(b, open) }
//
// New store behaviour lands here first.
package storetest

import (
	"testing"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/ingest/reconcile"
	"github.com/tallyhq/tally/ingest/usage"
	"github.com/tallyhq/tally/sizenames"
)

// Stores is one database's store of each area, as a backend's DB hands
// them out (memstore.DB and pgstore.DB: Ingest, Projection, SizeNames,
// Correlate).
type Stores struct {
	// Ingest is the ingestion store. Required.
	Ingest ingest.Store
	// Projection is the projection store; its rows are the ones Ingest
	// keeps. Required.
	Projection projection.Store
	// SizeNames is the size-name store; its rows are the ones Ingest
	// resolves. Required.
	SizeNames sizenames.Store
	// Correlate is the correlation store. Required.
	Correlate correlate.Store
	// Usage reads the histories usage queries fold, over the events Ingest
	// stores (both backends' Ingest store implements it). Required.
	Usage usage.Store
	// Reconcile is the store of reconciliation runs. Required.
	Reconcile reconcile.Store
	// Reopen, when not nil, returns the stores of a second, independent
	// handle on the same database (for PostgreSQL, another pool), released
	// on tb's cleanup. The concurrency cases create through both handles,
	// as two processes sharing one database would. Nil: they use these
	// stores twice (the in-memory store, whose handle is the database).
	Reopen func(tb testing.TB) Stores
}

// ingest returns the ingestion contracts (with the projection Commit
// keeps) as one value.
func (s Stores) ingest() ingestStore {
	return ingestPair{Store: s.Ingest, names: s.SizeNames, proj: s.Projection}
}

// Run runs the whole conformance suite. open returns the stores of a fresh,
// empty database (empty but for the seeded size schemas of
// canonical-event.md, Size schemas), released on tb's cleanup; Run calls it
// once per case, from parallel subtests, so it must be safe for concurrent
// use. Each case names the spec sentence or docs/decisions.md row it checks.
//
// The top-level subtests are Ingest, Projection, Feed, Windows, Usage,
// Correlate and Reconcile.
func Run(t *testing.T, open func(tb testing.TB) Stores) {
	t.Helper()
	newIngest := func(t *testing.T) ingestStore { return open(t).ingest() }
	newCorrelate := func(t *testing.T) correlate.Store { return open(t).Correlate }
	t.Run("Ingest", func(t *testing.T) {
		t.Parallel()
		runIngest(t, newIngest)
	})
	t.Run("Projection", func(t *testing.T) {
		t.Parallel()
		runProjection(t, newIngest)
	})
	t.Run("Feed", func(t *testing.T) {
		t.Parallel()
		runFeed(t, newIngest)
	})
	t.Run("Windows", func(t *testing.T) {
		t.Parallel()
		runWindows(t, newIngest)
	})
	t.Run("Usage", func(t *testing.T) {
		t.Parallel()
		runUsage(t, func(t *testing.T) Stores { return open(t) })
	})
	t.Run("Correlate", func(t *testing.T) {
		t.Parallel()
		runCorrelate(t, newCorrelate, func(t *testing.T) (correlate.Store, correlate.Store) {
			s := open(t)
			if s.Reopen == nil {
				return s.Correlate, s.Correlate
			}
			return s.Correlate, s.Reopen(t).Correlate
		})
	})
	t.Run("Reconcile", func(t *testing.T) {
		t.Parallel()
		runReconcile(t, open)
	})
}

// Bench runs every benchmark of the suite on the stores open returns (one
// fresh database per sub-benchmark), with the same names on every backend:
//
//   - Ingest/fresh: [ingest.Service.Ingest] of 1000-event batches of new
//     events ([GenerateBatch]), each a new resource; reports events/s.
//   - Ingest/replay: the same stored batch again, every item a duplicate;
//     events/s.
//   - Commit/fresh, Commit/replay: [ingest.Store.Commit] alone on the same
//     batches, already decoded; events/s.
//   - Create/hot-key, Create/hot-key-parallel: [correlate.Service.Create],
//     every create an occurrence of one open key; creates/s.
//   - Create/fresh-keys, Create/fresh-keys-parallel: every create opens a
//     new key; creates/s.
//   - Create/spread-keys-64-producers: 64 goroutines sending occurrences
//     and resolutions of 800 keys at random; creates/s.
//   - Sync/fresh, Sync/unchanged, Sync/drift: [reconcile.Service.Run] of a
//     5000-instance observation, every instance new, none changed, or half
//     of them changed; resources/s.
//
// The -parallel variants run b.RunParallel (GOMAXPROCS goroutines, or
// -cpu). Run one group with, for example,
//
//	go test -run='^$' -bench='BenchmarkStore/Ingest' ./store/memstore ./store/pgstore
func Bench(b *testing.B, open func(tb testing.TB) Stores) {
	b.Run("Ingest", func(b *testing.B) { benchIngest(b, func(b *testing.B) ingest.Store { return open(b).Ingest }) })
	b.Run("Commit", func(b *testing.B) { benchCommit(b, func(b *testing.B) ingest.Store { return open(b).Ingest }) })
	b.Run("Create", func(b *testing.B) { benchCreate(b, func(b *testing.B) correlate.Store { return open(b).Correlate }) })
	b.Run("Sync", func(b *testing.B) { benchSync(b, open) })
}
