// Package store holds the storage implementations of tally's Store
// interfaces and the conformance suite they share.
//
// The rules live in the pure packages ([github.com/tallyhq/tally/ingest],
// [github.com/tallyhq/tally/correlate], [github.com/tallyhq/tally/sizenames]);
// each declares the small, context-first Store interface it needs. The
// packages below implement them. Each backend has one database handle, DB,
// that hands out one store per area, all sharing its tables: DB.Ingest
// (ingest.Store), DB.Correlate (correlate.Store) and DB.SizeNames
// (sizenames.Store).
//
//   - [github.com/tallyhq/tally/store/memstore]: the in-memory database, the
//     embedded default (memstore.New). Safe for concurrent use; every write
//     is all-or-nothing like a transaction. Nothing survives the process.
//   - [github.com/tallyhq/tally/store/pgstore]: PostgreSQL through pgx v5 and
//     sqlx (pgstore.Open or pgstore.New), schema applied by embedded goose
//     migrations (DB.Migrate).
//   - [github.com/tallyhq/tally/store/storetest]: one conformance suite,
//     storetest.Run, that both implementations must pass.
//
// This package itself only declares the errors every implementation shares.
package store

import "errors"

// ErrNotFound is returned (wrapped) by a store when the row a call names does
// not exist. Test for it with errors.Is.
var ErrNotFound = errors.New("store: not found")

// ErrUnavailable is returned (wrapped) by a store when the database could
// not be reached or did not answer in time: a refused or broken connection,
// a server shutting down or restarting, too many connections, or a statement
// cancelled by its timeout. The operation was not applied, unless the
// connection broke while its commit was in flight, when the outcome is
// unknown; either way retrying later is right (ingestion is idempotent, and
// a createEvent with an idempotency key is too). HTTP adapters answer it 503
// with Retry-After. Test for it with errors.Is.
var ErrUnavailable = errors.New("store: unavailable")
