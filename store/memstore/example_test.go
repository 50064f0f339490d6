package memstore_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/store"
	"github.com/tallyhq/tally/store/memstore"
)

// One in-memory database hands out the store of each area of the library
// (Ingest, Projection, Correlate, SizeNames); it starts with the five seeded size
// schemas.
func Example() {
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		panic(err)
	}
	st := db.Ingest()
	ctx := context.Background()
	rts, _ := st.ResourceTypes(ctx)
	for _, rt := range rts {
		fmt.Println(rt.Platform, rt.ResourceType)
	}
	_, err = db.Projection().Get(ctx, projection.Key{Cloud: "c", ResourceType: "volume", ResourceID: "v"})
	fmt.Println(errors.Is(err, store.ErrNotFound))
	// Output:
	// openstack floating_ip
	// openstack image
	// openstack instance
	// openstack loadbalancer
	// openstack volume
	// true
}
