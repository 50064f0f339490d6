package main

// The bench's only coupling to the product's store constructors: keep it to
// these three functions, so that a change of their shape is one edit here.

import (
	"context"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/sizenames"
	"github.com/tallyhq/tally/store/memstore"
	"github.com/tallyhq/tally/store/pgstore"
)

// benchStore is what the library phases need of a store.
type benchStore interface {
	ingest.Store
	sizenames.Store
}

// migrate applies the product's migrations to the schema url selects.
func migrate(ctx context.Context, url string) error {
	_, err := pgstore.Migrate(ctx, url)
	return err
}

// openPG opens the product's PostgreSQL store on url (already migrated).
func openPG(ctx context.Context, url string) (benchStore, func(), error) {
	st, err := pgstore.Open(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	return st, st.Close, nil
}

// newMemory returns a fresh in-memory store.
func newMemory() benchStore { return memstore.New(memstore.Options{}) }
