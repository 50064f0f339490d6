package server

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/memstore"
	"github.com/tallyhq/tally/store/pgstore"
)

// memStore returns the stores of a new in-memory database.
func memStore(tb testing.TB) Store {
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return Store{Ingest: db.Ingest(), Projection: db.Projection(), Correlate: db.Correlate(), Reconcile: db.Reconcile()}
}

// pgStore returns the stores of db.
func pgStore(db *pgstore.DB) Store {
	return Store{Ingest: db.Ingest(), Projection: db.Projection(), Correlate: db.Correlate(), Reconcile: db.Reconcile(), Ping: db.Ping}
}

func newTestHandler(t *testing.T, origins ...string) *Handler {
	t.Helper()
	h, err := New(memStore(t), Options{
		Authenticator:      testAuthenticator(t),
		CORSAllowedOrigins: origins,
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestNewRefusesBadOptions(t *testing.T) {
	_, err := New(Store{}, Options{MaxBodyBytes: -1, FeedMaxSubscribers: -1, FeedHeartbeat: time.Minute})
	for _, want := range []string{"Store.Ingest is required", "Store.Correlate is required", "Authenticator is required", "MaxBodyBytes is negative", "FeedMaxSubscribers is negative",
		"FeedHeartbeat (1m0s) is not between 0 and 30s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v; want it to say %q", err, want)
		}
	}
}

// "CORS: allowed origins from the flag;
// Access-Control-Expose-Headers: Event-Disposition; preflight answered."
func TestCORS(t *testing.T) {
	h := newTestHandler(t, "https://app.example")
	type answer struct {
		Status        int
		AllowOrigin   string
		AllowMethods  string
		AllowHeaders  string
		ExposeHeaders string
	}
	serve := func(r *http.Request) answer {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return answer{w.Code, w.Header().Get("Access-Control-Allow-Origin"), w.Header().Get("Access-Control-Allow-Methods"),
			w.Header().Get("Access-Control-Allow-Headers"), w.Header().Get("Access-Control-Expose-Headers")}
	}
	preflight := func(origin string) *http.Request {
		r := httptest.NewRequest("OPTIONS", "/api/events", nil)
		r.Header.Set("Origin", origin)
		r.Header.Set("Access-Control-Request-Method", "POST")
		r.Header.Set("Access-Control-Request-Headers", "authorization, content-type, idempotency-key")
		return r
	}
	tests := []struct {
		name string
		req  *http.Request
		want answer
	}{
		{"preflight from an allowed origin", preflight("https://app.example"),
			answer{Status: 204, AllowOrigin: "https://app.example", AllowMethods: "POST", AllowHeaders: "authorization, content-type, idempotency-key"}},
		{"preflight from another origin", preflight("https://evil.example"), answer{Status: 204}},
		{"request from an allowed origin", func() *http.Request {
			r := httptest.NewRequest("POST", "/api/events", strings.NewReader(`{"category":"c","action":"a"}`))
			r.Header.Set("Origin", "https://app.example")
			r.Header.Set("Authorization", "Bearer t-events-token-01")
			return r
		}(), answer{Status: 201, AllowOrigin: "https://app.example", ExposeHeaders: "Event-Disposition, Www-Authenticate"}},
		{"request from another origin", func() *http.Request {
			r := httptest.NewRequest("GET", "/healthz", nil)
			r.Header.Set("Origin", "https://evil.example")
			return r
		}(), answer{Status: 200}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := cmp.Diff(tt.want, serve(tt.req)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}

	// Without allowed origins, no CORS header at all.
	w := httptest.NewRecorder()
	newTestHandler(t).ServeHTTP(w, preflight("https://app.example"))
	if got := w.Header().Get("Access-Control-Allow-Origin"); got != "" {
		t.Errorf("no origins configured: Access-Control-Allow-Origin %q", got)
	}
}

func TestMetrics(t *testing.T) {
	h := newTestHandler(t)
	post := func(path, token, body string) int {
		r := httptest.NewRequest("POST", path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	// Two events of a pair with no size schema (counted unvalidated), one
	// refused item, one out of scope.
	ev := func(id, cloud string) string {
		return `{"event_id":"` + id + `","timestamp":"2026-03-01T12:00:00Z","event_type":"widget.create.end",` +
			`"platform":"openstack","cloud":"` + cloud + `","resource_type":"widget","resource_id":"w-` + id + `","project_id":"p",` +
			`"payload":{"state":"active","size":{"n":1}}}`
	}
	if c := post("/api/v1/events", "t-ingest-token-01", "["+ev("1", "os-a")+","+ev("2", "os-a")+","+ev("1", "os-a")+`,{"x":1},`+ev("3", "os-b")+"]"); c != 200 {
		t.Fatalf("ingest: %d", c)
	}
	for range 2 {
		if c := post("/api/events", "t-events-token-01", `{"category":"c","action":"a","correlationKey":"k"}`); c/100 != 2 {
			t.Fatalf("create: %d", c)
		}
	}
	got := map[string]string{}
	for _, series := range []string{
		`tally_ingest_unvalidated_size_total{platform="openstack",resource_type="widget"}`,
		`tally_ingest_events_ingested_total`,
		`tally_ingest_events_duplicate_total`,
		`tally_ingest_events_rejected_total{reason="schema"}`,
		`tally_ingest_events_rejected_total{reason="scope"}`,
		`tally_ingest_events_rejected_total{reason="size_schema"}`,
		`tally_correlate_dispositions_total{disposition="created"}`,
		`tally_correlate_dispositions_total{disposition="incremented"}`,
		`tally_correlate_dispositions_total{disposition="resolved"}`,
		`tally_correlate_dispositions_total{disposition="replayed"}`,
		`tally_http_request_duration_seconds_count{code="200",route="POST /api/v1/events"}`,
		`tally_http_request_duration_seconds_count{code="201",route="POST /api/events"}`,
		`tally_http_request_duration_seconds_count{code="200",route="POST /api/events"}`,
	} {
		got[series] = scrape(t, h, series)
	}
	want := map[string]string{
		// canonical-event.md, Size schemas: accepted unvalidated, counted.
		`tally_ingest_unvalidated_size_total{platform="openstack",resource_type="widget"}`:  "2",
		`tally_ingest_events_ingested_total`:                                                "2",
		`tally_ingest_events_duplicate_total`:                                               "1",
		`tally_ingest_events_rejected_total{reason="schema"}`:                               "1",
		`tally_ingest_events_rejected_total{reason="scope"}`:                                "1",
		`tally_ingest_events_rejected_total{reason="size_schema"}`:                          "0",
		`tally_correlate_dispositions_total{disposition="created"}`:                         "1",
		`tally_correlate_dispositions_total{disposition="incremented"}`:                     "1",
		`tally_correlate_dispositions_total{disposition="resolved"}`:                        "0",
		`tally_correlate_dispositions_total{disposition="replayed"}`:                        "0",
		`tally_http_request_duration_seconds_count{code="200",route="POST /api/v1/events"}`: "1",
		`tally_http_request_duration_seconds_count{code="201",route="POST /api/events"}`:    "1",
		`tally_http_request_duration_seconds_count{code="200",route="POST /api/events"}`:    "1",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("metrics (-want +got):\n%s", d)
	}
	if scrape(t, h, "go_goroutines") == "" {
		t.Error("/metrics lacks the Go runtime collector")
	}

	// Unmatched paths share one label value, so scanners cannot grow the
	// label set.
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/no/such/path/1", nil))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/no/such/path/2", nil))
	if got := scrape(t, h, `tally_http_request_duration_seconds_count{code="404",route="unmatched"}`); got != "2" {
		t.Errorf("unmatched requests: %q, want 2", got)
	}
	// Two handlers in one process do not collide: each has its own registry.
	newTestHandler(t)
}

func TestReadyz(t *testing.T) {
	url := pgtest.URL(t)
	st, err := pgstore.Open(context.Background(), url, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(pgStore(st), Options{Authenticator: testAuthenticator(t)})
	if err != nil {
		t.Fatal(err)
	}
	probe := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/readyz", nil))
		return w
	}
	if w := probe(); w.Code != 200 {
		t.Errorf("/readyz with the database up: %d", w.Code)
	}
	st.Close()
	// The same answer as every other route's when the store is unavailable.
	if w := probe(); w.Code != 503 || !strings.Contains(w.Body.String(), `"code":"store_unavailable"`) || w.Header().Get("Retry-After") == "" {
		t.Errorf("/readyz with the store closed: %d %s (Retry-After %q), want 503 store_unavailable with Retry-After", w.Code, w.Body, w.Header().Get("Retry-After"))
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/healthz", nil))
	if w.Code != 200 {
		t.Errorf("/healthz with the store closed: %d, want 200 (the process is up)", w.Code)
	}
}

func TestNotFoundAndMethodNotAllowed(t *testing.T) {
	h := newTestHandler(t)
	tests := []struct {
		method, path string
		status       int
		allow        string
	}{
		{"GET", "/nope", 404, ""},
		{"DELETE", "/api/v1/events", 405, "GET, HEAD, POST"},
		{"POST", "/api/v1/resource-types/openstack/instance", 405, "GET, HEAD, PUT"},
		{"GET", "/api/events/abc", 405, "DELETE"},
	}
	for _, tt := range tests {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(tt.method, tt.path, nil))
		if w.Code != tt.status || w.Header().Get("Allow") != tt.allow || w.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s %s: %d Allow %q %q; want %d Allow %q problem+json", tt.method, tt.path, w.Code, w.Header().Get("Allow"), w.Header().Get("Content-Type"), tt.status, tt.allow)
		}
	}
}

// scrape returns the value of one series of GET /metrics, "" when absent.
func scrape(t *testing.T, h http.Handler, series string) string {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range strings.Split(w.Body.String(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

// The request log names the credential that made a call, never its token,
// and the route pattern reaches both the log and the metrics.
func TestRequestLogNamesTheCredential(t *testing.T) {
	var logs bytes.Buffer
	h, err := New(memStore(t), Options{
		Authenticator: testAuthenticator(t),
		Logger:        slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{"t-admin-token-001", "wrong-token"} {
		r := httptest.NewRequest("GET", "/api/v1/audit", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d log lines, want 2:\n%s", len(lines), logs.String())
	}
	for i, want := range []string{`status=200`, `status=401`} {
		if !strings.Contains(lines[i], `route="GET /api/v1/audit"`) || !strings.Contains(lines[i], want) {
			t.Errorf("line %d: %s; want the route and %s", i, lines[i], want)
		}
	}
	if !strings.Contains(lines[0], "credential=ops") || !strings.Contains(lines[1], `credential=""`) {
		t.Errorf("credentials not logged as expected:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "t-admin-token-001") || strings.Contains(logs.String(), "wrong-token") {
		t.Errorf("a token reached the log:\n%s", logs.String())
	}
}

// docs/decisions.md, Who reads correlated events: "An events caller reads its own
// (organization, user); a read credential of an organization reads every
// event of that organization."
func TestWhoReadsCorrelatedEvents(t *testing.T) {
	creds, err := ParseCredentials([]byte(`{"credentials":[
	  {"name":"alice","token":"t-alice-token-001","roles":["events"],"organization":"acme","user":"alice"},
	  {"name":"bob","token":"t-bob-token-00001","roles":["events"],"organization":"acme","user":"bob"},
	  {"name":"other","token":"t-other-token-001","roles":["events"],"organization":"globex","user":"alice"},
	  {"name":"dash","token":"t-read-token-0001","roles":["read"],"organization":"acme"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAuthenticator(creds, AuthenticatorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, open := range map[string]func(t *testing.T) Store{
		"memstore": func(t *testing.T) Store { return memStore(t) },
		"pgstore":  func(t *testing.T) Store { return pgStore(pgtest.DB(t, pgstore.Options{})) },
	} {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			h, err := New(st, Options{Authenticator: a})
			if err != nil {
				t.Fatal(err)
			}
			call := func(method, path, token, body string) *httptest.ResponseRecorder {
				r := httptest.NewRequest(method, path, strings.NewReader(body))
				r.Header.Set("Authorization", "Bearer "+token)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w
			}
			for _, tok := range []string{"t-alice-token-001", "t-bob-token-00001", "t-other-token-001"} {
				if w := call("POST", "/api/events", tok, `{"category":"c","action":"a","description":"`+tok+`"}`); w.Code != 201 {
					t.Fatalf("create as %s: %d %s", tok, w.Code, w.Body)
				}
			}
			got := map[string]string{}
			for who, tok := range map[string]string{"alice": "t-alice-token-001", "dash": "t-read-token-0001"} {
				w := call("GET", "/api/events/list?order=asc", tok, "")
				var page struct {
					Data []struct {
						Description string `json:"description"`
					} `json:"data"`
				}
				if err := json.Unmarshal(w.Body.Bytes(), &page); err != nil || w.Code != 200 {
					t.Fatalf("list as %s: %d %s", who, w.Code, w.Body)
				}
				var ds []string
				for _, d := range page.Data {
					ds = append(ds, d.Description)
				}
				got[who] = strings.Join(ds, ",")
			}
			want := map[string]string{"alice": "t-alice-token-001", "dash": "t-alice-token-001,t-bob-token-00001"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("listed descriptions (-want +got):\n%s", diff)
			}
		})
	}
}

// Read credentials: "A caller or events credential with no user
// never correlates: warn at start for such a credential."
func TestWarnsForAnEventsCredentialWithoutUser(t *testing.T) {
	creds, err := ParseCredentials([]byte(`{"credentials":[
	  {"name":"public","token":"t-public-token-01","roles":["events"],"organization":"acme"},
	  {"name":"app","token":"t-events-token-01","roles":["events"],"organization":"acme","user":"u"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAuthenticator(creds, AuthenticatorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	if _, err := New(memStore(t), Options{
		Authenticator: a,
		Logger:        slog.New(slog.NewTextHandler(&logs, nil))}); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if strings.Count(out, "level=WARN") != 1 || !strings.Contains(out, "credential=public") || !strings.Contains(out, "never correlate") {
		t.Errorf("log, want one warning naming credential public:\n%s", out)
	}
}
