package ingesthttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/ingesthttp"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/route"
	"github.com/tallyhq/tally/store/memstore"
)

// A program embedding tally mounts the ingestion routes on its own mux,
// with its own authentication around each route's handler and in
// CallerFrom.
func Example() {
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
	h, err := ingesthttp.New(svc, proj, ingesthttp.Options{
		CallerFrom: func(r *http.Request) (ingest.Caller, bool) {
			if r.Header.Get("Authorization") != "Bearer s3cret" {
				return ingest.Caller{}, false
			}
			return ingest.Caller{Credential: "collector", Platform: "openstack", Cloud: "os-demo"}, true
		},
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	// Mount every route; a real program wraps rt.Handler with authentication
	// that admits rt.Roles.
	route.Mount(mux, h.Routes(), func(rt route.Route) http.Handler { return rt.Handler })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	body := `[{"event_id":"e1","timestamp":"2026-03-01T12:00:00Z","event_type":"volume.create.end","platform":"openstack","cloud":"os-demo","resource_type":"volume","resource_id":"vol-1","project_id":"p1","payload":{"state":"available","size":{"size_gb":10,"type":"ssd"}}},` +
		`{"event_id":"e2","timestamp":"2026-03-01T12:00:00Z","event_type":"volume.create.end","platform":"openstack","cloud":"os-other","resource_type":"volume","resource_id":"vol-2","project_id":"p1","payload":{"state":"available","size":{"size_gb":10,"type":"ssd"}}}]`
	req, _ := http.NewRequest("POST", srv.URL+"/api/v1/events", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Print(resp.StatusCode, " ", string(b))
	// Output:
	// 200 {"accepted":1,"duplicates":0,"rejected":[{"index":1,"event_id":"e2","reason":"scope: /cloud: scope: cloud \"os-other\" is outside this credential's openstack/os-demo"}]}
}

// Send events through the Go client: each item is validated locally, the
// valid ones go gzip-compressed in requests of at most 1000, and every item
// comes back with what became of it, at its index.
func ExampleClient() {
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
	h, err := ingesthttp.New(svc, proj, ingesthttp.Options{
		CallerFrom: func(r *http.Request) (ingest.Caller, bool) {
			return ingest.Caller{Credential: "collector", Platform: "openstack", Cloud: "os-demo"}, r.Header.Get("Authorization") == "Bearer s3cret"
		},
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	route.Mount(mux, h.Routes(), func(rt route.Route) http.Handler { return rt.Handler })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	c, err := ingesthttp.NewClient(srv.URL, ingesthttp.ClientOptions{Token: "s3cret"})
	if err != nil {
		panic(err)
	}
	vol := func(id, cloud string) []byte {
		return []byte(`{"event_id":"` + id + `","timestamp":"2026-03-01T12:00:00Z","event_type":"volume.create.end","platform":"openstack","cloud":"` + cloud +
			`","resource_type":"volume","resource_id":"vol-` + id + `","project_id":"p1","payload":{"state":"available","size":{"size_gb":10,"type":"ssd"}}}`)
	}
	res, err := c.SendRaw(context.Background(), [][]byte{
		vol("e1", "os-demo"),
		vol("e1", "os-demo"),  // the same (event_id, timestamp) again
		vol("e2", "os-other"), // outside the credential's scope
		[]byte(`[]`),          // not an event: never sent
	})
	if err != nil {
		panic(err)
	}
	for i, it := range res.Items {
		line := fmt.Sprintf("%d %s %q", i, it.Status, it.EventID)
		if it.Reason != "" {
			line += ": " + it.Reason
		}
		fmt.Println(line)
	}
	// Output:
	// 0 accepted "e1"
	// 1 duplicate "e1"
	// 2 rejected "e2": scope: /cloud: scope: cloud "os-other" is outside this credential's openstack/os-demo
	// 3 invalid "": schema: : type: the item must be a JSON object, not an array
}

// Follow the lifecycle feed through the Go client: every stored event once,
// in feed order, each read long-polling and resuming from the last cursor,
// retried with backoff when the server is unavailable. Keep the last
// Position to resume after a restart.
func ExampleClient_Follow() {
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
	h, err := ingesthttp.New(svc, proj, ingesthttp.Options{
		CallerFrom: func(r *http.Request) (ingest.Caller, bool) {
			return ingest.Caller{Credential: "collector", Platform: "openstack", Cloud: "os-demo"}, r.Header.Get("Authorization") == "Bearer s3cret"
		},
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	route.Mount(mux, h.Routes(), func(rt route.Route) http.Handler { return rt.Handler })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	c, err := ingesthttp.NewClient(srv.URL, ingesthttp.ClientOptions{Token: "s3cret"})
	if err != nil {
		panic(err)
	}
	vol := func(id, state string) []byte {
		return []byte(`{"event_id":"` + id + `","timestamp":"2026-03-01T12:00:0` + id[1:] + `Z","event_type":"volume.update","platform":"openstack","cloud":"os-demo",` +
			`"resource_type":"volume","resource_id":"vol-1","project_id":"p1","payload":{"state":"` + state + `","size":{"size_gb":10,"type":"ssd"}}}`)
	}
	// A batch's events come oldest first; e2, sent after e3 in a batch of
	// its own, is older than what was stored: late.
	for _, batch := range [][][]byte{{vol("e3", "in-use"), vol("e1", "available")}, {vol("e2", "creating")}} {
		if _, err := c.SendRaw(context.Background(), batch); err != nil {
			panic(err)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := 0
	err = c.Follow(ctx, ingest.FeedQuery{FeedFilter: ingest.FeedFilter{ResourceType: "volume"}}, func(it ingest.FeedItem) error {
		fmt.Println(it.Event.EventID, it.Event.Payload.State, "late:", it.Late)
		if seen++; seen == 3 {
			cancel() // a real follower runs until it is stopped
		}
		return nil
	})
	fmt.Println(err)
	// Output:
	// e1 available late: false
	// e3 in-use late: false
	// e2 creating late: true
	// context canceled
}

// Read through the Go client: AllEvents pages through GET /api/v1/events by
// its cursors (here one event a page), and Resource reads one resource with
// the start of its history.
func ExampleClient_AllEvents() {
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
	h, err := ingesthttp.New(svc, proj, ingesthttp.Options{
		CallerFrom: func(r *http.Request) (ingest.Caller, bool) {
			return ingest.Caller{Credential: "collector", Platform: "openstack", Cloud: "os-demo"}, r.Header.Get("Authorization") == "Bearer s3cret"
		},
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	route.Mount(mux, h.Routes(), func(rt route.Route) http.Handler { return rt.Handler })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	c, err := ingesthttp.NewClient(srv.URL, ingesthttp.ClientOptions{Token: "s3cret"})
	if err != nil {
		panic(err)
	}
	vol := func(id, state string) []byte {
		return []byte(`{"event_id":"` + id + `","timestamp":"2026-03-01T12:00:0` + id[1:] + `Z","event_type":"volume.update","platform":"openstack","cloud":"os-demo",` +
			`"resource_type":"volume","resource_id":"vol-1","project_id":"p1","payload":{"state":"` + state + `","size":{"size_gb":10,"type":"ssd"}}}`)
	}
	ctx := context.Background()
	if _, err := c.SendRaw(ctx, [][]byte{vol("e1", "creating"), vol("e2", "available"), vol("e3", "in-use")}); err != nil {
		panic(err)
	}
	for e, err := range c.AllEvents(ctx, ingest.EventFilter{Cloud: "os-demo", Limit: 1}) {
		if err != nil {
			panic(err)
		}
		fmt.Println(e.Event.EventID, e.Event.Payload.State)
	}
	d, err := c.Resource(ctx, projection.Key{Cloud: "os-demo", ResourceType: "volume", ResourceID: "vol-1"})
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Resource.ResourceID, d.Resource.State, len(d.Events), "events")
	// Output:
	// e1 creating
	// e2 available
	// e3 in-use
	// vol-1 in-use 3 events
}
