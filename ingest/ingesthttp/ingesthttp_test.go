package ingesthttp_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/ingesthttp"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/ingest/reconcile"
	"github.com/tallyhq/tally/ingest/usage"
	"github.com/tallyhq/tally/internal/problem"
	"github.com/tallyhq/tally/route"
	"github.com/tallyhq/tally/store/memstore"
	"github.com/tallyhq/tally/store/storetest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type server struct {
	*httptest.Server
	store ingest.Store
	roles []string
	logs  *bytes.Buffer
}

// stores is one database's ingestion store and the projection it keeps.
type stores interface {
	ingest.Store
	projection() projection.Store
	usage() usage.Store
	reconciler() reconcile.Store
}

// backend is a [stores] of one backend's DB.
type backend struct {
	ingest.Store
	proj projection.Store
	use  usage.Store
	rec  reconcile.Store
}

func (b backend) projection() projection.Store { return b.proj }
func (b backend) usage() usage.Store           { return b.use }
func (b backend) reconciler() reconcile.Store  { return b.rec }

// memIngest returns the stores of a new in-memory database.
func memIngest(t testing.TB) backend {
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return backend{db.Ingest(), db.Projection(), db.Ingest(), db.Reconcile()}
}

// newServer mounts the handlers on a mux. The wrap function stands in for
// the server's authentication: a request with "Authorization: Bearer ok" is
// the caller scoped to (openstack, c1).
func newServer(t *testing.T, st stores, maxBody int64) *server {
	t.Helper()
	svc, err := ingest.New(st, ingest.Options{Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	proj, err := projection.New(st.projection(), svc)
	if err != nil {
		t.Fatal(err)
	}
	logs := &bytes.Buffer{}
	use, err := usage.New(st.usage())
	if err != nil {
		t.Fatal(err)
	}
	rec, err := reconcile.New(svc, st.projection(), st.reconciler(), reconcile.Options{Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	h, err := ingesthttp.New(svc, proj, ingesthttp.Options{
		Usage:     use,
		Reconcile: rec,
		ReconcilerFrom: func(r *http.Request) (ingest.Caller, bool) {
			if r.Header.Get("Authorization") != "Bearer sync" {
				return ingest.Caller{}, false
			}
			return ingest.Caller{Credential: "c1-reconciler", Platform: "openstack", Cloud: "c1"}, true
		},
		CallerFrom: func(r *http.Request) (ingest.Caller, bool) {
			if r.Header.Get("Authorization") != "Bearer ok" {
				return ingest.Caller{}, false
			}
			return ingest.Caller{Credential: "c1-collector", Platform: "openstack", Cloud: "c1", Source: "reconciliation"}, true
		},
		Logger:       slog.New(slog.NewTextHandler(logs, nil)),
		MaxBodyBytes: maxBody,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := &server{store: st, logs: logs}
	mux := http.NewServeMux()
	route.Mount(mux, h.Routes(), func(rt route.Route) http.Handler {
		s.roles = append(s.roles, rt.Pattern()+": "+rt.Access())
		return rt.Handler
	})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func (s *server) do(t *testing.T, method, path, body string, auth bool) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth {
		req.Header.Set("Authorization", "Bearer ok")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func volume(id, cloud string) string {
	return fmt.Sprintf(`{"event_id":%q,"timestamp":"2026-03-01T10:00:00Z","event_type":"volume.create.end","platform":"openstack","cloud":%q,"resource_type":"volume","resource_id":"v-%s","project_id":"p","payload":{"state":"available","size":{"size_gb":1,"type":"ssd"}}}`, id, cloud, id)
}

func TestPostEvents(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		auth       bool
		wantStatus int
		wantBody   string // exact JSON for 200, problem code otherwise
	}{
		{"one object", volume("a", "c1"), true, 200, `{"accepted":1,"duplicates":0,"rejected":[]}`},
		{"array with a duplicate", "[" + volume("a", "c1") + "," + volume("a", "c1") + "]", true, 200, `{"accepted":1,"duplicates":1,"rejected":[]}`},
		{"empty array", "[]", true, 200, `{"accepted":0,"duplicates":0,"rejected":[]}`},
		{"non-object element refused as that item", "[" + volume("a", "c1") + ",42]", true, 200, `{"accepted":1,"duplicates":0,"rejected":[{"index":1,"event_id":"","reason":"schema: : type: the item must be a JSON object, not a number"}]}`},
		// Tally's RejectedEvent declares event_id a required string: an
		// item with none, or a non-string one, still carries "event_id":"".
		{"no event_id: event_id \"\"", `{"platform":"openstack"}`, true, 200, `"rejected":[{"index":0,"event_id":"","reason":"schema: `},
		{"non-string event_id: event_id \"\"", `{"event_id":42,"platform":"openstack"}`, true, 200, `"rejected":[{"index":0,"event_id":"","reason":"schema: `},
		{"out of scope", volume("b", "c2"), true, 200, `{"accepted":0,"duplicates":0,"rejected":[{"index":0,"event_id":"b","reason":"scope: /cloud: scope: cloud \"c2\" is outside this credential's openstack/c1"}]}`},
		{"invalid JSON object is an item", `{"event_id":"x",`, true, 200, `{"accepted":0,"duplicates":0,"rejected":[{"index":0,"event_id":"x","reason":"schema: : syntax: invalid JSON: unexpected end of input"}]}`},
		{"no token", volume("a", "c1"), false, 401, "unauthorized"},
		{"not JSON", "hello", true, 400, "invalid_body"},
		{"broken array", "[{}, ", true, 400, "invalid_body"},
		{"data after the array", "[] []", true, 400, "invalid_body"},
		{"empty body", "", true, 400, "invalid_body"},
		{"1001 items", "[" + strings.Repeat("{},", 1000) + "{}]", true, 413, "batch_too_large"},
		{"body over the cap", "[" + strings.Repeat(" ", 70000) + "]", true, 413, "body_too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, memIngest(t), 64<<10)
			status, hdr, body := s.do(t, "POST", "/api/v1/events", tt.body, tt.auth)
			if status != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", status, tt.wantStatus, body)
			}
			if status == 200 && !strings.HasPrefix(tt.wantBody, "{") {
				// A fragment: the reasons of these items are tested elsewhere.
				if !strings.Contains(body, tt.wantBody) {
					t.Errorf("body %s lacks %s", body, tt.wantBody)
				}
				return
			}
			if status == 200 {
				if diff := cmp.Diff(tt.wantBody, strings.TrimSpace(body)); diff != "" {
					t.Errorf("body (-want +got):\n%s", diff)
				}
				return
			}
			var p struct{ Code string }
			if err := json.Unmarshal([]byte(body), &p); err != nil || p.Code != tt.wantBody {
				t.Errorf("problem %s, want code %q", body, tt.wantBody)
			}
			if ct := hdr.Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type %q", ct)
			}
			if status == 401 && hdr.Get("WWW-Authenticate") != `Bearer realm="tally"` {
				t.Errorf("WWW-Authenticate %q", hdr.Get("WWW-Authenticate"))
			}
			if status == 413 {
				evs := storetest.Events(t, s.store)
				dls, _ := s.store.DeadLetters(context.Background(), ingest.DeadLetterQuery{Limit: 10})
				if len(evs)+len(dls) != 0 {
					t.Errorf("413 stored %d events and %d dead letters", len(evs), len(dls))
				}
			}
		})
	}
}

func TestPostEventsStoresCollectorSource(t *testing.T) {
	s := newServer(t, memIngest(t), 0)
	if status, _, body := s.do(t, "POST", "/api/v1/events", volume("a", "c1"), true); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	evs := storetest.Events(t, s.store)
	if len(evs) != 1 || evs[0].Source != "collector" {
		t.Errorf("stored %+v; want one collector event", evs)
	}
}

// failingStore fails every commit.
type failingStore struct{ backend }

func (failingStore) Commit(context.Context, ingest.Batch) (ingest.Committed, error) {
	return ingest.Committed{}, errors.New("disk on fire")
}

func TestPostEventsStoreFailure(t *testing.T) {
	s := newServer(t, failingStore{memIngest(t)}, 0)
	status, _, body := s.do(t, "POST", "/api/v1/events", volume("a", "c1"), true)
	if status != 500 || strings.Contains(body, "disk on fire") {
		t.Errorf("status %d body %s, want 500 with generic text", status, body)
	}
	if !strings.Contains(s.logs.String(), "disk on fire") {
		t.Errorf("the error was not logged: %q", s.logs.String())
	}
}

// "Each adapter exposes its routes as data (pattern, roles or
// access class, handler), written once."
func TestRoutes(t *testing.T) {
	s := newServer(t, memIngest(t), 0)
	want := []string{
		"POST /api/v1/events: ingest",
		"GET /api/v1/events: read or admin",
		"GET /api/v1/events/feed: read or admin",
		"GET /api/v1/rejected-events: admin",
		"GET /api/v1/audit: admin",
		"GET /api/v1/resource-types: read or admin",
		"GET /api/v1/resource-types/{platform}/{resource_type}: read or admin",
		"PUT /api/v1/resource-types/{platform}/{resource_type}: admin",
		"GET /api/v1/resources: read or admin",
		"GET /api/v1/resources/{cloud}/{resource_type}/{resource_id}: read or admin",
		"GET /api/v1/resources/{cloud}/{resource_type}/{resource_id}/events: read or admin",
		"GET /api/v1/resources/{cloud}/{resource_type}/{resource_id}/lifecycle: read or admin",
		"GET /api/v1/projects/{cloud}/{project_id}/summary: read or admin",
		"GET /api/v1/usage: read or admin",
		"POST /api/v1/clouds/{cloud}/sync: reconcile",
		"GET /api/v1/sync-runs: read or admin",
	}
	if diff := cmp.Diff(want, s.roles); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestRejectedEvents(t *testing.T) {
	s := newServer(t, memIngest(t), 0)
	body := "[" + `{"event_id":"a"} {"event_id":"b"}` + "]"
	// A missing comma breaks the array's structure: it cannot be split. (A
	// raw NUL inside an element makes only that item refused.)
	if status, _, _ := s.do(t, "POST", "/api/v1/events", body, true); status != 400 {
		t.Fatalf("status %d, want 400", status)
	}
	items := []string{`{"event_id":"a"}`, "{\"event_id\":\"b\",\"r\":\"\xff\"}", `{"event_id":"c","s":"\u0000"}`}
	for _, it := range items {
		if status, _, b := s.do(t, "POST", "/api/v1/events", it, true); status != 200 {
			t.Fatalf("%d %s", status, b)
		}
	}
	status, _, b := s.do(t, "GET", "/api/v1/rejected-events?limit=2", "", true)
	if status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	var page struct {
		Items []struct {
			ID         string          `json:"id"`
			Raw        json.RawMessage `json:"raw"`
			RawText    *string         `json:"raw_text"`
			RawBytes   *string         `json:"raw_bytes"`
			RawSize    int             `json:"raw_size"`
			Reason     string          `json:"reason"`
			EventID    string          `json:"event_id"`
			ReceivedAt string          `json:"received_at"`
		} `json:"items"`
		NextCursor *string `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(b), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 2 || page.NextCursor == nil {
		t.Fatalf("page %s", b)
	}
	// Tally's shape: id a UUID; raw the item as the JSON value it is.
	first := page.Items[0]
	if _, err := uuid.Parse(first.ID); err != nil || string(first.Raw) != items[0] || first.RawText != nil || first.RawBytes != nil || first.ReceivedAt != "2026-03-01T12:00:00Z" {
		t.Errorf("first item %s", b)
	}
	// Bytes that are not valid UTF-8: raw null, the exact bytes in base64.
	second := page.Items[1]
	raw, _ := base64.StdEncoding.DecodeString(*second.RawBytes)
	if string(raw) != items[1] || string(second.Raw) != "null" || second.RawText != nil || second.RawSize != len(items[1]) || second.ID == first.ID {
		t.Errorf("invalid UTF-8 item %s", b)
	}
	after := *page.NextCursor
	status, _, b = s.do(t, "GET", "/api/v1/rejected-events?cursor="+after, "", true)
	if err := json.Unmarshal([]byte(b), &page); err != nil || status != 200 {
		t.Fatal(status, err)
	}
	// Valid JSON, byte for byte, its \u0000 escape included.
	if len(page.Items) != 1 || string(page.Items[0].Raw) != items[2] || page.NextCursor != nil || !strings.Contains(b, `"next_cursor":null`) {
		t.Errorf("last page %s", b)
	}
	// UTF-8 that is not one valid JSON value (a member given twice, which
	// RFC 7493 rules out): raw null, the text in raw_text.
	const twice = `{"event_id":"d","x":1,"x":2}`
	if status, _, b := s.do(t, "POST", "/api/v1/events", "["+twice+"]", true); status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	page.Items = nil
	status, _, b = s.do(t, "GET", "/api/v1/rejected-events?cursor="+after, "", true)
	if err := json.Unmarshal([]byte(b), &page); err != nil || status != 200 || len(page.Items) != 2 {
		t.Fatal(status, err, b)
	}
	if it := page.Items[1]; string(it.Raw) != "null" || it.RawText == nil || *it.RawText != twice || it.RawBytes != nil {
		t.Errorf("an item with a member twice: %s", b)
	}
	status, _, b = s.do(t, "GET", "/api/v1/rejected-events?from=2026-03-01T13:00:00Z", "", true)
	if status != 200 || !strings.Contains(b, `"items":[]`) {
		t.Errorf("empty window: %d %s", status, b)
	}
	for _, q := range []struct{ query, param string }{
		{"cursor=bogus", "cursor"}, {"cursor=", "cursor"}, {"limit=0", "limit"}, {"limit=1001", "limit"}, {"limit=x", "limit"},
		{"from=yesterday", "from"}, {"to=2026-03-01", "to"},
	} {
		status, _, b := s.do(t, "GET", "/api/v1/rejected-events?"+q.query, "", true)
		var p struct {
			Errors []struct{ Member string }
		}
		_ = json.Unmarshal([]byte(b), &p)
		if status != 400 || len(p.Errors) != 1 || p.Errors[0].Member != "/"+q.param {
			t.Errorf("%s: %d %s, want 400 naming %s", q.query, status, b, q.param)
		}
	}
	// Every bad parameter at once, the adapter's and the library's, with
	// one problem code and a rule each (Errors: one vocabulary).
	status, _, b = s.do(t, "GET", "/api/v1/rejected-events?from=yesterday&limit=1001&cursor=bogus&to=x", "", true)
	var p problem.Details
	_ = json.Unmarshal([]byte(b), &p)
	want := []event.Problem{
		{Member: "/from", Rule: event.RuleFormat, Message: event.TimeFormatMessage + ` ("yesterday" is too short for date, time and zone)`},
		{Member: "/to", Rule: event.RuleFormat, Message: event.TimeFormatMessage + ` ("x" is too short for date, time and zone)`},
		{Member: "/limit", Rule: event.RuleMaximum, Message: "must be an integer from 1 to 1000"},
		{Member: "/cursor", Rule: event.RuleFormat, Message: "must be the next_cursor of an earlier page"},
	}
	if diff := cmp.Diff(want, p.Errors); status != 400 || p.Code != "invalid_parameter" || diff != "" {
		t.Errorf("every bad parameter: %d %s (-want +got):\n%s", status, p.Code, diff)
	}
}

func TestOversizeDeadLetterHasNoRaw(t *testing.T) {
	s := newServer(t, memIngest(t), 0)
	big := `{"event_id":"big","pad":"` + strings.Repeat("x", ingest.DefaultMaxDeadLetterBytes) + `"}`
	if status, _, b := s.do(t, "POST", "/api/v1/events", big, true); status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	_, _, b := s.do(t, "GET", "/api/v1/rejected-events", "", true)
	want := fmt.Sprintf(`"raw":null,"raw_text":null,"raw_bytes":null,"raw_size":%d`, len(big))
	if !strings.Contains(b, want) {
		t.Errorf("%s, want %s", b, want)
	}
}

func TestResourceTypes(t *testing.T) {
	s := newServer(t, memIngest(t), 0)
	status, _, b := s.do(t, "GET", "/api/v1/resource-types", "", true)
	var list struct {
		Items []struct {
			Platform     string          `json:"platform"`
			ResourceType string          `json:"resource_type"`
			SizeSchema   json.RawMessage `json:"size_schema"`
			Version      int64           `json:"version"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(b), &list); err != nil || status != 200 || len(list.Items) != 5 {
		t.Fatalf("%d %s", status, b)
	}
	status, _, b = s.do(t, "GET", "/api/v1/resource-types/openstack/volume", "", true)
	if status != 200 || !strings.Contains(b, `"resource_type":"volume"`) || !strings.Contains(b, `"version":1`) {
		t.Errorf("get: %d %s", status, b)
	}
	if status, _, b := s.do(t, "GET", "/api/v1/resource-types/openstack/nothing", "", true); status != 404 {
		t.Errorf("unknown pair: %d %s", status, b)
	}
	doc := `{"type":"object","required":["gb"]}`
	status, _, b = s.do(t, "PUT", "/api/v1/resource-types/openstack/share", doc, true)
	if status != 200 || !strings.Contains(b, `"size_schema":`+doc) || !strings.Contains(b, `"version":1`) {
		t.Errorf("put: %d %s", status, b)
	}
	// Errors: one vocabulary. A refused size schema lists its
	// problems under errors like every other 400, each keyword named by its
	// JSON Pointer into the body (under /size_schema for the wrapper).
	for _, tt := range []struct {
		body string
		want []string // member + " " + rule of each problem
	}{
		{`{"type":"nonsense"}`, []string{"/type enum", "/type type"}},
		{`{"size_schema":{"properties":{"gb":{"minimum":"one"}}}}`, []string{"/size_schema/properties/gb/minimum type"}},
		{`{"size_schema":{"minimum":1e1000001}}`, []string{"/size_schema/minimum numberRange"}},
		{`{"size_schema":{},"sizeSchema":{}}`, []string{"/sizeSchema additionalProperties"}},
		{`not json`, []string{" syntax"}},
	} {
		status, _, b := s.do(t, "PUT", "/api/v1/resource-types/openstack/share", tt.body, true)
		var p struct {
			Code   string
			Errors []event.Problem
		}
		_ = json.Unmarshal([]byte(b), &p)
		var got []string
		for _, e := range p.Errors {
			if e.Message == "" {
				t.Errorf("put %s: a problem without a message: %s", tt.body, b)
			}
			got = append(got, e.Member+" "+e.Rule)
		}
		if status != 400 || p.Code != "invalid_size_schema" {
			t.Errorf("put %s: %d %s, want 400 invalid_size_schema", tt.body, status, b)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("put %s: problems (-want +got):\n%s", tt.body, diff)
		}
	}
}

func TestAudit(t *testing.T) {
	s := newServer(t, memIngest(t), 0)
	s.do(t, "POST", "/api/v1/events", "["+volume("a", "c2")+","+volume("b", "c3")+"]", true)
	status, _, b := s.do(t, "GET", "/api/v1/audit?action=events.scope_violation&limit=1", "", true)
	var page struct {
		Items []struct {
			Action, Credential, EventID, Cloud string
		} `json:"items"`
		NextCursor *string `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(b), &page); err != nil || status != 200 {
		t.Fatal(status, b)
	}
	if len(page.Items) != 1 || page.NextCursor == nil || !strings.Contains(b, `"credential":"c1-collector","event_id":"a","platform":"openstack","cloud":"c2"`) {
		t.Errorf("%s", b)
	}
	if status, _, b := s.do(t, "GET", "/api/v1/audit?cursor=nope", "", true); status != 400 {
		t.Errorf("bad cursor: %d %s", status, b)
	}
}

func TestNewValidates(t *testing.T) {
	_, err := ingesthttp.New(nil, nil, ingesthttp.Options{MaxBodyBytes: -1})
	if err == nil || !strings.Contains(err.Error(), "service") || !strings.Contains(err.Error(), "CallerFrom") || !strings.Contains(err.Error(), "MaxBodyBytes") {
		t.Errorf("New: %v, want every problem", err)
	}
}

// A cancelled or vanished client is handled the same in both
// adapters: no 5xx, no answer, logged below ERROR.
func TestClientGoneGetsNoAnswer(t *testing.T) {
	t.Run("memstore", func(t *testing.T) { testClientGone(t, memIngest(t)) })
	t.Run("pgstore", func(t *testing.T) { testClientGone(t, pgBackend(t)) })
}

func testClientGone(t *testing.T, st stores) {
	s := newServer(t, st, 0)
	for _, tt := range []struct{ method, path, body string }{
		{"POST", "/api/v1/events", volume("a", "c1")},
		{"GET", "/api/v1/resources", ""},
		{"GET", "/api/v1/rejected-events", ""},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		req := httptest.NewRequestWithContext(ctx, tt.method, tt.path, strings.NewReader(tt.body))
		req.Header.Set("Authorization", "Bearer ok")
		rec := httptest.NewRecorder()
		// No answer: the handler closes the connection
		// (panic(http.ErrAbortHandler)), never leaving net/http to send
		// an implicit 200 for a request that stored nothing.
		aborted := func() (v any) {
			defer func() { v = recover() }()
			s.Config.Handler.ServeHTTP(rec, req)
			return nil
		}()
		if aborted != http.ErrAbortHandler || rec.Body.Len() != 0 || len(rec.Header()) != 0 {
			t.Errorf("%s %s: answered %d %v %s (panic %v), want the connection aborted", tt.method, tt.path, rec.Code, rec.Header(), rec.Body, aborted)
		}
	}
	if strings.Contains(s.logs.String(), "level=ERROR") {
		t.Errorf("a gone client was logged as an error:\n%s", s.logs.String())
	}
}

// The query bounds read times with event.ParseTime, the grammar of the
// canonical event's timestamp and of every correlation time: each accepts
// exactly the strings ParseTime accepts.
func TestQueryTimesAgreeWithParseTime(t *testing.T) {
	s := newServer(t, memIngest(t), 0)
	inputs := []string{
		"2026-03-01T12:00:00Z", "2026-03-01t12:00:00z", "2026-03-01T12:00:00.5+01:00",
		"2026-03-01T12:00:00+24:00", "2026-03-01T12:00:00+0100", "2026-03-01 12:00:00Z",
		"2026-03-01T1:00:00Z", "2026-03-01T12:00:00", "2026-02-29T12:00:00Z",
		"2026-03-01T23:59:60Z", "0000-01-01T00:00:00+01:00",
	}
	routes := []struct{ path, param string }{
		{"/api/v1/rejected-events", "from"}, {"/api/v1/rejected-events", "to"},
		{"/api/v1/audit", "from"}, {"/api/v1/audit", "to"}, {"/api/v1/resources", "alive_at"},
	}
	for _, in := range inputs {
		_, perr := event.ParseTime(in)
		want := 200
		if perr != nil {
			want = 400
		}
		for _, r := range routes {
			status, _, b := s.do(t, "GET", r.path+"?"+r.param+"="+url.QueryEscape(in), "", true)
			if diff := cmp.Diff(want, status); diff != "" {
				t.Errorf("%s %s=%q (-want +got):\n%s%s", r.path, r.param, in, diff, b)
			}
		}
	}
}

// tooManyMonthsStore refuses every commit as a store does whose events
// fall in more new partitions than one batch makes.
type tooManyMonthsStore struct{ backend }

func (tooManyMonthsStore) Commit(context.Context, ingest.Batch) (ingest.Committed, error) {
	return ingest.Committed{}, fmt.Errorf("pgstore: commit batch: %w: /timestamp: 1000 months, at most 24", ingest.ErrTooManyMonths)
}

// "every refusal names the member and the rule, a client error is never a
// 5xx": a batch refused for its number of months without a partition is a
// 400 naming body.timestamp and the store's bound, not a 500 (and not a
// 503, which the client would retry as it is).
func TestPostEventsTooManyMonths(t *testing.T) {
	s := newServer(t, tooManyMonthsStore{memIngest(t)}, 0)
	status, _, body := s.do(t, "POST", "/api/v1/events", volume("a", "c1"), true)
	if status != 400 || !strings.Contains(body, `"body.timestamp"`) || !strings.Contains(body, "at most 24") {
		t.Errorf("status %d body %s, want 400 naming body.timestamp and the bound", status, body)
	}
}
