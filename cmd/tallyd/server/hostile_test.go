package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
	"github.com/tallyhq/tally/store/storetest"
)

// The tokens of testAuthenticator.
const (
	tokIngest = "t-ingest-token-01" // ingest, scope (openstack, os-a)
	tokSync   = "t-reconcile-token" // reconcile, scope (openstack, os-a)
	tokAdmin  = "t-admin-token-001"
	tokEvents = "t-events-token-01" // events, (acme, u)
)

// hostileCase is one row of TestHostileInput: a request, the answer it must
// get, and what it may leave in the store. Rows for further inputs (a
// Content-Encoding, say) set header and keep the rest.
type hostileCase struct {
	name   string
	method string            // "" means POST
	path   string            // "" means /api/v1/events
	token  string            // "" means tokIngest
	header map[string]string // request headers; Content-Type defaults to application/json
	body   func() []byte
	// readErr, when set, is what reading the body returns after its
	// bytes, as net/http's body reader returns a broken transfer (the
	// body is then sent without a length, as a chunked one is).
	readErr error

	status int // the answer's status; 0: no answer at all (a client that is gone)
	// answerHeader lists headers the answer must carry.
	answerHeader map[string]string
	code         string // a 4xx/5xx answer's problem code; "" to skip the check
	// detail, when set, must occur in the problem's detail or errors.
	detail string
	// result, for a 200 of POST /api/v1/events: accepted, duplicates and
	// each rejected item's reason prefix, in index order.
	accepted   int
	duplicates int
	rejected   []string
	// stored is what the request may add to the store; every other request
	// adds nothing ("nothing half-written").
	stored counts
}

// counts is what the store holds.
type counts struct {
	Events, DeadLetters, Audit, Correlated int
}

