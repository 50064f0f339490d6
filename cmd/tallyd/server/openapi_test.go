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
	"sort"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/route"
	"github.com/tallyhq/tally/store/pgstore"
)

// The OpenAPI document is checked against the live handlers: every route
// the handler serves is documented, every documented operation is served,
// and every documented status of every operation is produced by a real
// request on both stores, with the documented content type, the documented
// required headers, and a body that validates against the documented
// schema.

// openAPIDoc is the parsed document: as generic JSON for the schema
// compiler, and the operations with their documented statuses.
type openAPIDoc struct {
	root     map[string]any
	compiler *jsonschema.Compiler
}

const docURL = "mem://openapi.json"

func loadOpenAPI(t *testing.T) *openAPIDoc {
	t.Helper()
	var root map[string]any
	if err := yaml.Unmarshal(OpenAPI, &root); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	if v := root["openapi"]; v != "3.1.0" {
		t.Fatalf("openapi: %v, want 3.1.0", v)
	}
	b, err := json.Marshal(root)
	if err != nil {
		t.Fatal(err)
	}
	j, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(docURL, j); err != nil {
		t.Fatal(err)
	}
	return &openAPIDoc{root: root, compiler: c}
}

// ref resolves a local $ref ("#/components/…") of an object, or returns it.
func (d *openAPIDoc) ref(t *testing.T, v map[string]any) (map[string]any, string) {
	t.Helper()
	r, ok := v["$ref"].(string)
	if !ok {
		return v, ""
	}
	ptr := strings.TrimPrefix(r, "#")
	var cur any = d.root
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("$ref %s does not resolve", r)
		}
		cur = m[tok]
	}
	m, ok := cur.(map[string]any)
	if !ok {
		t.Fatalf("$ref %s does not resolve to an object", r)
	}
	return m, ptr
}

// operation is one documented METHOD path with its responses.
type operation struct {
	method, path string
	responses    map[string]any
}

func (o operation) key() string { return o.method + " " + o.path }

func (d *openAPIDoc) operations(t *testing.T) []operation {
	t.Helper()
	paths, _ := d.root["paths"].(map[string]any)
	var ops []operation
	for path, item := range paths {
		for method, op := range item.(map[string]any) {
			switch method {
			case "get", "put", "post", "delete", "patch":
			default:
				continue
			}
			resp, _ := op.(map[string]any)["responses"].(map[string]any)
			if len(resp) == 0 {
				t.Errorf("%s %s documents no response", strings.ToUpper(method), path)
			}
			ops = append(ops, operation{method: strings.ToUpper(method), path: path, responses: resp})
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].key() < ops[j].key() })
	return ops
}

func escapePtr(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// check compares one live answer with the documented response.
func (d *openAPIDoc) check(t *testing.T, op operation, status string, w *httptest.ResponseRecorder) {
	t.Helper()
	if got := fmt.Sprint(w.Code); got != status {
		t.Fatalf("status %s, documented %s; body %s", got, status, w.Body)
	}
	resp, at := d.ref(t, op.responses[status].(map[string]any))
	if at == "" {
		at = "/paths/" + escapePtr(op.path) + "/" + strings.ToLower(op.method) + "/responses/" + status
	}
	if hs, ok := resp["headers"].(map[string]any); ok {
		for name, h := range hs {
			h, _ := d.ref(t, h.(map[string]any))
			if req, _ := h["required"].(bool); req && w.Header().Get(name) == "" {
				t.Errorf("documented required header %s is missing", name)
			}
		}
	}
	content, _ := resp["content"].(map[string]any)
	if len(content) == 0 {
		if w.Body.Len() != 0 {
			t.Errorf("documented without content, answered %q", w.Body)
		}
		return
	}
	ct := w.Header().Get("Content-Type")
	var media string
	for m := range content {
		if strings.HasPrefix(ct, m) {
			media = m
		}
	}
	if media == "" {
		t.Fatalf("Content-Type %q is none of the documented %v", ct, slices.Collect(mapsKeys(content)))
	}
	if !strings.Contains(media, "json") {
		return
	}
	sch, err := d.compiler.Compile(docURL + "#" + at + "/content/" + escapePtr(media) + "/schema")
	if err != nil {
		t.Fatalf("compile the documented schema: %v", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(w.Body.Bytes()))
	if err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, w.Body)
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("body does not match the documented schema: %v\nbody: %s", err, w.Body)
	}
}

func mapsKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
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

	testMaxBody = 64 << 10
	unknownID   = "0190aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee"
)

func (e contractEnv) req(method, target, token, body string) *http.Request {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, target, rd)
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

// scenario produces one documented status of one operation. respond, when
// set, serves the request itself (on another handler).
type scenario struct {
	name    string
	request func(e contractEnv) *http.Request
	respond func(e contractEnv, r *http.Request) *httptest.ResponseRecorder
}

func fixed(method, target, token, body string) func(contractEnv) *http.Request {
	return func(e contractEnv) *http.Request { return e.req(method, target, token, body) }
}

// scenarios are keyed "METHOD path status". 401, 403, 408, 413, 415 and 503 are generic
// (see genericScenario).
var scenarios = map[string][]scenario{
	"POST /api/v1/events 200": {
		{name: "one event", request: fixed("POST", "/api/v1/events", tIngest, validEvent)},
		{name: "a batch with a refused item", request: fixed("POST", "/api/v1/events", tIngest, `[`+validEvent+`,{"event_id":"x"},7]`)},
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
	},
	"GET /api/v1/resources/{cloud}/{resource_type}/{resource_id} 200": {{name: "with its history", request: func(e contractEnv) *http.Request {
		if w := e.serve(e.req("POST", "/api/v1/events", tIngest, validEvent)); w.Code != 200 {
			e.t.Fatalf("ingest: %d %s", w.Code, w.Body)
		}
		return e.req("GET", "/api/v1/resources/os-a/widget/w-1", tRead, "")
	}}},
	"GET /api/v1/resources/{cloud}/{resource_type}/{resource_id} 404": {{name: "unknown resource", request: fixed("GET", "/api/v1/resources/os-a/widget/nope", tRead, "")}},
	"GET /api/v1/resource-types 200": {
		{name: "read role", request: fixed("GET", "/api/v1/resource-types", tRead, "")},
		{name: "admin role", request: fixed("GET", "/api/v1/resource-types", tAdmin, "")},
	},
	"GET /api/v1/resource-types/{platform}/{resource_type} 200": {{name: "seeded", request: fixed("GET", "/api/v1/resource-types/openstack/instance", tRead, "")}},
	"GET /api/v1/resource-types/{platform}/{resource_type} 404": {{name: "unknown pair", request: fixed("GET", "/api/v1/resource-types/openstack/teapot", tRead, "")}},
	"PUT /api/v1/resource-types/{platform}/{resource_type} 200": {{name: "new pair", request: fixed("PUT", "/api/v1/resource-types/openstack/widget", tAdmin, `{"type":"object","required":["n"]}`)}},
	"PUT /api/v1/resource-types/{platform}/{resource_type} 400": {{name: "does not compile", request: fixed("PUT", "/api/v1/resource-types/openstack/widget", tAdmin, `{"type":12}`)}},
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
	"GET /metrics 200":            {{name: "metrics", request: fixed("GET", "/metrics", "", "")}},
	"GET /healthz 200":            {{name: "up", request: fixed("GET", "/healthz", "", "")}},
	"GET /readyz 200":             {{name: "ready", request: fixed("GET", "/readyz", "", "")}},
	"GET /openapi.yaml 200":       {{name: "document", request: fixed("GET", "/openapi.yaml", "", "")}},
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
	return strings.NewReplacer("{platform}", "openstack", "{resource_type}", "instance", "{id}", unknownID).Replace(p)
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
	if op.method == "POST" || op.method == "PUT" {
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
		token := tAdmin
		switch {
		case slices.Contains(roles, route.RoleIngest):
			token = tIngest
		case slices.Contains(roles, route.RoleEvents):
			token = tEvents
		}
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
		// declared body of the cap, still arriving). The budget is
		// charged before any store is touched.
		return []scenario{{name: "body budget spent", request: fixed(op.method, target, roleToken(roles), body),
			respond: func(e contractEnv, r *http.Request) *httptest.ResponseRecorder {
				h := contractHandlerWith(e.t, memStore(e.t), func(c *Config) {
					c.BodyBudgetBytes, c.BodyBudgetWait = testMaxBody, time.Millisecond
				})
				pr, pw := io.Pipe()
				holder := e.req(op.method, target, roleToken(roles), "")
				holder.Body, holder.ContentLength = pr, testMaxBody
				holder.Header.Set("Content-Type", "application/json")
				done := make(chan struct{})
				go func() { defer close(done); h.ServeHTTP(httptest.NewRecorder(), holder) }()
				_, _ = pw.Write([]byte("{")) // the holder is reading: it holds the budget
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				_ = pw.CloseWithError(io.ErrUnexpectedEOF)
				<-done
				return w
			}}}
	case "413":
		var token string
		switch {
		case slices.Contains(roles, route.RoleIngest):
			token = tIngest
		case slices.Contains(roles, route.RoleEvents):
			token = tEvents
		default:
			token = tAdmin
		}
		return []scenario{{name: "body over the cap", request: fixed(op.method, target, token, `"`+strings.Repeat("x", testMaxBody)+`"`)}}
	}
	return nil
}

