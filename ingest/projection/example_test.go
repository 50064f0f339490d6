package projection_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/store/memstore"
)

// The projection service reads the rows the ingest store keeps: a volume
// created, then deleted in a later batch, lists as deleted, and its read
// holds its history in fold order.
func Example() {
	ctx := context.Background()
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		panic(err)
	}
	svc, err := ingest.New(db.Ingest(), ingest.Options{})
	if err != nil {
		panic(err)
	}
	proj, err := projection.New(db.Projection(), svc)
	if err != nil {
		panic(err)
	}
	for _, item := range []string{
		`{"event_id":"e2","timestamp":"2026-03-01T13:00:00Z","event_type":"volume.delete.end","platform":"openstack","cloud":"c1","resource_type":"volume","resource_id":"v1","project_id":"p1","payload":{}}`,
		`{"event_id":"e1","timestamp":"2026-03-01T12:00:00Z","event_type":"volume.create.end","platform":"openstack","cloud":"c1","resource_type":"volume","resource_id":"v1","project_id":"p1","payload":{"state":"available","size":{"size_gb":10,"type":"ssd"}}}`,
	} {
		if _, err := svc.Ingest(ctx, ingest.Caller{Credential: "example"}, [][]byte{[]byte(item)}); err != nil {
			panic(err)
		}
	}
	page, err := proj.List(ctx, projection.Filter{Status: projection.StatusAll})
	if err != nil {
		panic(err)
	}
	for _, r := range page.Items {
		fmt.Println(r.ResourceID, r.State, string(r.Size), r.DeletedAt.Format(time.RFC3339))
	}
	d, err := proj.Get(ctx, projection.Key{Cloud: "c1", ResourceType: "volume", ResourceID: "v1"})
	if err != nil {
		panic(err)
	}
	for _, e := range d.Events {
		fmt.Println(e.EventID, e.EventType)
	}
	// Output:
	// v1 deleted {"size_gb":10,"type":"ssd"} 2026-03-01T13:00:00Z
	// e1 volume.create.end
	// e2 volume.delete.end
}

// Fold gives the same row whatever order the history comes in: an update
// after a delete does not revive the resource.
func ExampleFold() {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ev := func(id, typ string, min int, state string) event.Event {
		e := event.Event{EventID: id, EventType: typ, Timestamp: at.Add(time.Duration(min) * time.Minute),
			Platform: "openstack", Cloud: "c1", ResourceType: "volume", ResourceID: "v1", ProjectID: "p1"}
		if state != "" {
			e.Payload.State = event.StateOf(state)
		}
		return e
	}
	r := projection.Fold([]event.Event{
		ev("u", "volume.attach.end", 2, "in-use"),
		ev("d", "volume.delete.end", 1, ""),
		ev("c", "volume.create.end", 0, "available"),
	})
	fmt.Println(r.State, r.LastEventID)
	// Output:
	// deleted u
}
