package usage_test

import (
	"context"
	"errors"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/ingest/timeline"
	"github.com/tallyhq/tally/ingest/usage"
	"github.com/tallyhq/tally/store"
)

func TestLifecycle(t *testing.T) {
	h := time.Hour
	st := newStore(t, []event.Event{
		ev("a2", "i-a", del, march.Add(2*h), "p1", "", ""),
		ev("a1", "i-a", update, march.Add(h), "p1", "active", `{"vcpus":2}`),
		ev("a3", "i-a", update, march.Add(3*h), "p1", "active", ""),
	})
	svc, _ := usage.New(st)
	got, err := svc.Lifecycle(context.Background(), projection.Key{Cloud: "c1", ResourceType: "instance", ResourceID: "i-a"})
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, e := range got.Events {
		ids = append(ids, e.Event.EventID)
	}
	if diff := cmp.Diff([]string{"a1", "a2", "a3"}, ids); diff != "" {
		t.Errorf("events in fold order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]timeline.Code{timeline.CodeHistoryStartsWithoutCreate, timeline.CodeEventAfterDelete}, got.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if len(got.Intervals) != 1 || got.Intervals[0].To == nil || !got.Intervals[0].To.Equal(march.Add(2*h)) {
		t.Errorf("intervals %+v, want one [1h, 2h)", got.Intervals)
	}
	_, err = svc.Lifecycle(context.Background(), projection.Key{Cloud: "c1", ResourceType: "instance", ResourceID: "nope"})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown resource: %v, want store.ErrNotFound", err)
	}
}

func TestLifecycleTooLong(t *testing.T) {
	evs := []event.Event{ev("c", "i-l", create, march, "p1", "active", `{"vcpus":1}`)}
	for i := range ingest.MaxHistory {
		evs = append(evs, ev("u"+time.Duration(i).String(), "i-l", update, march.Add(time.Duration(i+1)*time.Second), "p1", "active", ""))
	}
	svc, _ := usage.New(newStore(t, evs))
	_, err := svc.Lifecycle(context.Background(), projection.Key{Cloud: "c1", ResourceType: "instance", ResourceID: "i-l"})
	if !errors.Is(err, ingest.ErrHistoryTooLong) {
		t.Errorf("%d events: %v, want ErrHistoryTooLong", len(evs), err)
	}
}

