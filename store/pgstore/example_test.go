package pgstore_test

import (
	"context"
	"log"
	"os"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/store/pgstore"
)

// Open the database once, migrate its schema, and build each area's
// service on the store the DB hands out for it. (This example needs a
// database, so it is compiled but not run by go test; the same calls run in
// this package's tests against a real server.)
func Example() {
	ctx := context.Background()
	url := os.Getenv("TALLY_DATABASE_URL") // e.g. postgres://tally@db:5432/tally?sslmode=disable
	db, err := pgstore.Open(ctx, url, pgstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	ingestion, err := ingest.New(db.Ingest(), ingest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	correlation, err := correlate.New(db.Correlate(), correlate.Options{})
	if err != nil {
		log.Fatal(err)
	}
	_, _ = ingestion, correlation
}
