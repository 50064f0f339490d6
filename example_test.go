package tally_test

import (
	"context"
	"fmt"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/store/memstore"
)

// Both contracts on one in-memory database, each on the store it hands out
// for its area: a lifecycle event ingested and folded into the projection,
// and a condition counted then resolved.
func Example() {
	ctx := context.Background()
	db, _ := memstore.New(memstore.Options{})

	ingestion, _ := ingest.New(db.Ingest(), ingest.Options{})
	res, _ := ingestion.Ingest(ctx, ingest.Caller{Credential: "example"}, [][]byte{
		[]byte(`{"event_id":"e1","timestamp":"2026-03-01T12:00:00Z","event_type":"compute.instance.create.end","platform":"openstack","cloud":"os-demo","resource_type":"instance","resource_id":"vm-1","project_id":"p1","payload":{"state":"active","size":{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"}}}`),
	})
	resources, _ := projection.New(db.Projection(), ingestion)
	page, _ := resources.List(ctx, projection.Filter{})
	fmt.Println("accepted", res.Accepted, "→", page.Items[0].ResourceID, page.Items[0].State)

	correlation, _ := correlate.New(db.Correlate(), correlate.Options{})
	caller := correlate.Caller{Organization: "org", User: "alice"}
	for _, p := range []string{
		`{"category":"connection","action":"ping","severity":"error","correlationKey":"db-1/unreachable"}`,
		`{"category":"connection","action":"ping","severity":"error","correlationKey":"db-1/unreachable"}`,
		`{"category":"connection","action":"ping","severity":"success","correlationKey":"db-1/unreachable","resolvedAt":"2026-03-01T12:05:00Z"}`,
	} {
		payload, _ := correlate.DecodePayload([]byte(p))
		ev, d, _ := correlation.Create(ctx, caller, payload)
		fmt.Println(d, *ev.OccurrenceCount)
	}
	// Output:
	// accepted 1 → vm-1 active
	// created 1
	// incremented 2
	// resolved 2
}
