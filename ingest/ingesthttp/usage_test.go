package ingesthttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/ingesthttp"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/ingest/usage"
	"github.com/tallyhq/tally/internal/feed"
	"github.com/tallyhq/tally/route"
	"github.com/tallyhq/tally/store/memstore"
)

func instance(id, typ, at, project, size string) string {
	p := `{"state":"active"`
	if size != "" {
		p += `,"size":` + size
	}
	p += "}"
	return `{"event_id":"` + id + `","timestamp":"` + at + `","event_type":"compute.instance.` + typ + `","platform":"openstack",` +
		`"cloud":"c1","resource_type":"instance","resource_id":"i-1","project_id":"` + project + `","payload":` + p + `}`
}

var usageHistory = "[" + strings.Join([]string{
	instance("u1", "create.end", "2026-03-01T00:00:00Z", "P", `{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"}`),
	instance("u2", "resize.confirm.end", "2026-03-11T00:00:00Z", "P", `{"vcpus":4,"ram_gb":8,"disk_gb":40,"flavor":"m1.large"}`),
	instance("u3", "delete.end", "2026-03-21T00:00:00.5Z", "P", ""),
}, ",") + "]"

// The README's call, "vcpu-hours of project P in March by flavor", through
// the route and the Go client, on both stores.
func TestUsageRoute(t *testing.T) {
	bothStores(t, func(t *testing.T, st stores) {
		s := newServer(t, st, 0)
		if status, _, b := s.do(t, "POST", "/api/v1/events", usageHistory, true); status != 200 || !strings.Contains(b, `"accepted":3`) {
			t.Fatalf("ingest: %d %s", status, b)
		}
		c := newClient(t, s.URL, ingesthttp.ClientOptions{})
		q := usage.Query{ProjectID: "P", From: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC),
			GroupBy: []string{"size.flavor"}, Quantity: "size.vcpus", Unit: usage.UnitHour}
		var a usage.Answer
		deadline := time.Now().Add(30 * time.Second)
		for {
			var err error
			if a, err = c.Usage(context.Background(), q); err != nil {
				t.Fatal(err)
			}
			if len(a.Items) == 2 || time.Now().After(deadline) { // PostgreSQL: readable once older transactions end
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		type item struct{ Flavor, Seconds, Quantity string }
		got := []item{}
		for _, it := range a.Items {
			got = append(got, item{string(it.Group[0].Value), it.Seconds, it.Quantity})
		}
		want := []item{{`"m1.large"`, "864000.5", "960.0005555555555556"}, {`"m1.small"`, "864000", "480"}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		// The same call over raw HTTP, byte for byte the client's answer.
		status, _, body := s.do(t, "GET", "/api/v1/usage?"+ingesthttp.UsageValues(usage.Query{
			ProjectID: "P", From: q.From, To: q.To, GroupBy: q.GroupBy, Quantity: q.Quantity, Unit: q.Unit, AsOf: a.AsOf,
		}).Encode(), "", true)
		again, _ := json.Marshal(a)
		if status != 200 || strings.TrimSpace(body) != string(again) {
			t.Errorf("GET as of %s: %d\n%s\nwant\n%s", a.AsOf, status, body, again)
		}

		l, err := c.Lifecycle(context.Background(), projection.Key{Cloud: "c1", ResourceType: "instance", ResourceID: "i-1"})
		if err != nil || len(l.Intervals) != 2 || len(l.Events) != 3 || l.Intervals[1].To == nil {
			t.Errorf("lifecycle: %+v, %v", l, err)
		}
		var se *ingesthttp.StatusError
		if _, err := c.Lifecycle(context.Background(), projection.Key{Cloud: "c1", ResourceType: "instance", ResourceID: "nope"}); !errors.As(err, &se) || se.StatusCode != 404 {
			t.Errorf("unknown resource: %v, want 404", err)
		}
		sum, err := c.ProjectSummary(context.Background(), usage.SummaryQuery{Cloud: "c1", ProjectID: "P", From: q.From, To: q.To})
		wantSum := []usage.ProjectActivity{{ResourceType: "instance", Created: 1, Deleted: 1, TotalMinutes: 28800}}
		if diff := cmp.Diff(wantSum, sum.ResourceTypes); err != nil || diff != "" {
			t.Errorf("summary (-want +got):\n%s%v", diff, err)
		}
		status, _, body = s.do(t, "GET", "/api/v1/resources?at=2026-03-15T00:00:00Z", "", true)
		if status != 200 || !strings.Contains(body, `"size":{"vcpus":4,"ram_gb":8,"disk_gb":40,"flavor":"m1.large"}`) {
			t.Errorf("resources at an instant: %d %s", status, body)
		}
	})
}

func TestUsageRouteRefusals(t *testing.T) {
	s := newServer(t, memIngest(t), 0)
	month := "from=2026-03-01T00:00:00Z&to=2026-04-01T00:00:00Z"
	for _, tt := range []struct {
		name, target string
		status       int
		members      []string
	}{
		{"every bad parameter at once", "/api/v1/usage?from=yesterday&window=week&unit=day&sort=asc", 400, []string{"/from", "/window", "/unit", "/to", "/sort"}},
		{"empty group_by", "/api/v1/usage?" + month + "&group_by=", 400, []string{"/group_by"}},
		{"a cursor of another query", "/api/v1/usage?" + month + "&cursor=WyJ1MSIsMSwiIiwxXQ", 400, []string{"/cursor"}},
		{"an as_of the store never gave", "/api/v1/usage?" + month + "&as_of=AWUCAOgHJzV0jQ", 400, []string{"/as_of"}},
		{"window=hour over 400 days", "/api/v1/usage?from=2026-01-01T00:00:00Z&to=2027-03-01T00:00:00Z&window=hour", 422, nil},
		{"repeated", "/api/v1/usage?" + month + "&unit=hour&unit=second", 400, []string{"/unit"}},
		{"at with alive_at", "/api/v1/resources?at=2026-03-01T00:00:00Z&alive_at=2026-03-01T00:00:00Z", 400, []string{"/at"}},
		{"at malformed", "/api/v1/resources?at=soon", 400, []string{"/at"}},
		{"summary without to", "/api/v1/projects/c1/P/summary?from=2026-03-01T00:00:00Z", 400, []string{"/to"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := s.do(t, "GET", tt.target, "", true)
			if status != tt.status {
				t.Fatalf("%d %s, want %d", status, body, tt.status)
			}
			var p struct {
				Code   string `json:"code"`
				Errors []struct {
					Member string `json:"member"`
				} `json:"errors"`
			}
			if err := json.Unmarshal([]byte(body), &p); err != nil {
				t.Fatal(err)
			}
			if tt.status == 422 && p.Code != "result_too_large" {
				t.Errorf("code %s, want result_too_large", p.Code)
			}
			got := map[string]bool{}
			for _, e := range p.Errors {
				got[e.Member] = true
			}
			for _, m := range tt.members {
				if !got[m] {
					t.Errorf("no problem for %s in %s", m, body)
				}
			}
		})
	}
}

// FuzzUsageQuery: any query string of GET /api/v1/usage is answered 200 with
// an answer that decodes, or 400/422 with a problem; never a 5xx.
func FuzzUsageQuery(f *testing.F) {
	for _, seed := range []string{
		"from=2026-03-01T00:00:00Z&to=2026-04-01T00:00:00Z",
		"from=2026-03-01T00:00:00Z&to=2026-04-01T00:00:00Z&window=day&group_by=project_id,size.flavor&quantity=size.vcpus&unit=hour",
		"from=0001-01-01T00:00:00Z&to=9999-12-31T23:59:59Z&window=month",
		"from=2026-03-01T00:00:00.123456Z&to=2026-03-01T00:00:00.123457Z&window=hour&limit=1&cursor=x",
		"from=2026-03-01T00:00:00Z&to=2026-04-01T00:00:00Z&group_by=size.,state,state&as_of=AA",
	} {
		f.Add(seed)
	}
	h := usageHandler(f)
	f.Fuzz(func(t *testing.T, raw string) {
		req := httptest.NewRequest("GET", "/api/v1/usage", nil)
		req.URL.RawQuery = raw
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		switch w.Code {
		case 200:
			var a usage.Answer
			if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
				t.Fatalf("200 with a body that does not decode: %v\n%s", err, w.Body)
			}
		case 400, 422:
			if !strings.Contains(w.Body.String(), `"code"`) {
				t.Fatalf("%d without a problem: %s", w.Code, w.Body)
			}
		default:
			t.Fatalf("query %q: %d %s", raw, w.Code, w.Body)
		}
	})
}

// usageHandler serves the ingestion routes over a memstore holding
// usageHistory.
func usageHandler(tb testing.TB) http.Handler {
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	svc, err := ingest.New(db.Ingest(), ingest.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	items, err := ingest.SplitBatch([]byte(usageHistory))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := svc.Ingest(context.Background(), ingest.Caller{Credential: "fuzz"}, items); err != nil {
		tb.Fatal(err)
	}
	proj, err := projection.New(db.Projection(), svc)
	if err != nil {
		tb.Fatal(err)
	}
	use, err := usage.New(db.Ingest())
	if err != nil {
		tb.Fatal(err)
	}
	h, err := ingesthttp.New(svc, proj, ingesthttp.Options{CallerFrom: func(*http.Request) (ingest.Caller, bool) { return ingest.Caller{}, false }, Usage: use})
	if err != nil {
		tb.Fatal(err)
	}
	mux := http.NewServeMux()
	route.Mount(mux, h.Routes(), func(rt route.Route) http.Handler { return rt.Handler })
	return mux
}

// memberNames returns the member names of a JSON object, sorted.
func memberNames(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	out := []string{}
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// The lifecycle in Tally's Reporting API shape (B42Labs/tally,
// internal/reporting/httpapi: Lifecycle{resource Resource, events
// []StoredEvent, intervals []LifecycleInterval, warnings []string}): a
// Tally client reads every member it names, none omitted, so the resource
// carries the projection row's members and each event its received_at.
func TestLifecycleTallyShape(t *testing.T) {
	bothStores(t, func(t *testing.T, st stores) {
		s := newServer(t, st, 0)
		if status, _, b := s.do(t, "POST", "/api/v1/events", usageHistory, true); status != 200 || !strings.Contains(b, `"accepted":3`) {
			t.Fatalf("ingest: %d %s", status, b)
		}
		status, _, body := s.do(t, "GET", "/api/v1/resources/c1/instance/i-1/lifecycle", "", true)
		if status != 200 {
			t.Fatalf("%d %s", status, body)
		}
		var l struct {
			Resource  json.RawMessage   `json:"resource"`
			Events    []json.RawMessage `json:"events"`
			Intervals []json.RawMessage `json:"intervals"`
			Warnings  []string          `json:"warnings"`
		}
		if err := json.Unmarshal([]byte(body), &l); err != nil || len(l.Events) != 3 || len(l.Intervals) != 2 || l.Warnings == nil {
			t.Fatalf("%v: %s", err, body)
		}
		// Tally's Resource and StoredEvent members (tally may add its own).
		tallyResource := []string{"cloud", "created_at", "deleted_at", "last_event_at", "last_event_type", "platform", "project_id", "resource_id", "resource_type", "size", "state"}
		tallyEvent := []string{"cloud", "event_id", "event_type", "payload", "platform", "project_id", "received_at", "resource_id", "resource_type", "source", "timestamp"}
		missing := func(want, got []string) []string {
			out := []string{}
			for _, w := range want {
				if !slices.Contains(got, w) {
					out = append(out, w)
				}
			}
			return out
		}
		if m := missing(tallyResource, memberNames(t, l.Resource)); len(m) > 0 {
			t.Errorf("resource lacks %v: %s", m, l.Resource)
		}
		for _, e := range l.Events {
			if m := missing(tallyEvent, memberNames(t, e)); len(m) > 0 {
				t.Errorf("event lacks %v: %s", m, e)
			}
		}
		for _, iv := range l.Intervals {
			if diff := cmp.Diff([]string{"from", "project_id", "size", "state", "to"}, memberNames(t, iv)); diff != "" {
				t.Errorf("interval members (-want +got):\n%s", diff)
			}
		}
		if last := string(l.Intervals[1]); !strings.Contains(last, `"to":"2026-03-21T00:00:00.5Z"`) {
			t.Errorf("last interval %s", last)
		}
		var r struct {
			State     string     `json:"state"`
			DeletedAt *time.Time `json:"deleted_at"`
		}
		if err := json.Unmarshal(l.Resource, &r); err != nil || r.State != "deleted" || r.DeletedAt == nil {
			t.Errorf("resource %s: %v", l.Resource, err)
		}
		// The Go client reads the same answer back whole.
		c := newClient(t, s.URL, ingesthttp.ClientOptions{})
		got, err := c.Lifecycle(context.Background(), projection.Key{Cloud: "c1", ResourceType: "instance", ResourceID: "i-1"})
		if err != nil || len(got.Events) != 3 || got.Events[0].Event.EventID != "u1" || got.Events[0].ReceivedAt.IsZero() || got.Resource.State != "deleted" {
			t.Errorf("client: %+v, %v", got, err)
		}
	})
}

// "as_of ... tampered: a 4xx naming the member, never a 5xx": a cursor's
// checksum is no secret, so a forged legacy position with a time no event
// can have (year -200000) or an id holding a NUL must be refused as /as_of
// before PostgreSQL sees it, as GET /api/v1/events/feed refuses it as /after.
func TestUsageForgedAsOf(t *testing.T) {
	bothStores(t, func(t *testing.T, st stores) {
		s := newServer(t, st, 0)
		for _, p := range []feed.Position{
			{Kind: feed.Legacy, Time: time.Date(-200000, 1, 1, 0, 0, 0, 0, time.UTC), ID: "e"},
			{Kind: feed.Legacy, Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), ID: "a\x00b"},
		} {
			asOf := feed.Encode(feed.Lifecycle, p)
			status, _, body := s.do(t, "GET", "/api/v1/usage?from=2026-03-01T00:00:00Z&to=2026-04-01T00:00:00Z&as_of="+asOf, "", true)
			if status != 400 || !strings.Contains(body, `"/as_of"`) {
				t.Errorf("as_of %+v: %d %s, want 400 naming /as_of", p, status, body)
			}
		}
	})
}
