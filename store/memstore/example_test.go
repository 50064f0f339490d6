package memstore_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/store"
	"github.com/tallyhq/tally/store/memstore"
)

// The in-memory store serves every area of the library at once; it starts
// with the five seeded size schemas.
func Example() {
	st := memstore.New(memstore.Options{})
	ctx := context.Background()
	rts, _ := st.ResourceTypes(ctx)
	for _, rt := range rts {
		fmt.Println(rt.Platform, rt.ResourceType)
	}
	_, err := st.Resource(ctx, ingest.ResourceKey{Cloud: "c", ResourceType: "volume", ResourceID: "v"})
	fmt.Println(errors.Is(err, store.ErrNotFound))
	// Output:
	// openstack floating_ip
	// openstack image
	// openstack instance
	// openstack loadbalancer
	// openstack volume
	// true
}
