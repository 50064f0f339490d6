package reconcile_test

import (
	"context"
	"fmt"
	"log"
	"testing"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/reconcile"
	"github.com/tallyhq/tally/store/memstore"
)

const example = `{
  "platform": "openstack",
  "observed_at": "2026-03-01T12:00:00Z",
  "complete_types": ["instance", "volume"],
  "resources": [
    {"resource_type": "instance", "resource_id": "vm-1", "project_id": "p1", "state": "active",
     "size": {"vcpus": 2, "ram_gb": 4, "disk_gb": 20, "flavor": "m1.small"}},
    {"resource_type": "volume", "resource_id": "vol-1", "project_id": "p1", "state": "in-use",
     "size": {"size_gb": 100, "type": "7a8b9c0d"}}
  ],
  "size_names": [{"resource_type": "volume", "member": "type", "value": "7a8b9c0d", "name": "ssd"}]
}`

// newService is a Service on a new in-memory store.
func newService(tb testing.TB) *reconcile.Service {
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	ing, err := ingest.New(db.Ingest(), ingest.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	rec, err := reconcile.New(ing, db.Projection(), db.Reconcile(), reconcile.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return rec
}

// A run on the in-memory store: the first creates both resources (the
// volume under its type's name), the same observation again changes
// nothing.
func Example() {
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	ing, err := ingest.New(db.Ingest(), ingest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	rec, err := reconcile.New(ing, db.Projection(), db.Reconcile(), reconcile.Options{})
	if err != nil {
		log.Fatal(err)
	}
	obs, err := reconcile.Decode([]byte(example))
	if err != nil {
		log.Fatal(err)
	}
	for range 2 {
		out, err := rec.Run(context.Background(), "reconciler", "os-a", obs)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("run %d: created %d, unchanged %d\n", out.RunID, out.Created, out.Unchanged)
	}
	vol, err := db.Ingest().Events(context.Background(), ingest.EventQuery{ResourceID: "vol-1"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(vol[0].Event.EventType, string(vol[0].Event.Payload.Size), string(vol[0].Event.Payload.Provider))
	// Output:
	// run 1: created 2, unchanged 0
	// run 2: created 0, unchanged 2
	// sync.create {"size_gb":100,"type":"ssd"} {"size_as_reported":{"type":"7a8b9c0d"}}
}