func countStore(t *testing.T, st Store) counts {
	t.Helper()
	ctx := context.Background()
	evs := storetest.Events(t, st.Ingest)
	dls, err := st.Ingest.DeadLetters(ctx, ingest.DeadLetterQuery{})
	if err != nil {
		t.Fatal(err)
	}
	au, err := st.Ingest.Audit(ctx, ingest.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := st.Correlate.List(ctx, correlate.Caller{Organization: "acme", User: "u"}, correlate.Query{PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	return counts{len(evs), len(dls), len(au), int(l.Total)}
}

func (c counts) sub(d counts) counts {
	return counts{c.Events - d.Events, c.DeadLetters - d.DeadLetters, c.Audit - d.Audit, c.Correlated - d.Correlated}
}

// hostileEvent is a valid instance create in the ingest token's scope,
// numbered by id, with the given size members and extra payload members.
func hostileEvent(id, size, payloadExtra string) string {
	return `{"event_id":"` + id + `","timestamp":"2026-03-01T12:00:00Z","event_type":"compute.instance.create.end",` +
		`"platform":"openstack","cloud":"os-a","resource_type":"instance","resource_id":"vm-` + id + `","project_id":"p",` +
		`"payload":{"state":"active","size":{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1"` + size + `}` + payloadExtra + `}}`
}

// batchOf is a body of the given items.
func batchOf(items ...string) func() []byte {
	return func() []byte { return []byte("[" + strings.Join(items, ",") + "]") }
}

// sized is a JSON body of exactly n bytes: head, a run of "a", tail.
func sized(head string, n int, tail string) []byte {
	b := append([]byte(head), bytes.Repeat([]byte("a"), n-len(head)-len(tail))...)
	return append(b, tail...)
}

func bodyOf(s string) func() []byte { return func() []byte { return []byte(s) } }

// withBadSize is a batch of an item whose size holds n (in the member x)
// and a valid sibling.
func withBadSize(name, n string) hostileCase {
	return hostileCase{
		name:   "ingest/size number " + name,
		body:   batchOf(hostileEvent("bad-"+name, `,"x":`+n, ""), hostileEvent("ok-"+name, "", "")),
		status: 200, accepted: 1, rejected: []string{"size_schema: /payload/size/x: numberRange: "},
		stored: counts{Events: 1, DeadLetters: 1},
	}
}

// wrongType replaces member (a dotted path from the event) of a valid event
// by v.
func wrongType(path, v string) string {
	var m map[string]any
	_ = json.Unmarshal([]byte(hostileEvent("wt-"+path, "", `,"provider":{}`)), &m)
	parts := strings.Split(path, ".")
	obj := m
	for _, p := range parts[:len(parts)-1] {
		obj = obj[p].(map[string]any)
	}
	obj[parts[len(parts)-1]] = json.RawMessage(v)
	b, _ := json.Marshal(m)
	return string(b)
}

func hostileCases() []hostileCase {
	nest := func(open, close string, n int) string { return strings.Repeat(open, n) + strings.Repeat(close, n) }
	// The item is level 1, payload 2, provider 3: a chain of MaxDepth-1
	// objects from provider down reaches level MaxDepth+1.
	deepProvider := strings.Repeat(`{"a":`, event.MaxDepth-2) + `{}` + strings.Repeat(`}`, event.MaxDepth-2)
	cases := []hostileCase{
		// Numbers: each refused as its item, siblings stored; never 5xx.
		withBadSize("1e1000001", `1e1000001`),
		withBadSize("-1e1000001", `-1e1000001`),
		withBadSize("1e-1000001", `1e-1000001`),
		withBadSize("1e999999", `1e999999`),
		withBadSize("101 digits", strings.Repeat("7", 101)),
		{
			name:   "ingest/huge numbers in provider are kept, not judged",
			body:   batchOf(hostileEvent("prov-num", "", `,"provider":{"n":1e1000001,"m":-1e-1000001}`)),
			status: 200, accepted: 1, rejected: []string{},
			stored: counts{Events: 1},
		},
		{
			name: "schema/a bound that cannot be enforced is refused naming the keyword", method: "PUT",
			path: "/api/v1/resource-types/openstack/hostile", token: tokAdmin,
			body:   bodyOf(`{"type":"object","properties":{"gb":{"minimum": 1e1000001}}}`),
			status: 400, code: "invalid_size_schema", detail: `"member":"/properties/gb/minimum","rule":"numberRange"`,
		},
		// Structure.
		{
			name:   "ingest/payload.provider nested MaxDepth+1 deep inside a batch is refused alone",
			body:   batchOf(hostileEvent("deep", "", `,"provider":`+deepProvider), hostileEvent("deep-sibling", "", "")),
			status: 200, accepted: 1, rejected: []string{"schema: "}, detail: fmt.Sprintf("more than %d levels deep", event.MaxDepth),
			stored: counts{Events: 1, DeadLetters: 1},
		},
		{
			name:   "ingest/arrays nested 100,000 deep are one item, refused",
			body:   bodyOf(nest("[", "]", 100000)),
			status: 200, rejected: []string{"schema: "},
			stored: counts{DeadLetters: 1},
		},
		{
			name:   "ingest/an object nesting arrays 100,000 deep is refused naming the limit",
			body:   bodyOf(`{"event_id":"deep-arrays","payload":{"provider":{"a":` + nest("[", "]", 100000) + `}}}`),
			status: 200, rejected: []string{"schema: "}, detail: fmt.Sprintf("more than %d levels deep", event.MaxDepth),
			stored: counts{DeadLetters: 1},
		},
		{
			name:   "ingest/an unclosed 100,000-deep array is not JSON",
			body:   bodyOf(strings.Repeat("[", 100000)),
			status: 400, code: "invalid_body",
		},
		// Proof: the other hostile inputs.
		{
			name: "ingest/truncated array",
			body: func() []byte {
				b := batchOf(hostileEvent("t1", "", ""), hostileEvent("t2", "", ""))()
				return b[:len(b)-40]
			},
			status: 400, code: "invalid_body",
		},
		{
			name:   "ingest/truncated single object is refused and kept",
			body:   func() []byte { b := hostileEvent("t3", "", ""); return []byte(b[:len(b)-10]) },
			status: 200, rejected: []string{"schema: "},
			stored: counts{DeadLetters: 1},
		},
		{
			name: "ingest/1001 items",
			body: func() []byte {
				items := make([]string, 1001)
				for i := range items {
					items[i] = hostileEvent(fmt.Sprint("n-", i), "", "")
				}
				return batchOf(items...)()
			},
			status: 413, code: "batch_too_large",
		},
		{
			name:   "ingest/8 MiB + 1 byte",
			body:   func() []byte { return sized(`["`, 8<<20+1, `"]`) },
			status: 413, code: "body_too_large",
		},
		{
			name:   "ingest/a member given twice",
			body:   bodyOf(strings.Replace(hostileEvent("dup", "", ""), `"project_id":"p"`, `"project_id":"p","project_id":"q"`, 1)),
			status: 200, rejected: []string{"schema: "}, detail: "more than once",
			stored: counts{DeadLetters: 1},
		},
		{
			name:   "ingest/invalid UTF-8",
			body:   batchOf(strings.Replace(hostileEvent("utf8", "", ""), `"vm-utf8"`, "\"vm-\xff\"", 1), hostileEvent("utf8-sibling", "", "")),
			status: 200, accepted: 1, rejected: []string{"schema: "}, detail: "UTF-8",
			stored: counts{Events: 1, DeadLetters: 1},
		},
		{
			name:   "ingest/raw NUL inside an array element",
			body:   batchOf(strings.Replace(hostileEvent("nul", "", ""), `"vm-nul"`, "\"vm-\x00\"", 1), hostileEvent("nul-sibling", "", "")),
			status: 200, accepted: 1, rejected: []string{"schema: "}, detail: "NUL",
			stored: counts{Events: 1, DeadLetters: 1},
		},
		{
			name:   "ingest/escaped NUL",
			body:   bodyOf(strings.Replace(hostileEvent("nul2", "", ""), `"vm-nul2"`, `"vm-\u0000"`, 1)),
			status: 200, rejected: []string{"schema: "}, detail: "NUL",
			stored: counts{DeadLetters: 1},
		},
		{
			name:   "ingest/unpaired surrogate",
			body:   bodyOf(strings.Replace(hostileEvent("sur", "", ""), `"vm-sur"`, `"vm-\ud800"`, 1)),
			status: 200, rejected: []string{"schema: "},
			stored: counts{DeadLetters: 1},
		},
		{
			name:   "ingest/an item outside the scope is audited",
			body:   bodyOf(strings.Replace(hostileEvent("scope", "", ""), `"os-a"`, `"os-b"`, 1)),
			status: 200, rejected: []string{"scope"},
			stored: counts{Audit: 1},
		},
		{
			name:   "ingest/wrong Content-Type",
			header: map[string]string{"Content-Type": "text/plain"},
			body:   bodyOf(hostileEvent("ct", "", "")),
			status: 415, code: "unsupported_media_type",
		},
		{name: "ingest/empty body", body: bodyOf(""), status: 400, code: "invalid_body"},
		{name: "ingest/a number", body: bodyOf("42"), status: 400, code: "invalid_body"},
		{name: "ingest/no token", token: "-", body: bodyOf(hostileEvent("anon", "", "")), status: 401},

		// createEvent.
		{
			name: "events/metadata keeps huge numbers", path: "/api/events", token: tokEvents,
			body:   bodyOf(`{"category":"c","action":"a","metadata":{"n":1e1000001,"m":-1e-1000001}}`),
			status: 201, stored: counts{Correlated: 1},
		},
		{
			name: "events/nested 100,000 deep", path: "/api/events", token: tokEvents,
			body:   bodyOf(`{"category":"c","action":"a","metadata":{"a":` + nest("[", "]", 100000) + `}}`),
			status: 400,
		},
		{name: "events/truncated JSON", path: "/api/events", token: tokEvents, body: bodyOf(`{"category":"c","action":`), status: 400},
		{name: "events/a member given twice", path: "/api/events", token: tokEvents, body: bodyOf(`{"category":"c","action":"a","action":"b"}`), status: 400, detail: "/action"},
		{name: "events/invalid UTF-8", path: "/api/events", token: tokEvents, body: bodyOf("{\"category\":\"c\xff\",\"action\":\"a\"}"), status: 400},
		{name: "events/raw NUL", path: "/api/events", token: tokEvents, body: bodyOf("{\"category\":\"c\x00\",\"action\":\"a\"}"), status: 400},
		{name: "events/unpaired surrogate", path: "/api/events", token: tokEvents, body: bodyOf(`{"category":"c\udc00","action":"a"}`), status: 400},
		{
			name: "events/8 MiB + 1 byte", path: "/api/events", token: tokEvents,
			body:   func() []byte { return sized(`{"category":"`, 8<<20+1, `","action":"a"}`) },
			status: 413,
		},
		{
			name: "events/wrong Content-Type", path: "/api/events", token: tokEvents,
			header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
			body:   bodyOf(`{"category":"c","action":"a"}`), status: 415, code: "unsupported_media_type",
		},
	}
	// Every member with the wrong JSON type: refused as that item.
	for _, m := range []struct{ path, v string }{
		{"event_id", `1`}, {"timestamp", `1700000000`}, {"event_type", `true`}, {"platform", `[]`},
		{"cloud", `{}`}, {"resource_type", `1.5`}, {"resource_id", `["vm"]`}, {"project_id", `false`},
		{"source", `1`}, {"payload", `[]`}, {"payload.state", `1`}, {"payload.size", `"big"`}, {"payload.provider", `[]`},
	} {
		cases = append(cases, hostileCase{
			name:   "ingest/wrong type of " + m.path,
			body:   batchOf(wrongType(m.path, m.v), hostileEvent("wt-sibling-"+m.path, "", "")),
			status: 200, accepted: 1, rejected: []string{"schema: "},
			stored: counts{Events: 1, DeadLetters: 1},
		})
	}
	for _, m := range []struct{ name, v string }{
		{"category", `1`}, {"action", `true`}, {"severity", `[]`}, {"description", `{}`}, {"metadata", `[1]`},
		{"correlationKey", `1`}, {"occurrenceCount", `"2"`}, {"firstSeenAt", `1`}, {"lastSeenAt", `true`},
		{"resolvedAt", `{}`}, {"source", `1`}, {"type", `1`}, {"specversion", `1`}, {"traceId", `1`},
		{"parentId", `1`}, {"idempotencyKey", `1`}, {"owner", `1`}, {"systemId", `1`}, {"actedUpon", `1`}, {"operationId", `1`},
	} {
		body := map[string]json.RawMessage{"category": json.RawMessage(`"c"`), "action": json.RawMessage(`"a"`)}
		body[m.name] = json.RawMessage(m.v)
		b, _ := json.Marshal(body)
		cases = append(cases, hostileCase{
			name: "events/wrong type of " + m.name, path: "/api/events", token: tokEvents,
			body: bodyOf(string(b)), status: 400, detail: "/" + m.name,
		})
	}
	return append(cases, transportCases()...)
}

// Proof: "A table test over HTTP, on both stores, with every input
// above … Each gets its documented status and problem body, nothing is
// half-written, and the process stays healthy."
func TestHostileInput(t *testing.T) {
	for _, kind := range []string{"memstore", "pgstore"} {
		t.Run(kind, func(t *testing.T) {
			var st Store
			if kind == "memstore" {
				st = memStore(t)
			} else {
				st = pgStore(pgtest.DB(t, pgstore.Options{}))
			}
			h, err := New(st, Options{Authenticator: testAuthenticator(t)})
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range hostileCases() {
				t.Run(tc.name, func(t *testing.T) {
					before := countStore(t, st)
					w := serveHostile(h, tc)
					checkHostileAnswer(t, tc, w)
					if diff := cmp.Diff(tc.stored, countStore(t, st).sub(before)); diff != "" {
						t.Errorf("stored by the request (-want +got):\n%s", diff)
					}
					if w := serveHostile(h, hostileCase{method: "GET", path: "/healthz", body: bodyOf("")}); w.Code != 200 {
						t.Errorf("/healthz after the request: %d", w.Code)
					}
				})
			}
			// Still serving: a valid batch is accepted.
			w := serveHostile(h, hostileCase{body: batchOf(hostileEvent("after", "", ""))})
			if w.Code != 200 || !strings.Contains(w.Body.String(), `"accepted":1`) {
				t.Errorf("a valid batch after the hostile ones: %d %s", w.Code, w.Body)
			}
		})
	}
}

func serveHostile(h http.Handler, tc hostileCase) *httptest.ResponseRecorder {
	method, path, token := tc.method, tc.path, tc.token
	if method == "" {
		method = "POST"
	}
	if path == "" {
		path = "/api/v1/events"
	}
	if token == "" {
		token = tokIngest
	}
	var body io.Reader = bytes.NewReader(tc.body())
	if tc.readErr != nil {
		body = io.MultiReader(body, iotest.ErrReader(tc.readErr))
	}
	r := httptest.NewRequest(method, path, body)
	if tc.readErr != nil {
		r.ContentLength = -1
	}
	if token != "-" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	r.Header.Set("Content-Type", "application/json")
	for k, v := range tc.header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	func() {
		defer func() {
			// net/http's way of closing a connection without an answer.
			if v := recover(); v == http.ErrAbortHandler {
				w.Code = 0
			} else if v != nil {
				panic(v)
			}
		}()
		h.ServeHTTP(w, r)
	}()
	return w
}

func checkHostileAnswer(t *testing.T, tc hostileCase, w *httptest.ResponseRecorder) {
	t.Helper()
	body := w.Body.String()
	if w.Code != tc.status {
		t.Fatalf("status %d, want %d: %.500s", w.Code, tc.status, body)
	}
	if w.Code >= 500 {
		t.Fatalf("a client's body got a server error: %.500s", body)
	}
	for k, v := range tc.answerHeader {
		if got := w.Header().Get(k); got != v {
			t.Errorf("answer header %s: %q, want %q", k, got, v)
		}
	}
	if w.Code == 0 {
		if body != "" {
			t.Errorf("a client that is gone was answered: %.500s", body)
		}
		return
	}
	if w.Code >= 400 {
		if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("Content-Type %q, want application/problem+json", ct)
		}
		var p struct {
			Status int    `json:"status"`
			Code   string `json:"code"`
			Detail string `json:"detail"`
			Errors []struct {
				Member, Message string
			} `json:"errors"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
			t.Fatalf("problem body %q: %v", body, err)
		}
		if p.Status != w.Code || (tc.code != "" && p.Code != tc.code) || p.Code == "" {
			t.Errorf("problem status %d code %q, want %d %q: %s", p.Status, p.Code, w.Code, tc.code, body)
		}
		if tc.detail != "" && !strings.Contains(body, tc.detail) {
			t.Errorf("problem does not name %q: %s", tc.detail, body)
		}
		return
	}
	if tc.path != "" && tc.path != "/api/v1/events" {
		return
	}
	var res ingest.Result
	if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil {
		t.Fatalf("result %q: %v", body, err)
	}
	got := []string{}
	for i, r := range res.Rejected {
		want := ""
		if i < len(tc.rejected) {
			want = tc.rejected[i]
		}
		if strings.HasPrefix(r.Reason, want) && want != "" {
			got = append(got, want)
		} else {
			got = append(got, r.Reason)
		}
		if tc.detail != "" && !strings.Contains(r.Reason, tc.detail) {
			t.Errorf("reason %q does not name %q", r.Reason, tc.detail)
		}
	}
	if diff := cmp.Diff(tc.rejected, got); diff != "" || res.Accepted != tc.accepted || res.Duplicates != tc.duplicates {
		t.Errorf("accepted %d duplicates %d, want %d %d; rejected reasons (-want prefix +got):\n%s", res.Accepted, res.Duplicates, tc.accepted, tc.duplicates, diff)
	}
}

// docs/decisions.md, Faithfulness, over HTTP on both stores: an event's history
// answers payload.size, payload.provider and the unknown members byte for
// byte as sent (white space, string escapes and number spellings), and
// createEvent and getEvents answer a correlated event's metadata byte for
// byte as sent, each inside a valid JSON answer.
func TestPayloadEscapesReadBackOverHTTP(t *testing.T) {
	const v = `{ "a" : [ 1 , 2 ] , "b":"\u0041\/" }`
	for _, kind := range []string{"memstore", "pgstore"} {
		t.Run(kind, func(t *testing.T) {
			var st Store
			if kind == "memstore" {
				st = memStore(t)
			} else {
				st = pgStore(pgtest.DB(t, pgstore.Options{}))
			}
			h, err := New(st, Options{Authenticator: testAuthenticator(t)})
			if err != nil {
				t.Fatal(err)
			}
			answer := func(w *httptest.ResponseRecorder, code int, want string) {
				t.Helper()
				if w.Code != code || !strings.Contains(w.Body.String(), want) || !json.Valid(w.Body.Bytes()) {
					t.Errorf("%d %s\nwant %d, valid JSON holding %s", w.Code, w.Body, code, want)
				}
			}
			item := hostileEvent("rb", `,"x":"\u0041\/","n":1.50e3,"w" : `+v, `,"provider":{"a":["\u00e9\/",-0.0E+1],"v":`+v+`},"z\u0041":"\/","u":`+v)
			answer(serveHostile(h, hostileCase{body: bodyOf(item)}), 200, `"accepted":1`)
			w := serveHostile(h, hostileCase{method: "GET", path: "/api/v1/resources/os-a/instance/vm-rb", token: tokAdmin, body: bodyOf("")})
			answer(w, 200, `"payload":{"state":"active","size":{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1","x":"\u0041\/","n":1.50e3,"w" : `+v+`},`+
				`"provider":{"a":["\u00e9\/",-0.0E+1],"v":`+v+`},"z\u0041":"\/","u":`+v+`}`)

			w = serveHostile(h, hostileCase{path: "/api/events", token: tokEvents, body: bodyOf(`{"category":"c","action":"a","metadata":` + v + `}`)})
			answer(w, 201, `"metadata":`+v+`,`)
			w = serveHostile(h, hostileCase{method: "GET", path: "/api/events/list", token: tokEvents, body: bodyOf("")})
			answer(w, 200, `"metadata":`+v+`,`)
		})
	}
}
