package correlatehttp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/correlate/correlatehttp"
	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/internal/problem"
	"github.com/tallyhq/tally/route"
	"github.com/tallyhq/tally/store/memstore"
	"github.com/tallyhq/tally/store/pgstore"
)

// callerFrom authenticates "Bearer org/user" (user may be empty).
func callerFrom(r *http.Request) (correlate.Caller, bool) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return correlate.Caller{}, false
	}
	org, user, _ := strings.Cut(tok, "/")
	return correlate.Caller{Organization: org, User: user}, org != ""
}

type observer struct {
	mu  sync.Mutex
	got []correlate.Disposition
}

func (o *observer) Disposition(d correlate.Disposition) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, d)
}

type server struct {
	t   *testing.T
	srv *httptest.Server
	h   *correlatehttp.Handler
	mux *http.ServeMux
	obs *observer
	log *bytes.Buffer
}

// memCorrelate returns the correlation store of a new in-memory database.
func memCorrelate(t testing.TB) *memstore.Correlate {
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return db.Correlate()
}

func newServer(t *testing.T, st correlate.Store, opts correlate.Options) *server {
	t.Helper()
	opts.Now = func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }
	s := &server{t: t, obs: &observer{}, log: &bytes.Buffer{}}
	opts.Observer = s.obs
	svc, err := correlate.New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	h, err := correlatehttp.New(svc, correlatehttp.Options{
		CallerFrom: callerFrom, MaxBodyBytes: 4096,
		Logger: slog.New(slog.NewTextHandler(s.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	s.h = h
	s.mux = http.NewServeMux()
	// Mountable on the server's own mux; the server authenticates.
	route.Mount(s.mux, h.Routes(), func(rt route.Route) http.Handler { return rt.Handler })
	s.srv = httptest.NewServer(s.mux)
	t.Cleanup(s.srv.Close)
	return s
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (s *server) do(method, path, token, body string, header ...string) response {
	s.t.Helper()
	req, err := http.NewRequest(method, s.srv.URL+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

func TestCreateStatusAndDisposition(t *testing.T) {
	s := newServer(t, memCorrelate(t), correlate.Options{})
	key := `"correlationKey":"meshery-server/k8s/1/unreachable"`
	tests := []struct {
		name, body string
		wantStatus int
		wantDisp   string
		wantCount  int64
	}{
		{"opening: 201 created", `{"category":"c","action":"a",` + key + `,"idempotencyKey":"i1"}`, 201, "created", 1},
		{"counting: 200 incremented", `{"category":"c","action":"a",` + key + `,"occurrenceCount":2}`, 200, "incremented", 3},
		{"retry: 200 replayed", `{"category":"c","action":"a",` + key + `,"idempotencyKey":"i1"}`, 200, "replayed", 3},
		{"resolution: 200 resolved", `{"category":"c","action":"a",` + key + `,"resolvedAt":"2026-03-01T12:00:00Z","severity":"success"}`, 200, "resolved", 3},
		{"legacy create: 201 created by default", `{"category":"c","action":"a"}`, 201, "created", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := s.do("POST", "/api/events", "org-1/alice", tt.body)
			if res.status != tt.wantStatus || res.header.Get("Event-Disposition") != tt.wantDisp {
				t.Fatalf("status %d, Event-Disposition %q, want %d %q; body %s",
					res.status, res.header.Get("Event-Disposition"), tt.wantStatus, tt.wantDisp, res.body)
			}
			e := decode[correlate.Event](t, res.body)
			var count int64
			if e.OccurrenceCount != nil {
				count = *e.OccurrenceCount
			}
			if count != tt.wantCount {
				t.Errorf("occurrenceCount %d, want %d", count, tt.wantCount)
			}
			if ct := res.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
	want := []correlate.Disposition{"created", "incremented", "replayed", "resolved", "created"}
	if diff := cmp.Diff(want, s.obs.got); diff != "" {
		t.Errorf("observed dispositions (-want +got):\n%s", diff)
	}
}

func TestCreateLegacy200(t *testing.T) {
	s := newServer(t, memCorrelate(t), correlate.Options{LegacyCreate200: true})
	res := s.do("POST", "/api/events", "org-1/alice", `{"category":"c","action":"a"}`)
	if res.status != 200 || res.header.Get("Event-Disposition") != "created" {
		t.Errorf("legacy create: %d %q, want 200 created", res.status, res.header.Get("Event-Disposition"))
	}
	res = s.do("POST", "/api/events", "org-1/alice", `{"category":"c","action":"a","correlationKey":"k"}`)
	if res.status != 201 {
		t.Errorf("create with correlationKey: %d, want 201", res.status)
	}
}

func TestEventJSONIsClosed(t *testing.T) {
	s := newServer(t, memCorrelate(t), correlate.Options{})
	res := s.do("POST", "/api/events", "org-1/alice", `{"category":"c","action":"a","correlationKey":"k","x-extra":1,"metadata":{"a":1}}`)
	members := decode[map[string]jsontext.Value](t, res.body)
	var names []string
	for k := range members {
		names = append(names, k)
	}
	allowed := map[string]bool{"id": true, "category": true, "action": true, "severity": true, "status": true,
		"description": true, "metadata": true, "createdAt": true, "updatedAt": true, "correlationKey": true,
		"occurrenceCount": true, "firstSeenAt": true, "lastSeenAt": true}
	for _, n := range names {
		if !allowed[n] {
			t.Errorf("unexpected member %q in %s", n, res.body)
		}
	}
	if len(names) != len(allowed) {
		t.Errorf("members %v, want %d of them", names, len(allowed))
	}
}

func TestCreateProblems(t *testing.T) {
	s := newServer(t, memCorrelate(t), correlate.Options{})
	tests := []struct {
		name, body string
		header     []string
		status     int
		code       string
		members    []string
	}{
		{"every problem is listed", `{"category":"","occurrenceCount":1.5,"traceId":"00000000000000000000000000000000","severity":"x"}`, nil,
			400, "invalid_event", []string{"/category", "/action", "/severity", "/occurrenceCount", "/traceId"}},
		{"invalid JSON, named where it can be", `{"category":`, nil, 400, "invalid_event", []string{"/category"}},
		{"not JSON at all", `category`, nil, 400, "invalid_event", []string{""}},
		{"duplicate member", `{"category":"c","action":"a","action":"b"}`, nil, 400, "invalid_event", []string{"/action"}},
		// docs/decisions.md, Times that contradict each other in one payload.
		{"lastSeenAt before firstSeenAt", `{"category":"c","action":"a","firstSeenAt":"2026-03-01T12:00:00Z","lastSeenAt":"2026-03-01T11:00:00Z"}`, nil, 400, "invalid_event", []string{"/lastSeenAt"}},
		{"already-resolved insert with resolvedAt before firstSeenAt", `{"category":"c","action":"a","correlationKey":"never-opened","firstSeenAt":"2026-03-01T12:00:00Z","resolvedAt":"2026-03-01T11:00:00Z"}`, nil, 400, "invalid_event", []string{"/resolvedAt"}},
		// docs/decisions.md, source: a real RFC 3986 URI-reference.
		{"source with an unclosed IP literal", `{"category":"c","action":"a","source":"http://[bad"}`, nil, 400, "invalid_event", []string{"/source"}},
		{"Idempotency-Key disagreeing with the body's idempotencyKey", `{"category":"c","action":"a","idempotencyKey":"a"}`,
			[]string{"Idempotency-Key", "b"}, 400, "invalid_event", []string{"/idempotencyKey"}},
		{"empty Idempotency-Key", `{"category":"c","action":"a"}`, []string{"Idempotency-Key", `""`}, 400, "invalid_event", []string{"/idempotencyKey"}},
		{"Idempotency-Key problem listed with the body's problems", `{"category":"c"}`, []string{"Idempotency-Key", strings.Repeat("k", 256)},
			400, "invalid_event", []string{"/action", "/idempotencyKey"}},
		{"body too large", `{"category":"c","action":"a","description":"` + strings.Repeat("x", 5000) + `"}`, nil, 413, "body_too_large", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := s.do("POST", "/api/events", "org-1/alice", tt.body, tt.header...)
			if res.status != tt.status || res.header.Get("Content-Type") != problem.ContentType {
				t.Fatalf("status %d (%s), want %d problem; body %s", res.status, res.header.Get("Content-Type"), tt.status, res.body)
			}
			p := decode[problem.Details](t, res.body)
			var members []string
			for _, m := range p.Errors {
				members = append(members, m.Member)
				if m.Message == "" {
					t.Errorf("member %q without message", m.Member)
				}
			}
			if string(p.Code) != tt.code || p.Status != tt.status {
				t.Errorf("problem %+v, want code %s status %d", p, tt.code, tt.status)
			}
			if diff := cmp.Diff(tt.members, members); diff != "" {
				t.Errorf("problem members (-want +got):\n%s", diff)
			}
			if res.header.Get("Event-Disposition") != "" {
				t.Errorf("a refused create has Event-Disposition %q", res.header.Get("Event-Disposition"))
			}
		})
	}
	// A refused create binds no key: the corrected retry is created.
	res := s.do("POST", "/api/events", "org-1/alice", `{"category":"c","action":"a","idempotencyKey":"a"}`)
	if res.status != 201 {
		t.Errorf("corrected retry: %d, want 201", res.status)
	}
}

func TestIdempotencyKeyHeader(t *testing.T) {
	s := newServer(t, memCorrelate(t), correlate.Options{})
	body := `{"category":"c","action":"a","correlationKey":"k"}`
	var got []string
	for _, h := range [][]string{
		{"Idempotency-Key", `"8e03978e-40d5-43e8-bc93-6894a57f9324"`},
		{"Idempotency-Key", `8e03978e-40d5-43e8-bc93-6894a57f9324`},
	} {
		res := s.do("POST", "/api/events", "org-1/alice", body, h...)
		got = append(got, res.header.Get("Event-Disposition"))
	}
	// The same key in the body and the header agrees.
	res := s.do("POST", "/api/events", "org-1/alice",
		`{"category":"c","action":"a","correlationKey":"k","idempotencyKey":"8e03978e-40d5-43e8-bc93-6894a57f9324"}`,
		"Idempotency-Key", "8e03978e-40d5-43e8-bc93-6894a57f9324")
	got = append(got, res.header.Get("Event-Disposition"))
	if diff := cmp.Diff([]string{"created", "replayed", "replayed"}, got); diff != "" {
		t.Errorf("dispositions (-want +got):\n%s", diff)
	}
}

// failingBody fails the test when read.
type failingBody struct{ t *testing.T }

func (b failingBody) Read([]byte) (int, error) {
	b.t.Error("the body was read before authentication")
	return 0, io.EOF
}

func TestUnauthenticated(t *testing.T) {
	s := newServer(t, memCorrelate(t), correlate.Options{})
	for _, rt := range []struct{ method, path string }{
		{"POST", "/api/events"}, {"GET", "/api/events/list"},
		{"PUT", "/api/events/0190c1d2-0000-7000-8000-000000000000/status"},
		{"DELETE", "/api/events/0190c1d2-0000-7000-8000-000000000000"},
	} {
		// docs/decisions.md: "Credentials are checked before the body is read".
		req := httptest.NewRequest(rt.method, rt.path, failingBody{t})
		req.Header.Set("Authorization", "Basic x")
		rec := httptest.NewRecorder()
		s.mux.ServeHTTP(rec, req)
		if rec.Code != 401 || rec.Header().Get("WWW-Authenticate") != problem.Challenge {
			t.Errorf("%s %s: %d %q, want 401 Bearer", rt.method, rt.path, rec.Code, rec.Header().Get("WWW-Authenticate"))
		}
	}
	res := s.do("POST", "/api/events", "", `{"category":"c","action":"a"}`)
	if res.status != 401 || decode[problem.Details](t, res.body).Code != "unauthorized" {
		t.Errorf("no credentials: %d %s", res.status, res.body)
	}
}

func TestListStatusDeleteAndScope(t *testing.T) {
	s := newServer(t, memCorrelate(t), correlate.Options{})
	create := func(token, body string) correlate.Event {
		res := s.do("POST", "/api/events", token, body)
		if res.status/100 != 2 {
			t.Fatalf("create: %d %s", res.status, res.body)
		}
		return decode[correlate.Event](t, res.body)
	}
	a := create("org-1/alice", `{"category":"connection","action":"connect","severity":"error","description":"prod-1 unreachable","correlationKey":"k1"}`)
	create("org-1/alice", `{"category":"design","action":"deploy","description":"deployed"}`)
	create("org-1/bob", `{"category":"connection","action":"connect","description":"bob's"}`)
	other := create("org-2/alice", `{"category":"connection","action":"connect","description":"other org"}`)

	res := s.do("GET", "/api/events/list?category=connection,design&severity=error&search=UNREACHABLE&pagesize=10&page=0&order=asc&resolved=false&correlationKey=k1", "org-1/alice", "")
	if res.status != 200 {
		t.Fatalf("list: %d %s", res.status, res.body)
	}
	page := decode[correlate.Page](t, res.body)
	if page.TotalCount != 1 || len(page.Data) != 1 || page.Data[0].ID != a.ID || page.PageSize != 10 {
		t.Errorf("filtered list = %s, want only %s", res.body, a.ID)
	}
	members := decode[map[string]jsontext.Value](t, res.body)
	// The counts again in snake_case, the names Meshery Server's remote
	// provider decodes.
	if diff := cmp.Diff([]string{"countBySeverityLevel", "count_by_severity_level", "data", "page", "pageSize", "page_size",
		"readCount", "read_count", "totalCount", "total_count"}, sortedNames(members)); diff != "" {
		t.Errorf("page members (-want +got):\n%s", diff)
	}
	if page := decode[correlate.Page](t, s.do("GET", "/api/events/list", "org-1/alice", "").body); page.TotalCount != 2 {
		t.Errorf("alice sees %d events, want her 2", page.TotalCount)
	}
	listRefusals(t, s)

	res = s.do("PUT", "/api/events/"+a.ID+"/status", "org-1/alice", `{"status":"read"}`)
	if res.status != 200 || decode[correlate.Event](t, res.body).Status != correlate.StatusRead {
		t.Errorf("status update: %d %s", res.status, res.body)
	}
	for _, tt := range []struct {
		name, token, path, body string
		status                  int
	}{
		{"an unknown status", "org-1/alice", a.ID, `{"status":"archived"}`, 400},
		{"no status", "org-1/alice", a.ID, `{}`, 400},
		{"not JSON", "org-1/alice", a.ID, `read`, 400},
		{"another organization's event", "org-1/alice", other.ID, `{"status":"read"}`, 404},
		{"another user's event", "org-1/bob", a.ID, `{"status":"read"}`, 404},
		{"not a UUID", "org-1/alice", "nope", `{"status":"read"}`, 404},
	} {
		t.Run("PUT status: "+tt.name, func(t *testing.T) {
			res := s.do("PUT", "/api/events/"+tt.path+"/status", tt.token, tt.body)
			if res.status != tt.status || res.header.Get("Content-Type") != problem.ContentType {
				t.Errorf("%d %s, want %d problem", res.status, res.body, tt.status)
			}
		})
	}

	if res := s.do("DELETE", "/api/events/"+other.ID, "org-1/alice", ""); res.status != 404 {
		t.Errorf("delete of another organization's event: %d, want 404", res.status)
	}
	if res := s.do("DELETE", "/api/events/"+a.ID, "org-1/alice", ""); res.status != 204 {
		t.Errorf("delete: %d %s, want 204", res.status, res.body)
	}
	if res := s.do("DELETE", "/api/events/"+a.ID, "org-1/alice", ""); res.status != 404 {
		t.Errorf("second delete: %d, want 404", res.status)
	}
	if page := decode[correlate.Page](t, s.do("GET", "/api/events/list", "org-1/alice", "").body); page.TotalCount != 1 {
		t.Errorf("after delete alice sees %d events, want 1", page.TotalCount)
	}
}

// listRefusals checks that getEvents refuses bad parameters, every one at
// once, each with its rule.
func listRefusals(t *testing.T, s *server) {
	t.Helper()
	res := s.do("GET", "/api/events/list?page=x&pageSize=1000&order=sideways&resolved=maybe", "org-1/alice", "")
	p := decode[problem.Details](t, res.body)
	// Every bad parameter at once, one problem code, a rule each.
	wantPs := []event.Problem{
		{Member: "/page", Rule: event.RuleType, Message: "must be an integer"},
		{Member: "/resolved", Rule: event.RuleType, Message: "must be true or false"},
		{Member: "/order", Rule: event.RuleEnum, Message: `must be "asc" or "desc", or a sort field, a space and a direction ("created_at desc")`},
		{Member: "/pageSize", Rule: event.RuleMaximum, Message: "must be between 1 and 100"},
	}
	if diff := cmp.Diff(wantPs, p.Errors); res.status != 400 || p.Code != "invalid_parameter" || diff != "" {
		t.Errorf("bad parameters: %d %s, want 400 invalid_parameter (-want +got):\n%s", res.status, p.Code, diff)
	}
	res = s.do("GET", "/api/events/list?pageSize=1000&order=sideways", "org-1/alice", "")
	if p := decode[problem.Details](t, res.body); res.status != 400 || len(p.Errors) != 2 {
		t.Errorf("bad values: %d %s, want 400 listing pageSize and order", res.status, res.body)
	}
	// pageSize=0 is not "the default": a client asking for no rows is told.
	res = s.do("GET", "/api/events/list?pageSize=0", "org-1/alice", "")
	if p := decode[problem.Details](t, res.body); res.status != 400 || len(p.Errors) != 1 || p.Errors[0].Member != "/pageSize" {
		t.Errorf("pageSize=0: %d %s, want 400 naming pageSize", res.status, res.body)
	}

	// The cost of a refusal is bounded: 4,000 bad values of a list
	// parameter are one problem naming the first (clipped to 40 bytes) and
	// counting the rest, never an answer larger than the query.
	var q strings.Builder
	q.WriteString("/api/events/list?severity=" + strings.Repeat("z", 100))
	for i := range 4000 {
		fmt.Fprintf(&q, "&severity=x%d&status=y%d", i, i)
	}
	res = s.do("GET", q.String(), "org-1/alice", "")
	wantPs = []event.Problem{
		{Member: "/severity", Rule: event.RuleEnum, Message: `"` + strings.Repeat("z", 40) + `…" is not a severity, nor are 4000 more of its values`},
		{Member: "/status", Rule: event.RuleEnum, Message: `"y0" is not a status, nor are 3999 more of its values`},
	}
	if p := decode[problem.Details](t, res.body); res.status != 400 || !cmp.Equal(wantPs, p.Errors) || len(res.body) > 2048 {
		t.Errorf("4,000 bad values: %d, %d bytes, want 400 with two problems in under 2 KiB (-want +got):\n%s", res.status, len(res.body), cmp.Diff(wantPs, p.Errors))
	}
}

func sortedNames(m map[string]jsontext.Value) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// brokenStore fails every create, as a lost database connection would.
type brokenStore struct{ *memstore.Correlate }

func (brokenStore) Create(context.Context, correlate.Create) (correlate.Event, correlate.Disposition, error) {
	return correlate.Event{}, "", errors.New("connection refused to 10.0.0.7:5432")
}

func TestInternalErrorIsLoggedNotShown(t *testing.T) {
	s := newServer(t, brokenStore{memCorrelate(t)}, correlate.Options{})
	res := s.do("POST", "/api/events", "org-1/alice", `{"category":"c","action":"a"}`)
	if res.status != 500 || bytes.Contains(res.body, []byte("10.0.0.7")) {
		t.Errorf("internal error: %d %s, want 500 with generic text", res.status, res.body)
	}
	if !strings.Contains(s.log.String(), "10.0.0.7") {
		t.Errorf("the internal error was not logged: %q", s.log.String())
	}
}

func TestNewValidatesOptions(t *testing.T) {
	_, err := correlatehttp.New(nil, correlatehttp.Options{MaxBodyBytes: -1})
	for _, want := range []string{"service", "CallerFrom", "MaxBodyBytes"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New error %v does not mention %s", err, want)
		}
	}
}

// A cancelled or vanished client is handled the same in both
// adapters: no 5xx, no answer, logged below ERROR.
func TestClientGoneGetsNoAnswer(t *testing.T) {
	t.Run("memstore", func(t *testing.T) { testClientGone(t, memCorrelate(t)) })
	t.Run("pgstore", func(t *testing.T) { testClientGone(t, pgtest.DB(t, pgstore.Options{}).Correlate()) })
}

func testClientGone(t *testing.T, st correlate.Store) {
	s := newServer(t, st, correlate.Options{})
	for _, tt := range []struct{ method, path, body string }{
		{"POST", "/api/events", `{"category":"c","action":"a"}`},
		{"GET", "/api/events/list", ""},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		req := httptest.NewRequestWithContext(ctx, tt.method, tt.path, strings.NewReader(tt.body))
		req.Header.Set("Authorization", "Bearer org-1/alice")
		rec := httptest.NewRecorder()
		// No answer: the handler closes the connection
		// (panic(http.ErrAbortHandler)), never leaving net/http to send
		// an implicit 200 for a request that stored nothing.
		aborted := func() (v any) {
			defer func() { v = recover() }()
			s.mux.ServeHTTP(rec, req)
			return nil
		}()
		if aborted != http.ErrAbortHandler || rec.Body.Len() != 0 || len(rec.Header()) != 0 {
			t.Errorf("%s %s: answered %d %v %s (panic %v), want the connection aborted", tt.method, tt.path, rec.Code, rec.Header(), rec.Body, aborted)
		}
	}
	if strings.Contains(s.log.String(), "level=ERROR") || !strings.Contains(s.log.String(), "client gone") {
		t.Errorf("a gone client was not logged at debug level:\n%s", s.log.String())
	}
}

// TestCreateRefusesQueryParameters: "Nothing is silently
// ignored" and "An unknown query parameter is refused with 400 naming it":
// createEvent takes no query parameter, so each one given is a problem
// (invalid_parameter, member "/<name>", rule additionalProperties), as on
// every other correlation route, and nothing is created.
func TestCreateRefusesQueryParameters(t *testing.T) {
	s := newServer(t, memCorrelate(t), correlate.Options{})
	const body = `{"category":"c","action":"a","idempotencyKey":"k-query"}`
	for _, tt := range []struct {
		name, query string
		members     []string
	}{
		{"one parameter", "?legacy=1", []string{"/legacy"}},
		{"an empty parameter", "?dryRun=", []string{"/dryRun"}},
		{"several, in name order", "?z=1&a=2&a=3", []string{"/a", "/z"}},
		{"a getEvents parameter is not one of createEvent", "?page=0", []string{"/page"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := s.do("POST", "/api/events"+tt.query, "org-1/alice", body)
			p := decode[problem.Details](t, res.body)
			var members, rules []string
			for _, e := range p.Errors {
				members = append(members, e.Member)
				rules = append(rules, e.Rule)
			}
			type answer struct {
				Status  int
				Code    string
				Members []string
				Rules   []string
			}
			wantRules := make([]string, len(tt.members))
			for i := range wantRules {
				wantRules[i] = event.RuleAdditionalProperties
			}
			want := answer{400, "invalid_parameter", tt.members, wantRules}
			got := answer{res.status, string(p.Code), members, rules}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("POST /api/events%s (-want +got):\n%s\n%s", tt.query, d, res.body)
			}
		})
	}
	// Nothing was created: the first create of the key is a 201.
	if res := s.do("POST", "/api/events", "org-1/alice", body); res.status != 201 {
		t.Errorf("create without a query parameter: %d %s, want 201", res.status, res.body)
	}
}

// Errors: one answer lists every problem of the parameters, an
// unknown one beside those the library judges. getEventTypes answered the
// unknown parameter alone, dropping a page out of range.
func TestEventTypesListsEveryParameterProblem(t *testing.T) {
	s := newServer(t, memCorrelate(t), correlate.Options{})
	res := s.do("GET", "/api/events/types?sort=x&page=-1&pageSize=x", "org-1/alice", "")
	p := decode[problem.Details](t, res.body)
	var got []string
	for _, e := range p.Errors {
		got = append(got, e.Member+" "+e.Rule)
	}
	want := []string{"/sort " + event.RuleAdditionalProperties, "/pageSize " + event.RuleType, "/page " + event.RuleMinimum}
	if res.status != 400 || p.Code != "invalid_parameter" {
		t.Errorf("GET /api/events/types: %d %s, want 400 invalid_parameter", res.status, res.body)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("problems (-want +got):\n%s\n%s", d, res.body)
	}
}
