// Package storetest is the conformance suite every tally store must pass.
//
// Each area of the library has its own entry point (RunIngest,
// RunCorrelate, …) taking a function that returns a fresh, empty store for
// one test. store/memstore and store/pgstore call every entry point from
// their tests with their own constructor, so both stores run the identical
// suite; the PostgreSQL run uses a real server over a real connection
// (internal/pgtest).
//
// New store behaviour lands here first.
package storetest