func TestSummary(t *testing.T) {
	h := time.Hour
	st := newStore(t, []event.Event{
		ev("a1", "i-a", create, march, "p1", "active", `{"vcpus":2}`),
		ev("a2", "i-a", update, march.Add(90*time.Second+500*time.Millisecond), "p2", "", ""),
		ev("b1", "i-b", create, march.Add(h), "p1", "active", `{"vcpus":2}`),
		ev("b2", "i-b", del, march.Add(h+30*time.Second+500*time.Millisecond), "p1", "", ""),
		ev("c1", "i-c", create, march.Add(h), "p1", "active", `{"vcpus":2}`),
	})
	svc, _ := usage.New(st)
	got, err := svc.Summary(context.Background(), usage.SummaryQuery{Cloud: "c1", ProjectID: "p1", From: march, To: march.Add(2 * h)})
	if err != nil {
		t.Fatal(err)
	}
	// 90.5 s + 30.5 s + 3600 s = 3721 s: 62 minutes, truncated once per row
	// (per span it would be 1 + 0 + 60 = 61).
	want := []usage.ProjectActivity{{ResourceType: "instance", Created: 3, Deleted: 1, TotalMinutes: 62, ActiveNow: 1}}
	if diff := cmp.Diff(want, got.ResourceTypes); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestAt(t *testing.T) {
	h := time.Hour
	st := newStore(t, []event.Event{
		ev("a1", "i-a", create, march, "p1", "active", `{"vcpus":2}`),
		ev("a2", "i-a", del, march.Add(2*h), "p1", "", ""),
		ev("a3", "i-a", create, march.Add(5*h), "p1", "active", `{"vcpus":8}`),
		ev("b1", "i-b", create, march.Add(h), "p2", "active", `{"vcpus":1}`),
	})
	svc, _ := usage.New(st)
	state := func(at time.Duration, f projection.Filter) []string {
		t.Helper()
		p, err := svc.At(context.Background(), f, march.Add(at))
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, r := range p.Items {
			out = append(out, r.ResourceID+" "+r.State+" "+string(r.Size))
		}
		return out
	}
	for _, tt := range []struct {
		name string
		at   time.Duration
		f    projection.Filter
		want []string
	}{
		{"before anything", -h, projection.Filter{}, []string{}},
		{"an event exactly at the instant counts", h, projection.Filter{}, []string{`i-a active {"vcpus":2}`, `i-b active {"vcpus":1}`}},
		{"an event a fraction of a microsecond after the instant does not count", h - 500*time.Nanosecond, projection.Filter{}, []string{`i-a active {"vcpus":2}`}},
		{"deleted between lives", 3 * h, projection.Filter{Status: projection.StatusAll}, []string{`i-a deleted {"vcpus":2}`, `i-b active {"vcpus":1}`}},
		{"active only", 3 * h, projection.Filter{Status: projection.StatusActive}, []string{`i-b active {"vcpus":1}`}},
		{"the second life", 6 * h, projection.Filter{ProjectID: "p1"}, []string{`i-a active {"vcpus":8}`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, state(tt.at, tt.f)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	p, err := svc.At(context.Background(), projection.Filter{Limit: 1}, march.Add(6*h))
	if err != nil || len(p.Items) != 1 || p.NextCursor == nil {
		t.Fatalf("first page: %+v, %v", p, err)
	}
	p, err = svc.At(context.Background(), projection.Filter{Limit: 1, Cursor: *p.NextCursor}, march.Add(6*h))
	if err != nil || len(p.Items) != 1 || p.Items[0].ResourceID != "i-b" || p.NextCursor != nil {
		t.Fatalf("second page: %+v, %v", p, err)
	}
	if _, err := svc.At(context.Background(), projection.Filter{AliveAt: march}, march); !errors.Is(err, event.ErrInvalid) {
		t.Errorf("at with alive_at: %v, want a validation error", err)
	}
}

// "total_minutes ... summed exactly": 200 resources alive since the year 1
// hold more microseconds than an int64 does; the row must not wrap.
func TestSummaryNoOverflow(t *testing.T) {
	since := time.Date(1, 1, 2, 0, 0, 0, 0, time.UTC)
	var evs []event.Event
	for i := range 200 {
		evs = append(evs, ev("c"+strconv.Itoa(i), "i-"+strconv.Itoa(i), create, since, "p1", "active", `{"vcpus":1}`))
	}
	svc, _ := usage.New(newStore(t, evs))
	got, err := svc.Summary(context.Background(), usage.SummaryQuery{Cloud: "c1", ProjectID: "p1", From: since, To: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC) // the store's clock: the as_of instant
	perResource := new(big.Int).Sub(big.NewInt(now.Unix()), big.NewInt(since.Unix()))
	want := new(big.Int).Mul(perResource, big.NewInt(200))
	want.Quo(want, big.NewInt(60))
	if len(got.ResourceTypes) != 1 || !want.IsInt64() || got.ResourceTypes[0].TotalMinutes != want.Int64() {
		t.Errorf("rows %+v, want total_minutes %s", got.ResourceTypes, want)
	}
}

// "a response's size bounded": a history of more than 8 MiB of events
// (ingest.MaxPageBytes, GET /api/v1/events's page) is history_too_long
// too, its read stopped there, as the lifecycle has no next page.
func TestLifecycleTooManyBytes(t *testing.T) {
	blob := `{"blob":"` + strings.Repeat("x", 3<<20) + `"}`
	evs := []event.Event{ev("c", "i-l", create, march, "p1", "active", blob)}
	for i := range 3 {
		evs = append(evs, ev("u"+strconv.Itoa(i), "i-l", update, march.Add(time.Duration(i+1)*time.Second), "p1", "active", blob))
	}
	svc, _ := usage.New(newStore(t, evs))
	if _, err := svc.Lifecycle(context.Background(), projection.Key{Cloud: "c1", ResourceType: "instance", ResourceID: "i-l"}); !errors.Is(err, ingest.ErrHistoryTooLong) {
		t.Errorf("4 events of 3 MiB: %v, want ErrHistoryTooLong", err)
	}
}

// countingStore counts the histories a read hands over.
type countingStore struct {
	usage.Store
	n int
}

func (c *countingStore) Histories(ctx context.Context, q usage.HistoryQuery, fn func(usage.History) error) error {
	return c.Store.Histories(ctx, q, func(h usage.History) error { c.n++; return fn(h) })
}

// "the existing filters": at= with project_id reads only the resources
// that had an event in the project, not every resource of the cloud.
func TestAtReadsTheProjectOnly(t *testing.T) {
	var evs []event.Event
	for i := range 50 {
		evs = append(evs, ev("c"+strconv.Itoa(i), "i-"+strconv.Itoa(i), create, march, "p-other", "active", `{"vcpus":1}`))
	}
	evs = append(evs, ev("mine", "i-mine", create, march, "p1", "active", `{"vcpus":1}`))
	st := &countingStore{Store: newStore(t, evs)}
	svc, _ := usage.New(st)
	p, err := svc.At(context.Background(), projection.Filter{ProjectID: "p1"}, march.Add(time.Hour))
	if err != nil || len(p.Items) != 1 {
		t.Fatalf("%+v, %v", p, err)
	}
	if st.n != 1 {
		t.Errorf("read %d histories for one resource of the project", st.n)
	}
}
