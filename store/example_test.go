package store_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/store"
	"github.com/tallyhq/tally/store/memstore"
)

// A row that does not exist is an error matching ErrNotFound, whichever
// store and whichever area it comes from; test it with errors.Is.
func ExampleErrNotFound() {
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		panic(err)
	}
	svc, err := ingest.New(db.Ingest(), ingest.Options{})
	if err != nil {
		panic(err)
	}
	_, err = svc.ResourceType(context.Background(), "openstack", "no-such-type")
	fmt.Println(errors.Is(err, store.ErrNotFound))
	_, err = svc.ResourceType(context.Background(), "openstack", "volume") // seeded
	fmt.Println(err)
	// Output:
	// true
	// <nil>
}
