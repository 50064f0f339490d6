package ingesthttp_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/ingesthttp"
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
	h, err := ingesthttp.New(svc, ingesthttp.Options{
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
