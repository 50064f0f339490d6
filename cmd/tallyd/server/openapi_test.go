package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/route"
	"github.com/tallyhq/tally/store/pgstore"
)

// The OpenAPI document is checked against the live handlers with
// kin-openapi's openapi3filter ("The contract test validates live
// requests and responses with kin-openapi's openapi3filter on both
// stores"): every route the handler serves is documented, every documented
// operation is served, and every documented status of every operation is
// produced by a real request on both stores. The request is found by the
// document's router; a request answered 2xx validates against the
// operation (parameters, body, security); every answer validates against
// the documented response (status, content type, required headers, body
// schema).

// openAPIDoc is the document as kin-openapi loads it, with its router.
type openAPIDoc struct {
	doc    *openapi3.T
	router routers.Router
}

func loadOpenAPI(t *testing.T) *openAPIDoc {
	t.Helper()
	doc := loadKinOpenAPI(t)
	r, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatalf("router: %v", err)
	}
	return &openAPIDoc{doc: doc, router: r}
}

// operation is one documented METHOD path with its documented statuses.
type operation struct {
	method, path string
	statuses     []string
}

func (o operation) key() string { return o.method + " " + o.path }

func (d *openAPIDoc) operations(t *testing.T) []operation {
	t.Helper()
	var ops []operation
	for _, path := range d.doc.Paths.InMatchingOrder() {
		for method, op := range d.doc.Paths.Find(path).Operations() {
			if op.Responses == nil || op.Responses.Len() == 0 {
				t.Errorf("%s %s documents no response", method, path)
				continue
			}
			var statuses []string
			for status := range op.Responses.Map() {
				statuses = append(statuses, status)
			}
			slices.Sort(statuses)
			ops = append(ops, operation{method: method, path: path, statuses: statuses})
		}
	}
	slices.SortFunc(ops, func(a, b operation) int { return strings.Compare(a.key(), b.key()) })
	return ops
}

// requestInput finds r's route in the document (it must be op) and reads
// its body so that it can be validated and served.
func (d *openAPIDoc) requestInput(t *testing.T, op operation, r *http.Request) *openapi3filter.RequestValidationInput {
	t.Helper()
	rt, params, err := d.router.FindRoute(r)
	if err != nil {
		t.Fatalf("%s %s: the document's router finds no operation: %v", r.Method, r.URL, err)
	}
	if rt.Method+" "+rt.Path != op.key() {
		t.Fatalf("%s %s: the document's router finds %s %s, want %s", r.Method, r.URL, rt.Method, rt.Path, op.key())
	}
	return &openapi3filter.RequestValidationInput{
		Request:    r,
		PathParams: params,
		Route:      rt,
		Options: &openapi3filter.Options{
			// The request is served as sent: a documented default put into
			// it (pageSize beside a client's pagesize) would change it.
			SkipSettingDefaults: true,
			// The bearer scheme: the document says a token is sent; the
			// server decides whether it is known (401) and has the role
			// (403).
			AuthenticationFunc: func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
				if in.SecurityScheme.Type == "http" && in.SecurityScheme.Scheme == "bearer" &&
					!strings.HasPrefix(in.RequestValidationInput.Request.Header.Get("Authorization"), "Bearer ") {
					return fmt.Errorf("no bearer token")
				}
				return nil
			},
		},
	}
}

// validateRequest validates a request (whose body, if any, is in memory)
// against its operation, leaving the body readable for the handler.
func validateRequest(t *testing.T, in *openapi3filter.RequestValidationInput) {
	t.Helper()
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		t.Errorf("the request, answered 2xx, does not validate against the document: %v", err)
	}
}

// check validates one live answer against the documented response.
func (d *openAPIDoc) check(t *testing.T, in *openapi3filter.RequestValidationInput, status string, w *httptest.ResponseRecorder) {
	t.Helper()
	if got := fmt.Sprint(w.Code); got != status {
		t.Fatalf("status %s, documented %s; body %s", got, status, w.Body)
	}
	resp := in.Route.Operation.Responses.Status(w.Code)
	if resp == nil || resp.Value == nil {
		t.Fatalf("status %s is not documented", status)
	}
	if len(resp.Value.Content) == 0 && w.Body.Len() != 0 {
		t.Errorf("documented without content, answered %q", w.Body)
	}
	err := openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 w.Code,
		Header:                 w.Header(),
		Body:                   io.NopCloser(bytes.NewReader(w.Body.Bytes())),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true},
	})
	if err != nil {
		t.Errorf("the answer does not validate against the document: %v\nbody: %s", err, w.Body)
	}
}