// roleToken is a token with one of roles.
func roleToken(roles []route.Role) string {
	switch {
	case slices.Contains(roles, route.RoleIngest):
		return tIngest
	case slices.Contains(roles, route.RoleEvents):
		return tEvents
	}
	return tAdmin
}

func contractHandler(t *testing.T, st Store) *Handler {
	t.Helper()
	return contractHandlerWith(t, st, func(*Config) {})
}

// contractHandlerWith is contractHandler with its configuration changed by
// set.
func contractHandlerWith(t *testing.T, st Store, set func(*Config)) *Handler {
	t.Helper()
	creds, err := ParseCredentials([]byte(`{"credentials":[
	  {"name":"col","token":"` + tIngest + `","roles":["ingest"],"platform":"openstack","cloud":"os-a"},
	  {"name":"ops","token":"` + tAdmin + `","roles":["admin"]},
	  {"name":"dash","token":"` + tRead + `","roles":["read"],"organization":"acme"},
	  {"name":"app","token":"` + tEvents + `","roles":["events"],"organization":"acme","user":"u"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAuthenticator(creds)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Store: st, Authenticator: a, MaxBodyBytes: testMaxBody}
	set(&cfg)
	h, err := NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

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
				statuses := slices.Sorted(mapsKeys(op.responses))
				for _, status := range statuses {
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
							var w *httptest.ResponseRecorder
							if sc.respond != nil {
								w = sc.respond(e, r)
								if w == nil {
									t.Skipf("%s cannot produce this status", s.name)
								}
							} else {
								w = e.serve(r)
							}
							doc.check(t, op, status, w)
						})
					}
				}
			}
		})
	}
}

// A scenario for a status the document does not list is a stale test.
func TestOpenAPIScenariosAreDocumented(t *testing.T) {
	doc := loadOpenAPI(t)
	have := map[string]bool{}
	for _, op := range doc.operations(t) {
		for status := range op.responses {
			have[op.key()+" "+status] = true
		}
	}
	for k := range scenarios {
		if !have[k] {
			t.Errorf("scenario %q: the document lists no such status", k)
		}
	}
}
