package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// bothStores runs fn once on the in-memory store and once on PostgreSQL.
func bothStores(t *testing.T, fn func(t *testing.T, st Store)) {
	for name, open := range map[string]func(t *testing.T) Store{
		"memstore": func(t *testing.T) Store { return memStore(t) },
		"pgstore":  func(t *testing.T) Store { return pgStore(pgtest.DB(t, pgstore.Options{})) },
	} {
		t.Run(name, func(t *testing.T) { fn(t, open(t)) })
	}
}

// meshkitEvent is the body Meshery Server's PublishEventToProvider sends
// (meshery/meshery server/models/remote_provider.go): json.Marshal of
// meshkit's events.Event, whose members are snake_case and in the order of
// its generated struct's fields; metadata is whatever the builder set.
const meshkitEvent = `{"acted_upon":"5b0b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d","action":"register","category":"entity",` +
	`"created_at":"2020-01-01T00:00:00Z","description":"Registered 3 models","id":"11111111-2222-4333-8444-555555555555",` +
	`"metadata":{"count":3,"models":["istio"]},"operation_id":"7d2c8a3e-9b1f-4c5d-8e6f-0a1b2c3d4e5f","severity":"informational",` +
	`"status":"read","system_id":"0d1e2f3a-4b5c-4d6e-8f7a-8b9c0d1e2f3a","updated_at":"2020-01-01T00:00:00Z",` +
	`"user_id":"99999999-9999-4999-8999-999999999999"}`