// checkComponent validates an answer no operation documents (404 of an
// unknown path, 405 of a documented path's other methods) against a
// response of the document's components.
func (d *openAPIDoc) checkComponent(t *testing.T, name string, w *httptest.ResponseRecorder) {
	t.Helper()
	resp := d.doc.Components.Responses[name]
	if resp == nil || resp.Value == nil {
		t.Fatalf("components.responses.%s is not documented", name)
	}
	for h, hv := range resp.Value.Headers {
		if hv.Value.Required && w.Header().Get(h) == "" {
			t.Errorf("documented required header %s is missing", h)
		}
	}
	ct := w.Header().Get("Content-Type")
	mt := resp.Value.Content.Get(ct)
	if mt == nil {
		t.Fatalf("Content-Type %q is not documented by components.responses.%s", ct, name)
	}
	var v any
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, w.Body)
	}
	if err := mt.Schema.Value.VisitJSON(v); err != nil {
		t.Errorf("body does not match components.responses.%s: %v\nbody: %s", name, err, w.Body)
	}
}

// contractEnv is what a scenario builds its request with.
type contractEnv struct {
	t *testing.T
	h *Handler
	// broken is a handler whose store is unreachable (nil when the store
	// cannot fail on demand).
	broken http.Handler
}

const (
	tIngest = "t-ingest-token-01"
	tAdmin  = "t-admin-token-001"
	tRead   = "t-read-token-0001"
	tEvents = "t-events-token-01"
	tSync   = "t-reconcile-token"

	testMaxBody = 64 << 10
	unknownID   = "0190aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee"
)

