package pgstore_test

import (
	"context"
	"log"
	"os"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/store/pgstore"
)

// Migrate the schema, open the store, and build the services on it. (This
// example needs a database, so it is compiled but not run by go test; the
// same calls run in this package's tests against a real server.)
func Example() {
	ctx := context.Background()
	url := os.Getenv("TALLY_DATABASE_URL") // e.g. postgres://tally@db:5432/tally?sslmode=disable
	if _, err := pgstore.Migrate(ctx, url); err != nil {
		log.Fatal(err)
	}
	st, err := pgstore.Open(ctx, url)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	ingestion, err := ingest.New(st, ingest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	correlation, err := correlate.New(st, correlate.Options{})
	if err != nil {
		log.Fatal(err)
	}
	_, _ = ingestion, correlation
}