// meshkitPublish sends body exactly as Meshery Server does: POST, the
// lower-case "bearer" scheme, and no Content-Type.
func meshkitPublish(t *testing.T, h http.Handler, token, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/api/events", bytes.NewBufferString(body))
	r.Header.Set("Authorization", "bearer "+token)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// Meshery Server publishing: "It treats every status other than
// 200 as a failure"; docs/decisions.md, Legacy create answer: "201 by default;
// 200 behind an option". And Meshery snake_case members: acted_upon,
// operation_id, system_id are recorded as actedUpon, operationId,
// systemId, returned by getEvents; the server-owned id, status,
// created_at, updated_at and user_id never override the server's values.
func TestMesheryServerPublishes(t *testing.T) {
	bothStores(t, func(t *testing.T, st Store) {
		for _, tt := range []struct {
			name   string
			legacy bool
			want   int
		}{
			{"default", false, http.StatusCreated},
			{"LegacyCreate200", true, http.StatusOK},
		} {
			t.Run(tt.name, func(t *testing.T) {
				h, err := New(st, Options{Authenticator: testAuthenticator(t), LegacyCreate200: tt.legacy})
				if err != nil {
					t.Fatal(err)
				}
				w := meshkitPublish(t, h, "t-events-token-01", meshkitEvent)
				if w.Code != tt.want || w.Header().Get("Event-Disposition") != "created" {
					t.Fatalf("publish: %d %s %s, want %d created", w.Code, w.Header().Get("Event-Disposition"), w.Body, tt.want)
				}
				var created map[string]any
				if err := json.Unmarshal(w.Body.Bytes(), &created); err != nil {
					t.Fatal(err)
				}
				id, _ := created["id"].(string)
				r := httptest.NewRequest(http.MethodGet, "/api/events/list?pagesize=100", nil)
				r.Header.Set("Authorization", "bearer t-events-token-01")
				lw := httptest.NewRecorder()
				h.ServeHTTP(lw, r)
				var page struct {
					Data []map[string]any `json:"data"`
				}
				if err := json.Unmarshal(lw.Body.Bytes(), &page); err != nil || lw.Code != 200 {
					t.Fatalf("list: %d %s", lw.Code, lw.Body)
				}
				var got map[string]any
				for _, e := range page.Data {
					if e["id"] == id {
						got = e
					}
				}
				if got == nil {
					t.Fatalf("getEvents does not list %s: %s", id, lw.Body)
				}
				if got["createdAt"] == "2020-01-01T00:00:00Z" || got["updatedAt"] == "2020-01-01T00:00:00Z" {
					t.Errorf("a sent created_at/updated_at overrode the server's: %v", got)
				}
				delete(got, "createdAt")
				delete(got, "updatedAt")
				want := map[string]any{
					"id": id, "actedUpon": "5b0b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d",
					"operationId": "7d2c8a3e-9b1f-4c5d-8e6f-0a1b2c3d4e5f", "systemId": "0d1e2f3a-4b5c-4d6e-8f7a-8b9c0d1e2f3a",
					"category": "entity", "action": "register", "severity": "informational",
					"status": "unread", "description": "Registered 3 models",
					"metadata": map[string]any{"count": float64(3), "models": []any{"istio"}},
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("listed event (-want +got):\n%s", diff)
				}
				if id == "11111111-2222-4333-8444-555555555555" {
					t.Errorf("the sent id overrode the server's")
				}
			})
		}
	})
}

// GetEvents: the Meshery UI's request (ui/rtk-query/
// notificationCenter.ts: filters spread as parameters, a Set as a JSON
// array, sort=created_at, order=desc, pagesize=15; the summary's page=0,
// pagesize=1, status) and the schema's filter parameter, encoded as
// URLSearchParams does; readCount and countBySeverityLevel; an unknown
// parameter is 400 naming it.
func TestMesheryUIGetEvents(t *testing.T) {
	bothStores(t, func(t *testing.T, st Store) {
		h, err := New(st, Options{Authenticator: testAuthenticator(t), LegacyCreate200: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, body := range []string{
			`{"category":"istio","action":"deploy","severity":"error","description":"one"}`,
			`{"category":"istio","action":"deploy","severity":"warning","description":"two"}`,
			`{"category":"istio","action":"undeploy","severity":"informational","description":"three"}`,
			`{"category":"connection","action":"connect","severity":"error","description":"four"}`,
		} {
			if w := meshkitPublish(t, h, "t-events-token-01", body); w.Code != 200 {
				t.Fatalf("create: %d %s", w.Code, w.Body)
			}
		}
		get := func(query string) (int, map[string]any) {
			r := httptest.NewRequest(http.MethodGet, "/api/events/list?"+query, nil)
			r.Header.Set("Authorization", "Bearer t-events-token-01")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			var m map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
				t.Fatalf("%s: %d %s", query, w.Code, w.Body)
			}
			return w.Code, m
		}
		descriptions := func(m map[string]any) []string {
			var out []string
			for _, e := range m["data"].([]any) {
				out = append(out, e.(map[string]any)["description"].(string))
			}
			return out
		}
		for _, tt := range []struct {
			name, query string
			want        []string
		}{
			{"UI list", `category=%5B%22istio%22%5D&severity=%5B%22error%22%2C%22warning%22%5D&page=0&sort=created_at&order=desc&pagesize=15`, []string{"two", "one"}},
			{"schema filter", `filter=%7B%22category%22%3A%5B%22istio%22%5D%2C%22action%22%3A%22undeploy%22%7D`, []string{"three"}},
			{"sort on a schema field", `sort=description&order=asc&pageSize=2`, []string{"four", "one"}},
		} {
			code, m := get(tt.query)
			if diff := cmp.Diff(tt.want, descriptions(m)); code != 200 || diff != "" {
				t.Errorf("%s: %d, descriptions (-want +got):\n%s", tt.name, code, diff)
			}
		}
		// The summary: page=0&pagesize=1&status=unread.
		var firstID string
		if _, m := get("sort=description&order=asc&pagesize=1"); len(m["data"].([]any)) == 1 {
			firstID = m["data"].([]any)[0].(map[string]any)["id"].(string)
		}
		pr := httptest.NewRequest(http.MethodPut, "/api/events/"+firstID+"/status", bytes.NewBufferString(`{"status":"read"}`))
		pr.Header.Set("Authorization", "Bearer t-events-token-01")
		pw := httptest.NewRecorder()
		h.ServeHTTP(pw, pr)
		if pw.Code != 200 {
			t.Fatalf("mark read: %d %s", pw.Code, pw.Body)
		}
		code, m := get("page=0&pagesize=1&status=unread")
		want := map[string]any{"totalCount": float64(3), "readCount": float64(1), "countBySeverityLevel": []any{
			map[string]any{"severity": "error", "count": float64(1)},
			map[string]any{"severity": "warning", "count": float64(1)},
			map[string]any{"severity": "informational", "count": float64(1)},
		}}
		got := map[string]any{"totalCount": m["totalCount"], "readCount": m["readCount"], "countBySeverityLevel": m["countBySeverityLevel"]}
		if diff := cmp.Diff(want, got); code != 200 || diff != "" {
			t.Errorf("summary: %d (-want +got):\n%s", code, diff)
		}
		for _, tt := range []struct{ query, member string }{
			{"author=me", "/author"},
			{"category=%5B1%5D", "/category"},
			{"filter=%7B%22provider%22%3A%5B%22x%22%5D%7D", "/filter/provider"},
			{"filter=nope", "/filter"},
			{"sort=firstName", "/sort"},
			// filter={"category":[…]} with category=…: refused, not one of
			// them silently ignored (nor joined, which widens the answer).
			{"filter=%7B%22category%22%3A%5B%22istio%22%5D%7D&category=mesh", "/filter/category"},
			{"filter=%7B%22severity%22%3A%22error%22%7D&severity=warning", "/filter/severity"},
		} {
			code, m := get(tt.query)
			errs, _ := m["errors"].([]any)
			if code != 400 || m["code"] != "invalid_parameter" || len(errs) != 1 || errs[0].(map[string]any)["member"] != tt.member {
				t.Errorf("%s: %d %v, want 400 invalid_parameter naming %s", tt.query, code, m, tt.member)
			}
		}
	})
}

// BulkUpdateEventStatus (PUT /api/events/status {ids, status}),
// bulkDeleteEvents (POST /api/events/delete {ids}), updateEventStatus's
// UpdateEventStatusResponse and getEventTypes, as @meshery/schemas v1beta3
// declares them.
func TestMesherySchemasEventOperations(t *testing.T) {
	bothStores(t, func(t *testing.T, st Store) {
		h, err := New(st, Options{Authenticator: testAuthenticator(t)})
		if err != nil {
			t.Fatal(err)
		}
		call := func(method, path, body string) (int, string) {
			r := httptest.NewRequest(method, path, bytes.NewBufferString(body))
			r.Header.Set("Authorization", "Bearer t-events-token-01")
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w.Code, w.Body.String()
		}
		var ids []string
		for _, body := range []string{`{"category":"istio","action":"deploy"}`, `{"category":"istio","action":"deploy"}`, `{"category":"connection","action":"connect"}`} {
			code, b := call("POST", "/api/events", body)
			var e struct{ ID string }
			if err := json.Unmarshal([]byte(b), &e); err != nil || code != 201 {
				t.Fatalf("create: %d %s", code, b)
			}
			ids = append(ids, e.ID)
		}
		for _, tt := range []struct {
			name, method, path, body string
			code                     int
			want                     string
		}{
			{"updateEventStatus", "PUT", "/api/events/" + ids[0] + "/status", `{"status":"read"}`, 200,
				`{"message":"Event status updated","eventId":"` + ids[0] + `","status":"read"}`},
			{"bulkUpdateEventStatus", "PUT", "/api/events/status", `{"ids":["` + ids[1] + `","` + ids[2] + `"],"status":"read"}`, 200,
				`{"updated":["` + ids[1] + `","` + ids[2] + `"]}`},
			{"getEventTypes", "GET", "/api/events/types?page=0&pagesize=10", ``, 200,
				`[{"category":"connection","action":"connect"},{"category":"istio","action":"deploy"}]`},
			{"bulkDeleteEvents", "POST", "/api/events/delete", `{"ids":["` + ids[0] + `","` + ids[2] + `"]}`, 200,
				`{"deleted":["` + ids[0] + `","` + ids[2] + `"]}`},
			{"bulkDeleteEvents again", "POST", "/api/events/delete", `{"ids":["` + ids[0] + `"]}`, 200, `{"deleted":[]}`},
		} {
			code, b := call(tt.method, tt.path, tt.body)
			if code != tt.code || b != tt.want+"\n" && b != tt.want {
				t.Errorf("%s: %d %s, want %d %s", tt.name, code, b, tt.code, tt.want)
			}
		}
		for _, tt := range []struct{ name, method, path, body, member string }{
			{"bulk status without status", "PUT", "/api/events/status", `{"ids":["` + ids[1] + `"]}`, "/status"},
			{"bulk status, an unknown member", "PUT", "/api/events/status", `{"ids":["` + ids[1] + `"],"status":"read","x":1}`, "/x"},
			{"bulk delete, an id not a UUID", "POST", "/api/events/delete", `{"ids":["nope"]}`, "/ids/0"},
			{"bulk delete, ids not an array", "POST", "/api/events/delete", `{"ids":"x"}`, "/ids"},
			{"types, an unknown parameter", "GET", "/api/events/types?sort=x", ``, "/sort"},
			{"bulk delete, a query parameter", "POST", "/api/events/delete?force=1", `{"ids":["` + ids[1] + `"]}`, "/force"},
			{"updateEventStatus, a query parameter", "PUT", "/api/events/" + ids[1] + "/status?x=1", `{"status":"read"}`, "/x"},
			{"deleteEvent, a query parameter", "DELETE", "/api/events/" + ids[1] + "?hard=true", ``, "/hard"},
		} {
			code, b := call(tt.method, tt.path, tt.body)
			var p struct {
				Errors []struct{ Member string } `json:"errors"`
			}
			if err := json.Unmarshal([]byte(b), &p); err != nil || code != 400 || len(p.Errors) != 1 || p.Errors[0].Member != tt.member {
				t.Errorf("%s: %d %s, want 400 naming %s", tt.name, code, b, tt.member)
			}
		}
	})
}