func (e contractEnv) req(method, target, token, body string) *http.Request {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	// Sent to a base URL with a host and port, as a client sends it: the
	// document's router must match it whatever the base (the document
	// names no server, so kin-openapi matches any host).
	r := httptest.NewRequest(method, "http://127.0.0.1:8080"+target, rd)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

func (e contractEnv) serve(r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	return w
}

// createEvent records a correlated event and returns its id.
func (e contractEnv) createEvent() string {
	w := e.serve(e.req("POST", "/api/events", tEvents, `{"category":"c","action":"a"}`))
	if w.Code != 201 {
		e.t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	var ev struct{ ID string }
	if err := json.Unmarshal(w.Body.Bytes(), &ev); err != nil {
		e.t.Fatal(err)
	}
	return ev.ID
}

const validEvent = `{"event_id":"e-1","timestamp":"2026-03-01T12:00:00Z","event_type":"widget.create.end",` +
	`"platform":"openstack","cloud":"os-a","resource_type":"widget","resource_id":"w-1","project_id":"p-1",` +
	`"payload":{"state":"active","size":{"n":1}}}`

const validObservation = `{"platform":"openstack","observed_at":"2026-03-01T12:00:00Z","complete_types":["instance"],` +
	`"resources":[{"resource_type":"instance","resource_id":"vm-1","project_id":"p-1","state":"active",` +
	`"size":{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"}}],` +
	`"size_names":[{"resource_type":"volume","member":"type","value":"id-ssd","name":"ssd"}]}`

// scenario produces one documented status of one operation. respond, when
// set, serves the request itself (on another handler).
type scenario struct {
	name    string
	request func(e contractEnv) *http.Request
	respond func(e contractEnv, r *http.Request) *httptest.ResponseRecorder
	// outsideDocument, when set, says why a request answered 2xx is not
	// validated against the document: the server tolerates more than the
	// document asks of a client.
	outsideDocument string
}

func fixed(method, target, token, body string) func(contractEnv) *http.Request {
	return func(e contractEnv) *http.Request { return e.req(method, target, token, body) }
}

// scenarios are keyed "METHOD path status". 401, 403, 408, 413, 415 and 503 are generic
// (see genericScenario).
var scenarios = map[string][]scenario{
	"POST /api/v1/events 200": {
		{name: "one event", request: fixed("POST", "/api/v1/events", tIngest, validEvent)},
		{name: "a batch with a refused item", request: fixed("POST", "/api/v1/events", tIngest, `[`+validEvent+`,{"event_id":"x"},7]`),
			outsideDocument: "items that are not canonical events are refused per item, in a 200"},
		{name: "empty batch", request: fixed("POST", "/api/v1/events", tIngest, `[]`)},
	},
	"POST /api/v1/events 400": {{name: "not JSON", request: fixed("POST", "/api/v1/events", tIngest, `not json`)}},
	"POST /api/v1/events 413": {{name: "1001 items", request: fixed("POST", "/api/v1/events", tIngest, "["+strings.Repeat("{},", 1000)+"{}]")}},
	"POST /api/v1/events 500": {{
		name:    "store failure",
		request: fixed("POST", "/api/v1/events", tIngest, validEvent),
		respond: func(e contractEnv, r *http.Request) *httptest.ResponseRecorder {
			if e.broken == nil {
				// The in-memory store cannot fail on demand (a cancelled
				// client is no failure: it gets no answer).
				return nil
			}
			w := httptest.NewRecorder()
			e.broken.ServeHTTP(w, r)
			return w
		},
	}},
	"POST /api/v1/clouds/{cloud}/sync 200": {
		{name: "an observation", request: fixed("POST", "/api/v1/clouds/os-a/sync", tSync, validObservation)},
		{name: "an empty observation", request: fixed("POST", "/api/v1/clouds/os-a/sync", tSync, `{"platform":"openstack","observed_at":"2026-03-01T12:00:00Z"}`)},
	},
	"POST /api/v1/clouds/{cloud}/sync 400": {
		{name: "not JSON", request: fixed("POST", "/api/v1/clouds/os-a/sync", tSync, `not json`)},
		{name: "every rule", request: fixed("POST", "/api/v1/clouds/os-a/sync", tSync, `{"platform":"openstack","observed_at":"2026-03-01T12:00:00Z","resources":[{"resource_type":"instance"}]}`)},
	},
	"POST /api/v1/clouds/{cloud}/sync 403": {
		{name: "another cloud than the credential's", request: fixed("POST", "/api/v1/clouds/os-b/sync", tSync, validObservation)},
		{name: "an ingest token", request: fixed("POST", "/api/v1/clouds/os-a/sync", tIngest, validObservation)},
	},
	"POST /api/v1/clouds/{cloud}/sync 500": {{
		name:    "store failure",
		request: fixed("POST", "/api/v1/clouds/os-a/sync", tSync, validObservation),
		respond: func(e contractEnv, r *http.Request) *httptest.ResponseRecorder {
			if e.broken == nil {
				return nil
			}
			w := httptest.NewRecorder()
			e.broken.ServeHTTP(w, r)
			return w
		},
	}},
	"GET /api/v1/sync-runs 200": {
		{name: "every run", request: func(e contractEnv) *http.Request {
			if w := e.serve(e.req("POST", "/api/v1/clouds/os-a/sync", tSync, validObservation)); w.Code != 200 {
				e.t.Fatalf("sync: %d %s", w.Code, w.Body)
			}
			return e.req("GET", "/api/v1/sync-runs", tRead, "")
		}},
		{name: "one cloud, one per page", request: fixed("GET", "/api/v1/sync-runs?cloud=os-a&limit=1", tAdmin, "")},
	},
	"GET /api/v1/sync-runs 400": {
		{name: "malformed cursor", request: fixed("GET", "/api/v1/sync-runs?cursor=%21%21", tRead, "")},
		{name: "unknown parameter", request: fixed("GET", "/api/v1/sync-runs?platform=openstack", tRead, "")},
	},
	"GET /api/v1/rejected-events 200": {
		{name: "first page", request: fixed("GET", "/api/v1/rejected-events?limit=5", tAdmin, "")},
		{name: "window", request: fixed("GET", "/api/v1/rejected-events?from=2026-01-01T00:00:00Z&to=2030-01-01T00:00:00Z", tAdmin, "")},
	},
	"GET /api/v1/rejected-events 400": {
		{name: "malformed cursor", request: fixed("GET", "/api/v1/rejected-events?cursor=%21%21", tAdmin, "")},
		{name: "limit out of range", request: fixed("GET", "/api/v1/rejected-events?limit=1001", tAdmin, "")},
	},
	"GET /api/v1/audit 200": {{name: "scope violations", request: fixed("GET", "/api/v1/audit?action=events.scope_violation", tAdmin, "")}},
	"GET /api/v1/audit 400": {{name: "bad from", request: fixed("GET", "/api/v1/audit?from=yesterday", tAdmin, "")}},
	"GET /api/v1/resources 200": {
		{name: "every resource", request: fixed("GET", "/api/v1/resources", tRead, "")},
		{name: "as the events up to an instant make them", request: fixed("GET", "/api/v1/resources?at=2026-03-02T00:00:00Z&cloud=os-a&status=all&limit=10", tRead, "")},
		{name: "the vertical slice's walk (status=all)", request: fixed("GET", "/api/v1/resources?cloud=os-a&project_id=p1&resource_type=instance&status=all&limit=1000", tRead, "")},
		{name: "status deleted", request: fixed("GET", "/api/v1/resources?status=deleted", tRead, "")},
		{name: "filtered and alive", request: func(e contractEnv) *http.Request {
			if w := e.serve(e.req("POST", "/api/v1/events", tIngest, validEvent)); w.Code != 200 {
				e.t.Fatalf("ingest: %d %s", w.Code, w.Body)
			}
			return e.req("GET", "/api/v1/resources?cloud=os-a&resource_type=widget&alive_at=2026-03-02T00:00:00Z&limit=1", tAdmin, "")
		}},
	},
	"GET /api/v1/resources 400": {
		{name: "bad alive_at", request: fixed("GET", "/api/v1/resources?alive_at=tomorrow", tRead, "")},
		{name: "malformed cursor", request: fixed("GET", "/api/v1/resources?cursor=%21%21", tRead, "")},
		{name: "unknown status", request: fixed("GET", "/api/v1/resources?status=gone", tRead, "")},
		{name: "at with alive_at", request: fixed("GET", "/api/v1/resources?at=2026-03-02T00:00:00Z&alive_at=2026-03-02T00:00:00Z", tRead, "")},
		{name: "unknown parameter", request: fixed("GET", "/api/v1/resources?fields=x", tRead, "")},
	},
	"GET /api/v1/resources/{cloud}/{resource_type}/{resource_id} 200": {{name: "with its history", request: func(e contractEnv) *http.Request {
		if w := e.serve(e.req("POST", "/api/v1/events", tIngest, validEvent)); w.Code != 200 {
			e.t.Fatalf("ingest: %d %s", w.Code, w.Body)
		}
		return e.req("GET", "/api/v1/resources/os-a/widget/w-1", tRead, "")
	}}},
	"GET /api/v1/events 200": {
		{name: "every stored event", request: fixed("GET", "/api/v1/events", tRead, "")},
		{name: "the Reporting API's filters", request: fixed("GET", "/api/v1/events?cloud=os-a&resource_type=widget&resource_id=w-1&project_id=p1&event_type=widget.create&source=collector&from=2026-01-01T00:00:00Z&to=2027-01-01T00:00:00Z&limit=10", tAdmin, "")},
	},
	"GET /api/v1/events 400": {
		{name: "bad source", request: fixed("GET", "/api/v1/events?source=hand", tRead, "")},
		{name: "unknown parameter", request: fixed("GET", "/api/v1/events?sort=asc", tRead, "")},
	},
	"GET /api/v1/resources/{cloud}/{resource_type}/{resource_id}/events 200": {{name: "the vertical slice's history read", request: func(e contractEnv) *http.Request {
		if w := e.serve(e.req("POST", "/api/v1/events", tIngest, validEvent)); w.Code != 200 {
			e.t.Fatalf("ingest: %d %s", w.Code, w.Body)
		}
		return e.req("GET", "/api/v1/resources/os-a/widget/w-1/events", tRead, "")
	}}},
	"GET /api/v1/resources/{cloud}/{resource_type}/{resource_id}/events 400": {{name: "unknown parameter", request: fixed("GET", "/api/v1/resources/os-a/widget/w-1/events?limit=5", tRead, "")}},
	"GET /api/v1/resources/{cloud}/{resource_type}/{resource_id}/events 404": {{name: "unknown resource", request: fixed("GET", "/api/v1/resources/os-a/widget/nope/events", tRead, "")}},
	"GET /api/v1/resources/{cloud}/{resource_type}/{resource_id} 404":        {{name: "unknown resource", request: fixed("GET", "/api/v1/resources/os-a/widget/nope", tRead, "")}},
	"GET /api/v1/resources/{cloud}/{resource_type}/{resource_id}/lifecycle 200": {{name: "the timeline of a stored resource", request: func(e contractEnv) *http.Request {
		if w := e.serve(e.req("POST", "/api/v1/events", tIngest, validEvent)); w.Code != 200 {
			e.t.Fatalf("ingest: %d %s", w.Code, w.Body)
		}
		return e.req("GET", "/api/v1/resources/os-a/widget/w-1/lifecycle", tRead, "")
	}}},
	"GET /api/v1/resources/{cloud}/{resource_type}/{resource_id}/lifecycle 400": {{name: "unknown parameter", request: fixed("GET", "/api/v1/resources/os-a/widget/w-1/lifecycle?limit=5", tRead, "")}},
	"GET /api/v1/resources/{cloud}/{resource_type}/{resource_id}/lifecycle 404": {{name: "no stored event", request: fixed("GET", "/api/v1/resources/os-a/widget/nope/lifecycle", tRead, "")}},
	"GET /api/v1/projects/{cloud}/{project_id}/summary 200": {{name: "a project's month", request: func(e contractEnv) *http.Request {
		if w := e.serve(e.req("POST", "/api/v1/events", tIngest, validEvent)); w.Code != 200 {
			e.t.Fatalf("ingest: %d %s", w.Code, w.Body)
		}
		return e.req("GET", "/api/v1/projects/os-a/p-1/summary?from=2026-03-01T00:00:00Z&to=2026-04-01T00:00:00Z", tRead, "")
	}}},
	"GET /api/v1/projects/{cloud}/{project_id}/summary 400": {{name: "from and to missing", request: fixed("GET", "/api/v1/projects/os-a/p-1/summary", tRead, "")}},
	"GET /api/v1/usage 200": {
		{name: "the README's vcpu-hours by flavor", request: func(e contractEnv) *http.Request {
			if w := e.serve(e.req("POST", "/api/v1/events", tIngest, validEvent)); w.Code != 200 {
				e.t.Fatalf("ingest: %d %s", w.Code, w.Body)
			}
			return e.req("GET", "/api/v1/usage?project_id=p-1&from=2026-03-01T00:00:00Z&to=2026-04-01T00:00:00Z&group_by=size.flavor&quantity=size.vcpus&unit=hour", tRead, "")
		}},
		{name: "daily, grouped, admin role", request: fixed("GET", "/api/v1/usage?from=2026-03-01T00:00:00Z&to=2026-04-01T00:00:00Z&window=day&group_by=project_id,resource_type&limit=10", tAdmin, "")},
	},
	"GET /api/v1/usage 400": {
		{name: "from and to missing", request: fixed("GET", "/api/v1/usage", tRead, "")},
		{name: "unknown window", request: fixed("GET", "/api/v1/usage?from=2026-03-01T00:00:00Z&to=2026-04-01T00:00:00Z&window=week", tRead, "")},
		{name: "as_of not a feed cursor", request: fixed("GET", "/api/v1/usage?from=2026-03-01T00:00:00Z&to=2026-04-01T00:00:00Z&as_of=nope", tRead, "")},
	},
	"GET /api/v1/usage 422": {{name: "more than 10,000 windows", request: fixed("GET", "/api/v1/usage?from=2000-01-01T00:00:00Z&to=2040-01-01T00:00:00Z&window=day", tRead, "")}},
	"GET /api/v1/resource-types 200": {
		{name: "read role", request: fixed("GET", "/api/v1/resource-types", tRead, "")},
		{name: "admin role", request: fixed("GET", "/api/v1/resource-types", tAdmin, "")},
	},
	"GET /api/v1/resource-types/{platform}/{resource_type} 200": {{name: "seeded", request: fixed("GET", "/api/v1/resource-types/openstack/instance", tRead, "")}},
	"GET /api/v1/resource-types/{platform}/{resource_type} 404": {{name: "unknown pair", request: fixed("GET", "/api/v1/resource-types/openstack/teapot", tRead, "")}},
	"PUT /api/v1/resource-types/{platform}/{resource_type} 200": {
		{name: "new pair, bare schema", request: fixed("PUT", "/api/v1/resource-types/openstack/widget", tAdmin, `{"type":"object","required":["n"]}`)},
		{name: "the Reporting API's wrapper", request: fixed("PUT", "/api/v1/resource-types/openstack/gadget", tAdmin, `{"size_schema":{"type":"object","required":["n"]}}`)},
	},
	"PUT /api/v1/resource-types/{platform}/{resource_type} 400": {
		{name: "does not compile", request: fixed("PUT", "/api/v1/resource-types/openstack/widget", tAdmin, `{"type":12}`)},
		{name: "wrapper with another member", request: fixed("PUT", "/api/v1/resource-types/openstack/widget", tAdmin, `{"size_schema":{},"extra":1}`)},
	},
	"POST /api/events 201": {{name: "new event", request: fixed("POST", "/api/events", tEvents, `{"category":"connection","action":"fail","correlationKey":"k-201"}`)}},
	"POST /api/events 200": {{
		name: "occurrence counted",
		request: func(e contractEnv) *http.Request {
			body := `{"category":"connection","action":"fail","correlationKey":"k-200"}`
			if w := e.serve(e.req("POST", "/api/events", tEvents, body)); w.Code != 201 {
				e.t.Fatalf("first create: %d %s", w.Code, w.Body)
			}
			return e.req("POST", "/api/events", tEvents, body)
		},
	}},
	"POST /api/events 400": {
		{name: "invalid payload", request: fixed("POST", "/api/events", tEvents, `{"severity":"loud"}`)},
		{name: "Idempotency-Key disagrees", request: func(e contractEnv) *http.Request {
			r := e.req("POST", "/api/events", tEvents, `{"category":"c","action":"a","idempotencyKey":"a"}`)
			r.Header.Set("Idempotency-Key", "b")
			return r
		}},
	},
	"GET /api/events/list 200": {
		{name: "events role", request: fixed("GET", "/api/events/list?page=0&pageSize=10&order=asc", tEvents, "")},
		{name: "read role", request: fixed("GET", "/api/events/list", tRead, "")},
		{name: "Meshery UI: JSON-array filters, sort=created_at, pagesize, filter", request: fixed("GET",
			`/api/events/list?category=%5B%22istio%22%5D&severity=%5B%22error%22%5D&sort=created_at&order=desc&pagesize=15&page=0&filter=%7B%22action%22%3A%5B%22a%22%5D%7D`, tEvents, "")},
	},
	"GET /api/events/list 400": {{name: "bad order", request: fixed("GET", "/api/events/list?order=sideways", tEvents, "")}},
	"PUT /api/events/{id}/status 200": {{name: "mark read", request: func(e contractEnv) *http.Request {
		return e.req("PUT", "/api/events/"+e.createEvent()+"/status", tEvents, `{"status":"read"}`)
	}}},
	"PUT /api/events/{id}/status 400": {{name: "bad status", request: func(e contractEnv) *http.Request {
		return e.req("PUT", "/api/events/"+e.createEvent()+"/status", tEvents, `{"status":"maybe"}`)
	}}},
	"PUT /api/events/{id}/status 404": {{name: "unknown id", request: fixed("PUT", "/api/events/"+unknownID+"/status", tEvents, `{"status":"read"}`)}},
	"DELETE /api/events/{id} 204": {{name: "delete", request: func(e contractEnv) *http.Request {
		return e.req("DELETE", "/api/events/"+e.createEvent(), tEvents, "")
	}}},
	"DELETE /api/events/{id} 404": {{name: "unknown id", request: fixed("DELETE", "/api/events/"+unknownID, tEvents, "")}},
	"PUT /api/events/status 200": {{name: "bulk mark read", request: func(e contractEnv) *http.Request {
		return e.req("PUT", "/api/events/status", tEvents, `{"ids":["`+e.createEvent()+`","`+unknownID+`"],"status":"read"}`)
	}}},
	"PUT /api/events/status 400": {{name: "no status", request: fixed("PUT", "/api/events/status", tEvents, `{"ids":["`+unknownID+`"]}`)}},
	"POST /api/events/delete 200": {{name: "bulk delete", request: func(e contractEnv) *http.Request {
		return e.req("POST", "/api/events/delete", tEvents, `{"ids":["`+e.createEvent()+`"]}`)
	}}},
	"POST /api/events/delete 400": {{name: "an id not a UUID", request: fixed("POST", "/api/events/delete", tEvents, `{"ids":["nope"]}`)}},
	"DELETE /api/events 200": {{name: "bulk delete as Meshery Server sends it", request: func(e contractEnv) *http.Request {
		return e.req("DELETE", "/api/events", tEvents, `{"ids":["`+e.createEvent()+`"]}`)
	}}},
	"DELETE /api/events 400": {{name: "an id not a UUID", request: fixed("DELETE", "/api/events", tEvents, `{"ids":["nope"]}`)}},
	"GET /api/events/summary 200": {
		{name: "events role, its own row", request: func(e contractEnv) *http.Request {
			e.createEvent()
			return e.req("GET", "/api/events/summary?page=0&pagesize=10&order=asc", tEvents, "")
		}},
		{name: "read role, every user", request: fixed("GET", "/api/events/summary?filter=%7B%22category%22%3A%5B%22c%22%5D%7D", tRead, "")},
		{name: "nothing matches", request: fixed("GET", "/api/events/summary?search=nothing", tRead, "")},
	},
	"GET /api/events/summary 400": {{name: "sort is not a parameter of the summary", request: fixed("GET", "/api/events/summary?sort=owner", tEvents, "")}},
	"GET /api/events 200": {
		{name: "cumulative", request: func(e contractEnv) *http.Request {
			e.createEvent()
			return e.req("GET", "/api/events?cumulative=true", tEvents, "")
		}},
		{name: "unread, read role", request: fixed("GET", "/api/events", tRead, "")},
	},
	"GET /api/events 400": {{name: "cumulative not a boolean", request: fixed("GET", "/api/events?cumulative=maybe", tEvents, "")}},
	"GET /api/events/types 200": {
		{name: "events role", request: fixed("GET", "/api/events/types?page=0&pagesize=10", tEvents, "")},
		{name: "read role", request: fixed("GET", "/api/events/types", tRead, "")},
	},
	"GET /api/events/types 400": {{name: "an unknown parameter", request: fixed("GET", "/api/events/types?sort=x", tEvents, "")}},
	"GET /api/v1/events/feed 200": {
		{name: "from the beginning", request: fixed("GET", "/api/v1/events/feed?limit=10&cloud=c1", tRead, "")},
		{name: "admin, from now, waiting a second", request: fixed("GET", "/api/v1/events/feed?after=now&wait=1", tAdmin, "")},
		{name: "a stream, read until the client leaves", request: func(e contractEnv) *http.Request {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			e.t.Cleanup(cancel)
			r := e.req("GET", "/api/v1/events/feed", tRead, "").WithContext(ctx)
			r.Header.Set("Accept", "text/event-stream")
			return r
		}},
	},
	"GET /api/v1/events/feed 400": {
		{name: "a tampered cursor", request: fixed("GET", "/api/v1/events/feed?after=AAAA", tRead, "")},
		{name: "wait over 30", request: fixed("GET", "/api/v1/events/feed?wait=31", tRead, "")},
		{name: "a tampered Last-Event-ID", request: func(e contractEnv) *http.Request {
			r := e.req("GET", "/api/v1/events/feed", tRead, "")
			r.Header.Set("Accept", "text/event-stream")
			r.Header.Set("Last-Event-ID", "AAAA")
			return r
		}},
	},
	"GET /api/events/feed 200": {
		{name: "from the beginning, after a create", request: func(e contractEnv) *http.Request {
			e.createEvent()
			return e.req("GET", "/api/events/feed?limit=10&severity=informational", tEvents, "")
		}},
		{name: "read role, from now", request: fixed("GET", "/api/events/feed?after=now", tRead, "")},
	},
	"GET /api/events/feed 400": {
		{name: "a tampered cursor", request: fixed("GET", "/api/events/feed?after=AAAA", tEvents, "")},
		{name: "limit over 1000", request: fixed("GET", "/api/events/feed?limit=1001", tEvents, "")},
	},
	"GET /api/events/subscribe 200": {{name: "a stream, read until the client leaves", request: func(e contractEnv) *http.Request {
		e.createEvent()
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		e.t.Cleanup(cancel)
		return e.req("GET", "/api/events/subscribe", tEvents, "").WithContext(ctx)
	}}},
	"GET /api/events/subscribe 400": {{name: "a tampered Last-Event-ID", request: func(e contractEnv) *http.Request {
		r := e.req("GET", "/api/events/subscribe", tEvents, "")
		r.Header.Set("Last-Event-ID", "AAAA")
		return r
	}}},
	"GET /metrics 200":      {{name: "metrics", request: fixed("GET", "/metrics", "", "")}},
	"GET /healthz 200":      {{name: "up", request: fixed("GET", "/healthz", "", "")}},
	"GET /readyz 200":       {{name: "ready", request: fixed("GET", "/readyz", "", "")}},
	"GET /openapi.yaml 200": {{name: "document", request: fixed("GET", "/openapi.yaml", "", "")}},
	"GET /readyz 503": {{
		name:    "store unreachable",
		request: fixed("GET", "/readyz", "", ""),
		respond: func(e contractEnv, r *http.Request) *httptest.ResponseRecorder {
			if e.broken == nil {
				return nil // the in-memory store is always reachable
			}
			w := httptest.NewRecorder()
			e.broken.ServeHTTP(w, r)
			return w
		},
	}},
}

// samplePath fills a path template's parameters.
func samplePath(p string) string {
	return strings.NewReplacer("{platform}", "openstack", "{cloud}", "os-a", "{resource_type}", "instance", "{id}", unknownID).Replace(p)
}

// genericScenario builds the 401, 403 and 413 of any protected route.
func genericScenario(h *Handler, op operation, status string) []scenario {
	var roles []route.Role
	for _, rt := range h.Routes() {
		if rt.Pattern() == op.key() {
			roles = rt.Roles
		}
	}
	body := ""
	if op.method == "POST" || op.method == "PUT" || op.key() == "DELETE /api/events" {
		body = "{}"
	}
	target := samplePath(op.path)
	switch status {
	case "401":
		return []scenario{
			{name: "no token", request: fixed(op.method, target, "", body)},
			{name: "unknown token", request: fixed(op.method, target, "t-unknown", body)},
		}
	case "403":
		for _, tok := range []struct {
			token string
			role  route.Role
		}{{tIngest, route.RoleIngest}, {tAdmin, route.RoleAdmin}, {tRead, route.RoleRead}, {tEvents, route.RoleEvents}} {
			if !slices.Contains(roles, tok.role) && !(tok.token == tAdmin && slices.Contains(roles, route.RoleRead)) {
				return []scenario{{name: "token without the role", request: fixed(op.method, target, tok.token, body)}}
			}
		}
	case "415":
		token := roleToken(roles)
		return []scenario{{name: "a form body", request: func(e contractEnv) *http.Request {
			r := e.req(op.method, target, token, body)
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return r
		}}}
	case "408":
		return []scenario{{name: "body past the read timeout", request: func(e contractEnv) *http.Request {
			r := e.req(op.method, target, roleToken(roles), "")
			r.Body = io.NopCloser(io.MultiReader(strings.NewReader("{"), iotest.ErrReader(os.ErrDeadlineExceeded)))
			r.ContentLength = -1
			r.Header.Set("Content-Type", "application/json")
			return r
		}}}
	case "503":
		// The body budget is spent: another request holds all of it (a
		// declared body of the cap, all but its last byte arrived). The budget is
		// charged before any store is touched.
		return []scenario{{name: "body budget spent", request: fixed(op.method, target, roleToken(roles), body),
			respond: func(e contractEnv, r *http.Request) *httptest.ResponseRecorder {
				h := contractHandlerWith(e.t, memStore(e.t), func(c *Options) {
					c.BodyBudgetBytes, c.BodyBudgetWait = testMaxBody, time.Millisecond
				})
				pr, pw := io.Pipe()
				holder := e.req(op.method, target, roleToken(roles), "")
				holder.Body, holder.ContentLength = pr, testMaxBody
				holder.Header.Set("Content-Type", "application/json")
				done := make(chan struct{})
				go func() { defer close(done); h.ServeHTTP(httptest.NewRecorder(), holder) }()
				// The budget is charged for the bytes a body has brought:
				// the holder holds all of it once all but its last byte
				// have arrived.
				_, _ = pw.Write(append([]byte("{"), bytes.Repeat([]byte(" "), testMaxBody-2)...))
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				_ = pw.CloseWithError(io.ErrUnexpectedEOF)
				<-done
				return w
			}}}
	case "413":
		token := roleToken(roles)
		return []scenario{{name: "body over the cap", request: fixed(op.method, target, token, `"`+strings.Repeat("x", testMaxBody)+`"`)}}
	}
	return nil
}

// roleToken is a token with one of roles.
func roleToken(roles []route.Role) string {
	switch {
	case slices.Contains(roles, route.RoleIngest):
		return tIngest
	case slices.Contains(roles, route.RoleReconcile):
		return tSync
	case slices.Contains(roles, route.RoleEvents):
		return tEvents
	}
	return tAdmin
}

func contractHandler(t *testing.T, st Store) *Handler {
	t.Helper()
	return contractHandlerWith(t, st, func(*Options) {})
}

// contractHandlerWith is contractHandler with its configuration changed by
// set.
func contractHandlerWith(t *testing.T, st Store, set func(*Options)) *Handler {
	t.Helper()
	creds, err := ParseCredentials([]byte(`{"credentials":[
	  {"name":"col","token":"` + tIngest + `","roles":["ingest"],"platform":"openstack","cloud":"os-a"},
	  {"name":"rec","token":"` + tSync + `","roles":["reconcile"],"platform":"openstack","cloud":"os-a"},
	  {"name":"ops","token":"` + tAdmin + `","roles":["admin"]},
	  {"name":"dash","token":"` + tRead + `","roles":["read"],"organization":"acme"},
	  {"name":"app","token":"` + tEvents + `","roles":["events"],"organization":"acme","user":"u"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAuthenticator(creds, AuthenticatorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Options{Authenticator: a, MaxBodyBytes: testMaxBody}
	set(&cfg)
	h, err := New(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// The event stream of GET /api/events/subscribe is text, documented as a
// string.
func init() { openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.PlainBodyDecoder) }

func TestOpenAPIMatchesHandlers(t *testing.T) {
	doc := loadOpenAPI(t)
	ops := doc.operations(t)

	stores := []struct {
		name string
		open func(t *testing.T) (Store, http.Handler)
	}{
		{"memstore", func(t *testing.T) (Store, http.Handler) { return memStore(t), nil }},
		{"pgstore", func(t *testing.T) (Store, http.Handler) {
			url := pgtest.URL(t)
			st := pgtest.Open(t, url, pgstore.Options{})
			dead, err := pgstore.Open(context.Background(), url, pgstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			dead.Close() // unreachable from now on: reads, writes and Ping fail
			return pgStore(st), contractHandler(t, pgStore(dead))
		}},
	}
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			st, broken := s.open(t)
			h := contractHandler(t, st)
			env := contractEnv{t: t, h: h, broken: broken}

			// Every live route is documented, and every documented
			// operation is live.
			documented := map[string]bool{}
			for _, op := range ops {
				documented[op.key()] = true
			}
			var served []string
			for _, rt := range h.Routes() {
				served = append(served, rt.Pattern())
			}
			for _, p := range served {
				if !documented[p] {
					t.Errorf("route %s is served but not documented in openapi.yaml", p)
				}
			}
			for _, op := range ops {
				if !slices.Contains(served, op.key()) {
					t.Errorf("%s is documented but not served", op.key())
				}
			}

			for _, op := range ops {
				for _, status := range op.statuses {
					scs := scenarios[op.key()+" "+status]
					if scs == nil {
						scs = genericScenario(h, op, status)
					}
					if len(scs) == 0 {
						t.Errorf("%s %s: documented, but no request in this test produces it", op.key(), status)
						continue
					}
					for _, sc := range scs {
						t.Run(op.key()+" "+status+" "+sc.name, func(t *testing.T) {
							e := env
							e.t = t
							r := sc.request(e)
							in := doc.requestInput(t, op, r)
							if strings.HasPrefix(status, "2") && sc.outsideDocument == "" {
								validateRequest(t, in)
							}
							var w *httptest.ResponseRecorder
							if sc.respond != nil {
								w = sc.respond(e, r)
								if w == nil {
									t.Skipf("%s cannot produce this status", s.name)
								}
							} else {
								w = e.serve(r)
							}
							doc.check(t, in, status, w)
						})
					}
				}
			}

			// 404 and 405 are answered before any operation; they are
			// documented as components.responses.NotFound and
			// MethodNotAllowed.
			t.Run("no such route 404", func(t *testing.T) {
				w := env.serve(env.req("GET", "/api/v1/nope", tAdmin, ""))
				if w.Code != 404 {
					t.Fatalf("status %d, want 404; body %s", w.Code, w.Body)
				}
				doc.checkComponent(t, "NotFound", w)
			})
			t.Run("method not served 405", func(t *testing.T) {
				w := env.serve(env.req("PATCH", "/api/events/list", tEvents, ""))
				if w.Code != 405 {
					t.Fatalf("status %d, want 405; body %s", w.Code, w.Body)
				}
				doc.checkComponent(t, "MethodNotAllowed", w)
			})
		})
	}
}

// A scenario for a status the document does not list is a stale test.
func TestOpenAPIScenariosAreDocumented(t *testing.T) {
	doc := loadOpenAPI(t)
	have := map[string]bool{}
	for _, op := range doc.operations(t) {
		for _, status := range op.statuses {
			have[op.key()+" "+status] = true
		}
	}
	for k := range scenarios {
		if !have[k] {
			t.Errorf("scenario %q: the document lists no such status", k)
		}
	}
}
