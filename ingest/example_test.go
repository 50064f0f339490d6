package ingest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/sizenames"
	"github.com/tallyhq/tally/store/memstore"
)

func Example() {
	ctx := context.Background()
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		panic(err)
	}
	// A reconciliation run stored the names of cloud c1's volume types.
	_ = sizenames.ReplaceCloud(ctx, db.SizeNames(), "c1", []sizenames.Row{
		{Cloud: "c1", ResourceType: "volume", Member: "type", Value: "7a8b9c0d-1e2f-4a3b-8c4d-5e6f70819203", Name: "ssd"},
	})
	svc, err := ingest.New(db.Ingest(), ingest.Options{})
	if err != nil {
		panic(err)
	}
	body := `[
	  {"event_id":"e1","timestamp":"2026-03-01T12:00:00Z","event_type":"volume.create.end","platform":"openstack","cloud":"c1",
	   "resource_type":"volume","resource_id":"v1","project_id":"p1",
	   "payload":{"state":"available","size":{"size_gb":100,"type":"7a8b9c0d-1e2f-4a3b-8c4d-5e6f70819203"},"provider":{"oslo_event_type":"volume.create.end"}}},
	  {"event_id":"e1","timestamp":"2026-03-01T12:00:00Z","event_type":"volume.create.end","platform":"openstack","cloud":"c1",
	   "resource_type":"volume","resource_id":"v1","project_id":"p1","payload":{"state":"available","size":{"size_gb":100,"type":"ssd"}}},
	  {"event_id":"e2","timestamp":"2026-03-01T12:00:00Z","event_type":"volume.create.end","platform":"openstack","cloud":"c1",
	   "resource_type":"volume","resource_id":"v2","project_id":"p1","payload":{"state":"available","size":{"size_gb":0,"type":"ssd"}}},
	  42
	]`
	items, err := ingest.SplitBatch([]byte(body))
	if err != nil {
		panic(err)
	}
	caller := ingest.Caller{Credential: "collector-c1", Platform: "openstack", Cloud: "c1"}
	res, err := svc.Ingest(ctx, caller, items)
	if err != nil {
		panic(err)
	}
	fmt.Println("accepted", res.Accepted, "duplicates", res.Duplicates)
	for _, r := range res.Rejected {
		fmt.Printf("item %d (%q): %s\n", r.Index, r.EventID, r.Reason)
	}
	v1, _ := svc.ResourceEvents(ctx, projection.Key{Cloud: "c1", ResourceType: "volume", ResourceID: "v1"})
	fmt.Printf("stored size %s, provider %s\n", v1.Items[0].Event.Payload.Size, v1.Items[0].Event.Payload.Provider)
	// Output:
	// accepted 1 duplicates 1
	// item 2 ("e2"): size_schema: /payload/size/size_gb: exclusiveMinimum: must be greater than 0, is 0
	// item 3 (""): schema: : type: the item must be a JSON object, not a number
	// stored size {"size_gb":100,"type":"ssd"}, provider {"oslo_event_type":"volume.create.end","size_as_reported":{"type":"7a8b9c0d-1e2f-4a3b-8c4d-5e6f70819203"}}
}

// ExampleService_Feed follows the lifecycle feed: every stored event once,
// in the order it became readable, a backdated one marked late, and the
// cursor to resume from.
func ExampleService_Feed() {
	ctx := context.Background()
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		panic(err)
	}
	svc, err := ingest.New(db.Ingest(), ingest.Options{})
	if err != nil {
		panic(err)
	}
	event := func(id, ts, typ, state string) []byte {
		return []byte(`{"event_id":"` + id + `","timestamp":"` + ts + `","event_type":"` + typ + `","platform":"openstack","cloud":"c1",` +
			`"resource_type":"volume","resource_id":"v1","project_id":"p1","payload":{"state":"` + state + `","size":{"size_gb":10,"type":"ssd"}}}`)
	}
	caller := ingest.Caller{Credential: "collector", Platform: "openstack", Cloud: "c1"}
	if _, err := svc.Ingest(ctx, caller, [][]byte{event("e1", "2026-03-01T12:00:00Z", "volume.create.end", "available")}); err != nil {
		panic(err)
	}
	page, err := svc.Feed(ctx, ingest.FeedQuery{})
	if err != nil {
		panic(err)
	}
	for _, it := range page.Items {
		fmt.Println(it.Event.EventID, it.Late)
	}
	// A late notification: its timestamp is before the resource's last event.
	if _, err := svc.Ingest(ctx, caller, [][]byte{event("e0", "2026-03-01T11:00:00Z", "volume.update.end", "creating")}); err != nil {
		panic(err)
	}
	next, err := svc.Feed(ctx, ingest.FeedQuery{After: page.NextCursor, Wait: time.Second})
	if err != nil {
		panic(err)
	}
	for _, it := range next.Items {
		fmt.Println(it.Event.EventID, it.Late)
	}
	fmt.Println(next.CaughtUp)
	// Output:
	// e1 false
	// e0 true
	// true
}
