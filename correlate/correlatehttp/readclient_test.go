package correlatehttp_test

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/correlate/correlatehttp"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

func readClient(t *testing.T, url, token string) *correlatehttp.Client {
	t.Helper()
	c, err := correlatehttp.NewClient(url, correlatehttp.ClientOptions{Token: token, Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// drain collects seq, failing t on its error.
func drain[T any](t *testing.T, seq iter.Seq2[T, error]) []T {
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

func ids(es []correlate.Event) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.ID)
	}
	return out
}

// The Client's reads and changes against the real handler, on both
// stores: AllEvents with pageSize 1, 2 and 3 gives exactly one big page's
// events; the summary, the aggregate and the types read back; marking read,
// bulk marking and deleting change what the listing shows; a refusal is a
// *StatusError naming the route.
func TestClientReadsAndChanges(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) correlate.Store{
		"memstore": func(t *testing.T) correlate.Store { return memCorrelate(t) },
		"pgstore":  func(t *testing.T) correlate.Store { return pgtest.DB(t, pgstore.Options{}).Correlate() },
	} {
		t.Run(name, func(t *testing.T) {
			s := newServer(t, open(t), correlate.Options{})
			alice := readClient(t, s.srv.URL, "org-1/alice")
			ctx := context.Background()
			var created []string
			for i := range 7 {
				category := "connection"
				if i%3 == 0 {
					category = "audit"
				}
				e, _, err := alice.Create(ctx, correlate.Payload{Category: category, Action: "a" + strconv.Itoa(i), Severity: correlate.SeverityError})
				if err != nil {
					t.Fatal(err)
				}
				created = append(created, e.ID)
			}
			if _, _, err := readClient(t, s.srv.URL, "org-1/bob").Create(ctx, correlate.Payload{Category: "design", Action: "deploy"}); err != nil {
				t.Fatal(err)
			}
			// Equal createdAt (the server's clock is fixed): the listing
			// breaks ties by id, and paging must not skip or repeat.
			big, err := alice.List(ctx, correlate.Query{PageSize: correlate.MaxPageSize, Order: correlate.OrderAsc})
			if err != nil {
				t.Fatal(err)
			}
			if len(big.Data) != 7 || big.TotalCount != 7 {
				t.Fatalf("one big page: %d of %d, want 7", len(big.Data), big.TotalCount)
			}
			for _, size := range []int{1, 2, 3} {
				got := drain(t, alice.AllEvents(ctx, correlate.Query{PageSize: size, Order: correlate.OrderAsc}))
				if diff := cmp.Diff(ids(big.Data), ids(got)); diff != "" {
					t.Errorf("pageSize=%d pages against one page (-want +got):\n%s", size, diff)
				}
			}
			if got := drain(t, alice.AllEvents(ctx, correlate.Query{Category: []string{"audit"}, PageSize: 1})); len(got) != 3 {
				t.Errorf("audit events: %d, want 3", len(got))
			}

			if err := alice.SetStatus(ctx, created[0], correlate.StatusRead); err != nil {
				t.Fatal(err)
			}
			done, err := alice.SetStatuses(ctx, []string{created[1], created[2], "0190aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee"}, correlate.StatusRead)
			if err != nil || !cmp.Equal(done, created[1:3]) {
				t.Errorf("SetStatuses: %v %v, want %v", done, err, created[1:3])
			}
			if err := alice.Delete(ctx, created[3]); err != nil {
				t.Fatal(err)
			}
			gone, err := alice.DeleteMany(ctx, []string{created[4], created[3]})
			if err != nil || !cmp.Equal(gone, created[4:5]) {
				t.Errorf("DeleteMany: %v %v, want %v", gone, err, created[4:5])
			}
			p, err := alice.List(ctx, correlate.Query{})
			if err != nil || p.TotalCount != 5 || p.ReadCount != 3 {
				t.Errorf("after the changes: total %d read %d (%v), want 5 and 3", p.TotalCount, p.ReadCount, err)
			}

			sum, err := alice.Summary(ctx, correlate.Query{})
			want := correlate.SummaryPage{PageSize: correlate.DefaultPageSize, TotalCount: 1, Data: []correlate.UserSummary{{
				UserID: "alice", TotalCount: 5, ReadCount: 3, UnreadCount: 2,
				CountBySeverityLevel: []correlate.SeverityCount{{Severity: correlate.SeverityError, Count: 5}}}}}
			if diff := cmp.Diff(want, sum); err != nil || diff != "" {
				t.Errorf("Summary: %v (-want +got):\n%s", err, diff)
			}
			for _, tt := range []struct {
				cumulative bool
				want       string
			}{{true, `{"audit":2,"connection":3}`}, {false, `{"audit":1,"connection":1}`}} {
				a, err := alice.Aggregate(ctx, tt.cumulative)
				b, _ := json.Marshal(a)
				if err != nil || string(b) != tt.want || a.Count("audit") != a[0].Count {
					t.Errorf("Aggregate(%v): %s %v, want %s", tt.cumulative, b, err, tt.want)
				}
			}
			ts, err := alice.Types(ctx, 0, 2)
			if err != nil || len(ts) != 2 || ts[0] != (correlate.EventType{Category: "audit", Action: "a0"}) {
				t.Errorf("Types: %v %v", ts, err)
			}

			err = alice.SetStatus(ctx, created[3], correlate.StatusUnread)
			var se *correlatehttp.StatusError
			if !errors.As(err, &se) || se.StatusCode != 404 || !strings.Contains(err.Error(), "PUT /api/events/{id}/status") {
				t.Errorf("SetStatus of a deleted event: %v, want a StatusError of 404 naming the route", err)
			}
			if _, err := alice.Summary(ctx, correlate.Query{Sort: correlate.SortOwner}); !errors.As(err, &se) || se.StatusCode != 400 {
				t.Errorf("Summary with a sort: %v, want a StatusError of 400", err)
			}
			reader := readClient(t, s.srv.URL, "org-1/bob")
			if err := reader.Delete(ctx, created[0]); !errors.As(err, &se) || se.StatusCode != 404 {
				t.Errorf("another user's delete: %v, want 404", err)
			}
		})
	}
}

// AllEvents over pages cut short by bytes (the server holds at most 8 MiB
// of events a page; here a fake server cuts every page at 2 events): it
// reads on with a page size that divides what it has read, so every event
// comes once, in order.
func TestClientAllEventsPastShortPages(t *testing.T) {
	var all []correlate.Event
	for i := range 11 {
		all = append(all, correlate.Event{ID: "e" + strconv.Itoa(i)})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		size, _ := strconv.Atoi(r.URL.Query().Get("pageSize"))
		start := min(page*size, len(all))
		end := min(start+size, start+2, len(all))
		b, _ := json.Marshal(correlate.Page{Page: page, PageSize: size, TotalCount: int64(len(all)),
			CountBySeverityLevel: []correlate.SeverityCount{}, Data: all[start:end]})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	c := readClient(t, srv.URL, "org-1/alice")
	for _, size := range []int{1, 3, 5, 100} {
		got := drain(t, c.AllEvents(context.Background(), correlate.Query{PageSize: size}))
		if diff := cmp.Diff(ids(all), ids(got)); diff != "" {
			t.Errorf("pageSize=%d (-want +got):\n%s", size, diff)
		}
	}
}
