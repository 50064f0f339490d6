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

// issue 13, Meshery Server publishing: "It treats every status other than
// 200 as a failure"; DECISIONS.md, Legacy create answer: "201 by default;
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
				h, err := NewHandler(Config{Store: st, Authenticator: testAuthenticator(t), LegacyCreate200: tt.legacy})
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
