package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/google/go-cmp/cmp"
)

// Meshery's notification center: getEventSummaryByUser (GET
// /api/events/summary) and getEventsAggregate (GET /api/events?cumulative=)
// answer in the shapes @meshery/schemas v1beta3 declares (EventSummaryPage,
// EventsAggregate with audit), each request and answer validated by
// kin-openapi against those schemas (testdata/meshery-events-v1beta3.yaml),
// on both stores; the figures are checked too.
func TestMesheryNotificationCenter(t *testing.T) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile("testdata/meshery-events-v1beta3.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	bothStores(t, func(t *testing.T, st Store) {
		h, err := New(st, Options{Authenticator: testAuthenticator(t), LegacyCreate200: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, body := range []string{
			`{"category":"audit","action":"login","severity":"informational","description":"signed in"}`,
			`{"category":"istio","action":"deploy","severity":"error","description":"one"}`,
			`{"category":"istio","action":"deploy","severity":"warning","description":"two"}`,
		} {
			if w := meshkitPublish(t, h, "t-events-token-01", body); w.Code != 200 {
				t.Fatalf("create: %d %s", w.Code, w.Body)
			}
		}
		// The audit event is read: the unread aggregate leaves it out.
		code, m := meshGet(t, h, nil, "/api/events/list?category=audit", "t-events-token-01")
		if code != 200 || len(m["data"].([]any)) != 1 {
			t.Fatalf("list: %d %v", code, m)
		}
		id := m["data"].([]any)[0].(map[string]any)["id"].(string)
		if w := meshPut(h, "/api/events/"+id+"/status", `{"status":"read"}`); w.Code != 200 {
			t.Fatalf("mark read: %d %s", w.Code, w.Body)
		}
		row := map[string]any{"userId": "u", "totalCount": 3.0, "readCount": 1.0, "unreadCount": 2.0, "countBySeverityLevel": []any{
			map[string]any{"severity": "error", "count": 1.0},
			map[string]any{"severity": "warning", "count": 1.0},
			map[string]any{"severity": "informational", "count": 1.0},
		}}
		for _, tt := range []struct {
			name, target, token string
			want                map[string]any
		}{
			{"summary, events role: its own row", "/api/events/summary?page=0&pagesize=10", "t-events-token-01",
				map[string]any{"page": 0.0, "pageSize": 10.0, "totalCount": 1.0, "data": []any{row}}},
			{"summary, read role: every user of the organization", "/api/events/summary", "t-read-token-0001",
				map[string]any{"page": 0.0, "pageSize": 25.0, "totalCount": 1.0, "data": []any{row}}},
			{"summary, a page past the end", "/api/events/summary?page=1&pageSize=1&order=desc&search=o", "t-read-token-0001",
				map[string]any{"page": 1.0, "pageSize": 1.0, "totalCount": 1.0, "data": []any{}}},
			{"aggregate, cumulative", "/api/events?cumulative=true", "t-events-token-01",
				map[string]any{"audit": 1.0, "istio": 2.0}},
			{"aggregate, unread (cumulative=false)", "/api/events?cumulative=false", "t-read-token-0001",
				map[string]any{"audit": 0.0, "istio": 2.0}},
			{"aggregate, no parameter", "/api/events", "t-events-token-01",
				map[string]any{"audit": 0.0, "istio": 2.0}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				code, got := meshGet(t, h, router, tt.target, tt.token)
				if diff := cmp.Diff(tt.want, got); code != 200 || diff != "" {
					t.Errorf("%d (-want +got):\n%s", code, diff)
				}
			})
		}
	})
}

// meshGet sends GET target with token to h and decodes the JSON answer;
// with router set, the request and the answer are validated against the
// document it routes by.
func meshGet(t *testing.T, h http.Handler, router routers.Router, target, token string) (int, map[string]any) {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8080"+target, nil)
	r.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if router != nil {
		route, params, err := router.FindRoute(r)
		if err != nil {
			t.Fatalf("%s matches no operation of the schema: %v", target, err)
		}
		in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			t.Errorf("request %s does not match the schema: %v", target, err)
		}
		if err := openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
			RequestValidationInput: in, Status: w.Code, Header: w.Header(), Body: io.NopCloser(bytes.NewReader(w.Body.Bytes())),
		}); err != nil {
			t.Errorf("answer to %s does not match the schema: %v\n%s", target, err, w.Body)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		t.Fatalf("%s: %d %s", target, w.Code, w.Body)
	}
	return w.Code, m
}

// meshPut sends PUT target with body as the events credential.
func meshPut(h http.Handler, target, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPut, target, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer t-events-token-01")
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}
