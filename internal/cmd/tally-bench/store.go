package main

// The bench's only coupling to the product's store constructors: keep it to
// these functions, so that a change of their shape is one edit here.

import (
	"context"
	"fmt"
	"time"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/ingest/usage"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/sizenames"
	"github.com/tallyhq/tally/store/memstore"
	"github.com/tallyhq/tally/store/pgstore"
)

// benchStore is what the library phases need of a store.
type benchStore interface {
	ingest.Store
	sizenames.Store
	// Projection is the projection store of the same database.
	Projection() projection.Store
}

// stores joins one database's ingest, size-name and projection stores into
// a benchStore (the first two read its one size_names table).
type stores struct {
	ingest.Store
	names sizenames.Store
	proj  projection.Store
}

func (s stores) Projection() projection.Store { return s.proj }

func (s stores) ReplaceSizeNames(ctx context.Context, cloud string, rows []sizenames.Row) error {
	return s.names.ReplaceSizeNames(ctx, cloud, rows)
}

// migrate applies the product's migrations to the schema url selects.
func migrate(ctx context.Context, url string) error {
	db, err := pgstore.Open(ctx, url, pgstore.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err = db.Migrate(ctx); err != nil {
		return err
	}
	// The partitions of the workload's month and the next, as an
	// operator makes them before a backdated import: the copy ceiling
	// writes to events directly, which makes no partition on demand.
	_, err = db.MakePartitions(ctx, workloadStart, workloadStart.AddDate(0, 1, 0))
	return err
}

// openPG opens the product's PostgreSQL store on url (already migrated).
func openPG(ctx context.Context, url string) (benchStore, func(), error) {
	db, err := pgstore.Open(ctx, url, pgstore.Options{})
	if err != nil {
		return nil, nil, err
	}
	return stores{db.Ingest(), db.SizeNames(), db.Projection()}, db.Close, nil
}

// newMemory returns a fresh in-memory store.
func newMemory() benchStore {
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		panic(err) // never: memstore.New refuses no Options today
	}
	return stores{db.Ingest(), db.SizeNames(), db.Projection()}
}

// partitionDDL returns one cycle of partition DDL on the schema url
// selects: make the partition of the month of m (create and ATTACH, as
// tallyd makes one ahead or on demand), then detach it CONCURRENTLY and
// drop it, as retention does.
func partitionDDL(ctx context.Context, url string) (cycle func(ctx context.Context, m time.Time) error, closeDB func(), err error) {
	db, err := pgstore.Open(ctx, url, pgstore.Options{})
	if err != nil {
		return nil, nil, err
	}
	p, err := pool(ctx, url, 1)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return func(ctx context.Context, m time.Time) error {
			made, err := db.MakePartitions(ctx, m, m)
			if err != nil {
				return err
			}
			for _, name := range made {
				if _, err := p.Exec(ctx, fmt.Sprintf(`ALTER TABLE events DETACH PARTITION %q CONCURRENTLY`, name)); err != nil {
					return err
				}
				if _, err := p.Exec(ctx, fmt.Sprintf(`DROP TABLE %q`, name)); err != nil {
					return err
				}
			}
			return nil
		}, func() {
			p.Close()
			db.Close()
		}, nil
}

// openUsage opens the product's PostgreSQL store on url (already
// migrated) as the usage phase needs it: its ingest store and the usage
// service over it.
func openUsage(ctx context.Context, url string) (ingest.Store, *usage.Service, func(), error) {
	db, err := pgstore.Open(ctx, url, pgstore.Options{})
	if err != nil {
		return nil, nil, nil, err
	}
	svc, err := usage.New(db.Ingest())
	if err != nil {
		db.Close()
		return nil, nil, nil, err
	}
	return db.Ingest(), svc, db.Close, nil
}

// unpartition turns the events table of the migrated, empty schema url
// selects into one plain table, as BenchmarkStoreUnpartitioned's schemas
// have it (pgtest.Unpartition).
func unpartition(ctx context.Context, url string) error {
	return pgtest.Unpartition(ctx, url)
}
