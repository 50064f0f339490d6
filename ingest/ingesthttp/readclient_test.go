package ingesthttp_test

import (
	"context"
	stdjson "encoding/json"
	"errors"
	"iter"
	"net/http"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/ingesthttp"
	"github.com/tallyhq/tally/ingest/projection"
)

// readFixture stores seven volumes of cloud c1, three invalid items (dead
// letters) and two of another cloud (audited scope violations) on a server
// of st, and returns a client of it.
func readFixture(t *testing.T, st stores) *ingesthttp.Client {
	t.Helper()
	s := newServer(t, st, 0)
	body := "["
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		body += volume(id, "c1") + ","
	}
	body += `{"event_id":"bad-1"},{"event_id":"bad-2"},{"event_id":"bad-3"},` + volume("x", "c2") + "," + volume("y", "c2") + "]"
	if code, _, b := s.do(t, http.MethodPost, "/api/v1/events", body, true); code != 200 {
		t.Fatalf("post: %d %s", code, b)
	}
	return newClient(t, s.URL, ingesthttp.ClientOptions{})
}

// collect drains seq, failing t on its error.
func collect[T any](t *testing.T, seq iter.Seq2[T, error]) []T {
	t.Helper()
	var out []T
	for v, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// jsonOf is v as JSON, for comparing answers whose types hold raw JSON.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The read methods of the Client against the real routes, on both stores:
// each paging helper read with limit=1 (and 2, and 3) gives exactly the
// items of one big page, in order, none skipped or repeated; one resource
// reads with its history; a refusal is a *StatusError naming the route.
func TestClientReads(t *testing.T) {
	bothStores(t, func(t *testing.T, st stores) {
		c := readFixture(t, st)
		ctx := context.Background()
		events, err := c.Events(ctx, ingest.EventFilter{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(events.Items) != 7 || events.NextCursor != nil {
			t.Fatalf("one big page: %d events, next %v, want 7 and none", len(events.Items), events.NextCursor)
		}
		resources, err := c.Resources(ctx, projection.Filter{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		rejected, err := c.RejectedEvents(ctx, ingest.Page{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		audit, err := c.Audit(ctx, "", ingest.Page{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(resources.Items) != 7 || len(rejected.Items) != 3 || len(audit.Items) != 2 {
			t.Fatalf("resources %d, dead letters %d, audit rows %d; want 7, 3 and 2", len(resources.Items), len(rejected.Items), len(audit.Items))
		}
		for _, limit := range []int{1, 2, 3} {
			for _, tt := range []struct {
				name      string
				want, got string
			}{
				{"events", jsonOf(t, events.Items), jsonOf(t, collect(t, c.AllEvents(ctx, ingest.EventFilter{Limit: limit})))},
				{"resources", jsonOf(t, resources.Items), jsonOf(t, collect(t, c.AllResources(ctx, projection.Filter{Limit: limit})))},
				{"dead letters", jsonOf(t, rejected.Items), jsonOf(t, collect(t, c.AllRejectedEvents(ctx, ingest.Page{Limit: limit})))},
				{"audit", jsonOf(t, audit.Items), jsonOf(t, collect(t, c.AllAudit(ctx, "", ingest.Page{Limit: limit})))},
			} {
				if diff := cmp.Diff(tt.want, tt.got); diff != "" {
					t.Errorf("%s, limit=%d pages against one page (-want +got):\n%s", tt.name, limit, diff)
				}
			}
		}
		t.Run("filters go on the wire", func(t *testing.T) {
			got := collect(t, c.AllEvents(ctx, ingest.EventFilter{Cloud: "c1", ResourceID: "v-c", Limit: 1}))
			if len(got) != 1 || got[0].Event.EventID != "c" || got[0].ReceivedAt.IsZero() {
				t.Errorf("resource v-c: %+v, want its one event with received_at", got)
			}
			if a := collect(t, c.AllAudit(ctx, "no.such.action", ingest.Page{Limit: 1})); len(a) != 0 {
				t.Errorf("audit of an unknown action: %d rows, want 0", len(a))
			}
		})
		t.Run("one resource with its history", func(t *testing.T) {
			d, err := c.Resource(ctx, projection.Key{Cloud: "c1", ResourceType: "volume", ResourceID: "v-b"})
			if err != nil {
				t.Fatal(err)
			}
			if d.Resource.ResourceID != "v-b" || d.Resource.State != "available" || len(d.Events) != 1 || d.EventsNextCursor != nil {
				t.Errorf("resource: %+v", d)
			}
			_, err = c.Resource(ctx, projection.Key{Cloud: "c1", ResourceType: "volume", ResourceID: "nope"})
			var se *ingesthttp.StatusError
			if !errors.As(err, &se) || se.StatusCode != 404 {
				t.Errorf("unknown resource: %v, want a StatusError of 404", err)
			}
		})
		t.Run("a refusal ends the listing with a StatusError naming the route", func(t *testing.T) {
			n := 0
			var last error
			for _, err := range c.AllEvents(ctx, ingest.EventFilter{Cursor: "!!"}) {
				n++
				last = err
			}
			var se *ingesthttp.StatusError
			if n != 1 || !errors.As(last, &se) || se.StatusCode != 400 || !strings.Contains(last.Error(), "GET /api/v1/events") {
				t.Errorf("%d yields, last %v; want one StatusError of 400 naming GET /api/v1/events", n, last)
			}
		})
		t.Run("a consumer that stops reads no further page", func(t *testing.T) {
			n := 0
			for _, err := range c.AllEvents(ctx, ingest.EventFilter{Limit: 1}) {
				if err != nil {
					t.Fatal(err)
				}
				n++
				if n == 2 {
					break
				}
			}
			if n != 2 {
				t.Errorf("read %d, want 2", n)
			}
		})
	})
}

// A dead letter nested as deep as a JSON decoder allows (10,000 levels,
// the item's own object level 1) still leaves a page a client reads: the
// listing nests it further down (the answer, items, the item), so raw as
// the JSON value would cross every decoder's limit (encoding/json's and
// go-json-experiment's are 10,000; the server's own encoder answered 500)
// and make the whole page, and every page after it, unreadable. An item
// deeper than event.MaxDepth is served as raw_text, its exact bytes.
func TestDeepDeadLetterKeepsThePageReadable(t *testing.T) {
	s := newServer(t, memIngest(t), 0)
	for _, n := range []int{10, 10000 - 1} {
		item := `{"event_id":"deep","x":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`
		if code, _, b := s.do(t, http.MethodPost, "/api/v1/events", item, true); code != 200 {
			t.Fatalf("post: %d %.200s", code, b)
		}
	}
	_, _, body := s.do(t, http.MethodGet, "/api/v1/rejected-events", "", true)
	var v any
	if err := stdjson.Unmarshal([]byte(body), &v); err != nil {
		t.Errorf("encoding/json cannot read the page: %v", err)
	}
	c := newClient(t, s.URL, ingesthttp.ClientOptions{})
	items := collect(t, c.AllRejectedEvents(context.Background(), ingest.Page{}))
	if len(items) != 2 {
		t.Fatalf("%d dead letters, want 2", len(items))
	}
	if string(items[0].Raw) == "null" || items[0].RawText != nil {
		t.Errorf("a shallow item: raw %.40s raw_text %v, want the JSON value", items[0].Raw, items[0].RawText)
	}
	if string(items[1].Raw) != "null" || items[1].RawText == nil || len(*items[1].RawText) != items[1].RawSize {
		t.Errorf("the deep item: raw %.40s, raw_text set %v, want raw null and the exact text", items[1].Raw, items[1].RawText != nil)
	}
}

// Bad input never gets a 5xx, and every stored event stays readable: an
// event nested exactly event.MaxDepth deep (item 1, payload 2, x 3…) is
// stored, and every route that embeds it answers 200 with a page
// encoding/json reads; one level deeper is refused as that item. (At the
// decoder's own limit, 10,000, such an event made every one of these
// routes answer 500 for good.)
func TestDeepEventStaysReadable(t *testing.T) {
	s := newServer(t, memIngest(t), 0)
	deep := func(id string, n int) string {
		return `{"event_id":"` + id + `","timestamp":"2026-03-01T10:00:00Z","event_type":"volume.create.end","platform":"openstack",` +
			`"cloud":"c1","resource_type":"volume","resource_id":"v-` + id + `","project_id":"p",` +
			`"payload":{"state":"available","size":{"size_gb":1,"type":"ssd"},"x":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}}`
	}
	code, _, b := s.do(t, http.MethodPost, "/api/v1/events", "["+deep("ok", event.MaxDepth-2)+","+deep("deep", event.MaxDepth-1)+"]", true)
	if code != 200 || !strings.Contains(b, `"accepted":1`) || !strings.Contains(b, `"rule"`) && !strings.Contains(b, "levels deep") {
		t.Fatalf("post: %d %.300s", code, b)
	}
	for _, p := range []string{"/api/v1/events", "/api/v1/events/feed", "/api/v1/resources/c1/volume/v-ok",
		"/api/v1/resources/c1/volume/v-ok/events", "/api/v1/resources/c1/volume/v-ok/lifecycle", "/api/v1/resources", "/api/v1/rejected-events"} {
		code, _, b := s.do(t, http.MethodGet, p, "", true)
		var v any
		if err := stdjson.Unmarshal([]byte(b), &v); code != 200 || err != nil {
			t.Errorf("GET %s: %d, encoding/json: %v; %.200s", p, code, err, b)
		}
	}
}
