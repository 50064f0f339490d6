package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tallyWire sends requests as B42Labs/tally's own clients do: the
// collector's sender (internal/providers/openstack/sender.go: POST of a JSON
// array, "Bearer", Content-Type application/json) and the reporting client
// (cmd/tally-vertical-slice/client.go: GET with "Bearer" and query
// parameters, no other header).
type tallyWire struct {
	t   *testing.T
	srv *httptest.Server
}

func newTallyWire(t *testing.T, st Store) *tallyWire {
	h, err := New(st, Options{Authenticator: testAuthenticator(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &tallyWire{t: t, srv: srv}
}

func (w *tallyWire) do(method, path, token, contentType, body string) (int, string) {
	w.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, w.srv.URL+path, rd)
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := w.srv.Client().Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		w.t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// send posts a batch as the collector's sender does.
func (w *tallyWire) send(items ...string) string {
	w.t.Helper()
	code, body := w.do("POST", "/api/v1/events", "t-ingest-token-01", "application/json", "["+strings.Join(items, ",")+"]")
	if code != 200 {
		w.t.Fatalf("sender's POST: %d %s", code, body)
	}
	return body
}

// get reads as the vertical slice's client does.
func (w *tallyWire) get(path string) (int, string) {
	w.t.Helper()
	return w.do("GET", path, "t-read-token-0001", "", "")
}

func osEvent(id, ts, typ, resourceID, payload string) string {
	return `{"event_id":"` + id + `","timestamp":"` + ts + `","event_type":"` + typ + `","platform":"openstack","cloud":"os-a",` +
		`"resource_type":"instance","resource_id":"` + resourceID + `","project_id":"p1","payload":` + payload + `}`
}

const instancePayload = `{"state":"active","size":{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"}}`

// Tally's reporting client: the vertical slice walks
// GET /api/v1/resources?cloud=…&project_id=…&resource_type=instance&status=all&limit=1000
// to bill deleted instances too; status=active (the default) must leave the
// deleted ones out.
func TestTallyClientResourceStatus(t *testing.T) {
	bothStores(t, func(t *testing.T, st Store) {
		w := newTallyWire(t, st)
		w.send(
			osEvent("e1", "2026-03-01T10:00:00Z", "compute.instance.create.end", "i-live", instancePayload),
			osEvent("e2", "2026-03-01T10:00:00Z", "compute.instance.create.end", "i-gone", instancePayload),
			osEvent("e3", "2026-03-01T11:00:00Z", "compute.instance.delete.end", "i-gone", `{}`),
		)
		ids := func(path string) []string {
			t.Helper()
			code, body := w.get(path)
			var page struct {
				Items []struct {
					ResourceID string `json:"resource_id"`
				} `json:"items"`
				NextCursor *string `json:"next_cursor"`
			}
			if err := json.Unmarshal([]byte(body), &page); err != nil || code != 200 {
				t.Fatalf("GET %s: %d %s", path, code, body)
			}
			out := []string{}
			for _, it := range page.Items {
				out = append(out, it.ResourceID)
			}
			return out
		}
		walk := url.Values{"cloud": {"os-a"}, "project_id": {"p1"}, "resource_type": {"instance"}, "limit": {"1000"}}
		for _, tt := range []struct {
			status string
			want   []string
		}{
			{"all", []string{"i-gone", "i-live"}},
			{"active", []string{"i-live"}},
			{"deleted", []string{"i-gone"}},
			{"", []string{"i-live"}}, // absent: active, as in the Reporting API
		} {
			q := url.Values{}
			for k, v := range walk {
				q[k] = v
			}
			if tt.status != "" {
				q.Set("status", tt.status)
			}
			if diff := cmp.Diff(tt.want, ids("/api/v1/resources?"+q.Encode())); diff != "" {
				t.Errorf("status=%q (-want +got):\n%s", tt.status, diff)
			}
		}
	})
}

// PUT /api/v1/resource-types/{platform}/{resource_type} with the
// Reporting API's body {"size_schema": {…}} registers the inner schema, so
// a later size that breaks it is refused; the bare schema stays accepted.
func TestTallyClientRegisterResourceType(t *testing.T) {
	bothStores(t, func(t *testing.T, st Store) {
		w := newTallyWire(t, st)
		const inner = `{"type":"object","required":["gb"],"properties":{"gb":{"type":"number","minimum":1}}}`
		code, body := w.do("PUT", "/api/v1/resource-types/openstack/share", "t-admin-token-001", "application/json", `{"size_schema":`+inner+`}`)
		if code != 200 || !strings.Contains(body, `"size_schema":`+inner+`,`) {
			t.Fatalf("PUT of the wrapper: %d %s; want 200 storing the inner schema", code, body)
		}
		share := func(id, size string) string {
			return `{"event_id":"` + id + `","timestamp":"2026-03-01T10:00:00Z","event_type":"share.create.end","platform":"openstack","cloud":"os-a",` +
				`"resource_type":"share","resource_id":"s-` + id + `","project_id":"p1","payload":{"state":"available","size":` + size + `}}`
		}
		res := w.send(share("ok", `{"gb":2}`), share("bad", `{"tb":2}`))
		if !strings.Contains(res, `"accepted":1`) || !strings.Contains(res, `"event_id":"bad","reason":"size_schema:`) {
			t.Errorf("a size that breaks the registered inner schema: %s; want it refused with size_schema:", res)
		}
		code, body = w.do("PUT", "/api/v1/resource-types/openstack/share", "t-admin-token-001", "application/json", `{"type":"object","required":["tb"]}`)
		if code != 200 || !strings.Contains(body, `"size_schema":{"type":"object","required":["tb"]}`) || !strings.Contains(body, `"version":2`) {
			t.Errorf("PUT of a bare schema: %d %s", code, body)
		}
		for _, tt := range []struct{ name, body, want string }{
			{"wrapper with another member", `{"size_schema":{"type":"object"},"version":3}`, `"member":"/version","rule":"additionalProperties"`},
			{"wrapper around a schema that does not compile", `{"size_schema":{"type":12}}`, `"code":"invalid_size_schema","errors":[{"member":"/size_schema/type","rule":"enum"`},
		} {
			code, body := w.do("PUT", "/api/v1/resource-types/openstack/share", "t-admin-token-001", "application/json", tt.body)
			if code != 400 || !strings.Contains(body, tt.want) {
				t.Errorf("%s: %d %s; want 400 containing %s", tt.name, code, body, tt.want)
			}
		}
	})
}

// The vertical slice's fetchHistory reads
// GET /api/v1/resources/{cloud}/instance/{id}/events as {"items":[StoredEvent…]}
// with received_at, and GET /api/v1/events pages with the Reporting API's
// filters and cursor.
func TestTallyClientEventHistory(t *testing.T) {
	bothStores(t, func(t *testing.T, st Store) {
		w := newTallyWire(t, st)
		w.send(
			osEvent("e2", "2026-03-01T11:00:00Z", "compute.instance.delete.end", "i-1", `{}`),
			osEvent("e1", "2026-03-01T10:00:00Z", "compute.instance.create.end", "i-1", instancePayload),
			osEvent("e3", "2026-03-01T10:30:00Z", "compute.instance.create.end", "i-2", instancePayload),
		)
		type page struct {
			Items []struct {
				EventID    string `json:"event_id"`
				ResourceID string `json:"resource_id"`
				Source     string `json:"source"`
				ReceivedAt string `json:"received_at"`
			} `json:"items"`
			NextCursor *string `json:"next_cursor"`
		}
		read := func(path string) page {
			t.Helper()
			code, body := w.get(path)
			var p page
			if err := json.Unmarshal([]byte(body), &p); err != nil || code != 200 {
				t.Fatalf("GET %s: %d %s", path, code, body)
			}
			for _, it := range p.Items {
				if it.ReceivedAt == "" || it.Source != "collector" {
					t.Errorf("GET %s: item %s without received_at or source: %s", path, it.EventID, body)
				}
			}
			return p
		}
		h := read("/api/v1/resources/" + url.PathEscape("os-a") + "/instance/" + url.PathEscape("i-1") + "/events")
		var got []string
		for _, it := range h.Items {
			got = append(got, it.EventID)
		}
		if diff := cmp.Diff([]string{"e1", "e2"}, got); diff != "" || h.NextCursor != nil {
			t.Errorf("history (-want +got):\n%s next_cursor %v", diff, h.NextCursor)
		}
		if code, body := w.get("/api/v1/resources/os-a/instance/i-9/events"); code != 404 {
			t.Errorf("history of an unknown resource: %d %s", code, body)
		}
		got = nil
		q := url.Values{"cloud": {"os-a"}, "event_type": {"compute.instance.create.end"}, "from": {"2026-03-01T00:00:00Z"}, "to": {"2026-03-02T00:00:00Z"}, "limit": {"1"}}
		for range 4 {
			p := read("/api/v1/events?" + q.Encode())
			for _, it := range p.Items {
				got = append(got, it.EventID)
			}
			if p.NextCursor == nil {
				break
			}
			q.Set("cursor", *p.NextCursor)
		}
		if diff := cmp.Diff([]string{"e1", "e3"}, got); diff != "" {
			t.Errorf("GET /api/v1/events pages (-want +got):\n%s", diff)
		}
	})
}
