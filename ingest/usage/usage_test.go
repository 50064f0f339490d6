package usage_test

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/usage"
	"github.com/tallyhq/tally/store/memstore"
)

var march = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

const (
	create = "compute.instance.create.end"
	update = "compute.instance.update"
	del    = "compute.instance.delete.end"
)

func ev(id, resource, typ string, at time.Time, project, state, size string) event.Event {
	e := event.Event{
		EventID: id, Timestamp: at.UTC().Truncate(time.Microsecond), EventType: typ, Platform: "openstack", Cloud: "c1",
		ResourceType: "instance", ResourceID: resource, ProjectID: project, Source: event.SourceCollector,
	}
	if state != "" {
		e.Payload.State = event.StateOf(state)
	}
	if size != "" {
		e.Payload.Size = jsontext.Value(size)
	}
	return e
}

// newStore returns a memstore Ingest holding events, committed one batch
// per element of batches.
func newStore(t testing.TB, batches ...[]event.Event) *memstore.Ingest {
	t.Helper()
	db, err := memstore.New(memstore.Options{Now: func() time.Time { return time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	st := db.Ingest()
	for _, b := range batches {
		commit(t, st, b)
	}
	return st
}

func commit(t testing.TB, st ingest.Store, b []event.Event) {
	t.Helper()
	if _, err := st.Commit(context.Background(), ingest.Batch{Events: b}); err != nil {
		t.Fatal(err)
	}
}

func answer(t testing.TB, st usage.Store, q usage.Query) usage.Answer {
	t.Helper()
	svc, err := usage.New(st)
	if err != nil {
		t.Fatal(err)
	}
	a, err := svc.Usage(context.Background(), q)
	if err != nil {
		t.Fatalf("Usage(%+v): %v", q, err)
	}
	return a
}

type row struct {
	Start     string
	Group     string
	Resources int
	Seconds   string
	Quantity  string
	Complete  bool
}

func rows(a usage.Answer) []row {
	out := []row{}
	for _, it := range a.Items {
		g, _ := json.Marshal(it.Group)
		out = append(out, row{it.WindowStart.Format(time.RFC3339), string(g), it.Resources, it.Seconds, it.Quantity, it.Complete})
	}
	return out
}

func TestUsageRules(t *testing.T) {
	h := time.Hour
	st := newStore(t, []event.Event{
		ev("a1", "i-a", create, march, "p1", "active", `{"vcpus":2,"flavor":"m1.small"}`),
		// A transfer at T gives P1 [start, T) and P2 [T, end).
		ev("a2", "i-a", update, march.Add(10*h), "p2", "", ""),
		ev("a3", "i-a", del, march.Add(30*h), "p2", "", ""),
		ev("b1", "i-b", create, march.Add(12*h), "p1", "active", `{"vcpus":4.0,"flavor":"m1.large"}`),
		// An event exactly at to adds 0.
		ev("c1", "i-c", create, march.AddDate(0, 1, 0), "p1", "active", `{"vcpus":8}`),
		// The quantity member missing: counted in seconds, not in quantity.
		ev("d1", "i-d", create, march, "p3", "active", `{"flavor":"tiny"}`),
		ev("d2", "i-d", del, march.Add(h/2), "p3", "", ""),
	}, []event.Event{ev("z1", "i-z", create, time.Date(2026, 4, 30, 0, 0, 0, 0, time.UTC), "p9", "active", `{"vcpus":1}`)})
	month := usage.Query{From: march, To: march.AddDate(0, 1, 0)}

	t.Run("transfer splits the usage between the projects, summing to the resource's total", func(t *testing.T) {
		q := month
		q.GroupBy, q.Quantity, q.Unit, q.Cloud = []string{"project_id", "resource_id"}, "size.vcpus", usage.UnitHour, "c1"
		got := rows(answer(t, st, q))
		want := []row{
			{"2026-03-01T00:00:00Z", `{"project_id":"p1","resource_id":"i-a"}`, 1, "36000", "20", true},
			{"2026-03-01T00:00:00Z", `{"project_id":"p1","resource_id":"i-b"}`, 1, "2635200", "2928", true},
			{"2026-03-01T00:00:00Z", `{"project_id":"p2","resource_id":"i-a"}`, 1, "72000", "40", true},
			{"2026-03-01T00:00:00Z", `{"project_id":"p3","resource_id":"i-d"}`, 1, "1800", "0", true},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("the README's call: vcpu-hours of a project by flavor", func(t *testing.T) {
		q := month
		q.ProjectID, q.GroupBy, q.Quantity, q.Unit = "p1", []string{"size.flavor"}, "size.vcpus", usage.UnitHour
		a := answer(t, st, q)
		want := []row{
			{"2026-03-01T00:00:00Z", `{"size.flavor":"m1.large"}`, 1, "2635200", "2928", true},
			{"2026-03-01T00:00:00Z", `{"size.flavor":"m1.small"}`, 1, "36000", "20", true},
		}
		if diff := cmp.Diff(want, rows(a)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("a missing quantity member warns non_numeric_quantity", func(t *testing.T) {
		q := month
		q.ProjectID, q.Quantity = "p3", "size.vcpus"
		a := answer(t, st, q)
		got := []string{}
		for _, w := range a.Warnings {
			got = append(got, w.ResourceID+" "+string(w.Code))
		}
		if diff := cmp.Diff([]string{"i-d non_numeric_quantity"}, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("time after as_of's instant is never counted; such a window is not complete", func(t *testing.T) {
		q := usage.Query{From: time.Date(2026, 4, 29, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 5, 3, 0, 0, 0, 0, time.UTC), Window: usage.WindowDay, ProjectID: "p9"}
		got := rows(answer(t, st, q))
		want := []row{
			{"2026-04-30T00:00:00Z", `{}`, 1, "86400", "86400", true},
			{"2026-05-01T00:00:00Z", `{}`, 1, "0", "0", false}, // never listed: zero-length
		}
		want = want[:1]
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("paging", func(t *testing.T) {
		q := month
		q.GroupBy, q.Limit = []string{"resource_id"}, 1
		var ids []string
		for {
			a := answer(t, st, q)
			for _, it := range a.Items {
				ids = append(ids, string(it.Group[0].Value))
			}
			if a.NextCursor == nil {
				break
			}
			q.Cursor = *a.NextCursor
		}
		if diff := cmp.Diff([]string{`"i-a"`, `"i-b"`, `"i-d"`}, ids); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

func TestUsageRefusals(t *testing.T) {
	st := newStore(t)
	svc, _ := usage.New(st)
	to := march.AddDate(0, 1, 0)
	tests := []struct {
		name string
		q    usage.Query
		want string
	}{
		{"from and to are required", usage.Query{}, "/from: required"},
		{"to after from", usage.Query{From: to, To: march}, "/to: minimum"},
		{"window enum", usage.Query{From: march, To: to, Window: "week"}, "/window: enum"},
		{"group_by keys", usage.Query{From: march, To: to, GroupBy: []string{"flavor"}}, "/group_by: enum"},
		{"group_by at most 16 keys", usage.Query{From: march, To: to, GroupBy: strings.Split("size.a,size.b,size.c,size.d,size.e,size.f,size.g,size.h,size.i,size.j,size.k,size.l,size.m,size.n,size.o,size.p,size.q", ",")}, "/group_by: maximum"},
		{"group_by twice", usage.Query{From: march, To: to, GroupBy: []string{"state", "state"}}, "/group_by: duplicateMember"},
		{"quantity", usage.Query{From: march, To: to, Quantity: "size."}, "/quantity: enum"},
		{"unit", usage.Query{From: march, To: to, Unit: "day"}, "/unit: enum"},
		// PostgreSQL keeps no time before 4713 BC: a library caller's year
		// outside what RFC 3339 writes is refused, not sent to the store.
		{"from before the year 0000", usage.Query{From: time.Date(-5000, 1, 1, 0, 0, 0, 0, time.UTC), To: to}, "/from: minimum"},
		{"to after the year 9999", usage.Query{From: march, To: time.Date(10000, 1, 2, 0, 0, 0, 0, time.UTC)}, "/to: maximum"},
		{"as_of not a feed cursor", usage.Query{From: march, To: to, AsOf: "xyz"}, "/as_of: format"},
		{"cursor of another query", usage.Query{From: march, To: to, Cursor: "WyJ1MSIsMSwiIiwxXQ"}, "/cursor: format"},
		{"more than 10,000 windows", usage.Query{From: march, To: march.AddDate(30, 0, 0), Window: usage.WindowDay}, "result_too_large"},
		{"window=hour over 400 days", usage.Query{From: march, To: march.AddDate(0, 0, 401), Window: usage.WindowHour}, "result_too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := svc.Usage(context.Background(), tt.q)
			if err == nil {
				t.Fatal("no error")
			}
			var ve *event.ValidationError
			got := "result_too_large"
			if errorsAs(err, &ve) {
				got = ve.Problems[0].Member + ": " + ve.Problems[0].Rule
			} else if !isTooLarge(err) {
				t.Fatalf("error %v", err)
			}
			if got != tt.want {
				t.Errorf("got %s, want %s (%v)", got, tt.want, err)
			}
		})
	}
}

// randomHistories returns random histories of n resources over March with
// sub-second timestamps, some starting in February.
func randomHistories(r *rand.Rand, n int) []event.Event {
	var out []event.Event
	types := []string{create, update, update, del, create}
	sizes := []string{`{"vcpus":1}`, `{"vcpus":2}`, `{"vcpus":2.0}`, `{"vcpus":0.5}`, `{"vcpus":"x"}`, `{"flavor":"f"}`, ""}
	for i := range n {
		k := 1 + r.IntN(6)
		for j := range k {
			at := march.Add(-5*24*time.Hour + time.Duration(r.Int64N(int64(40*24*time.Hour))))
			typ := types[r.IntN(len(types))]
			if j == 0 && r.IntN(5) > 0 {
				typ = create
			}
			state := []string{"active", "stopped", ""}[r.IntN(3)]
			out = append(out, ev(fmt.Sprintf("e%d-%d", i, j), fmt.Sprintf("i-%03d", i), typ, at,
				[]string{"p1", "p2"}[r.IntN(2)], state, sizes[r.IntN(len(sizes))]))
		}
	}
	return out
}

func errorsAs(err error, ve **event.ValidationError) bool {
	v, ok := err.(*event.ValidationError)
	if ok {
		*ve = v
	}
	return ok
}

func isTooLarge(err error) bool {
	_, ok := err.(*usage.TooLargeError)
	return ok
}

// rat parses a decimal string of an answer.
func rat(t testing.TB, s string) *big.Rat {
	t.Helper()
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		t.Fatalf("not a decimal: %q", s)
	}
	return r
}

func TestUsageAdditivity(t *testing.T) {
	// "For a month of random histories with sub-second timestamps, Σ of
	// window=day = window=month = window=none, exactly, for seconds and for
	// quantity."
	r := rand.New(rand.NewPCG(1, 2))
	st := newStore(t, randomHistories(r, 200))
	for _, quantity := range []string{"seconds", "size.vcpus"} {
		sums := map[usage.Window]map[string][2]*big.Rat{}
		for _, w := range []usage.Window{usage.WindowDay, usage.WindowMonth, usage.WindowNone} {
			q := usage.Query{From: march, To: march.AddDate(0, 1, 0), Window: w, GroupBy: []string{"project_id"}, Quantity: quantity, Limit: 1000}
			a := answer(t, st, q)
			m := map[string][2]*big.Rat{}
			for _, it := range a.Items {
				k := string(it.Group[0].Value)
				s, ok := m[k]
				if !ok {
					s = [2]*big.Rat{new(big.Rat), new(big.Rat)}
				}
				s[0].Add(s[0], rat(t, it.Seconds))
				s[1].Add(s[1], rat(t, it.Quantity))
				m[k] = s
			}
			sums[w] = m
		}
		for k, none := range sums[usage.WindowNone] {
			for _, w := range []usage.Window{usage.WindowDay, usage.WindowMonth} {
				got := sums[w][k]
				if got[0].Cmp(none[0]) != 0 || got[1].Cmp(none[1]) != 0 {
					t.Errorf("%s %s: window=%s gives %s s, %s; none gives %s s, %s", quantity, k, w,
						got[0].FloatString(6), got[1].FloatString(6), none[0].FloatString(6), none[1].FloatString(6))
				}
			}
		}
		if len(sums[usage.WindowNone]) == 0 {
			t.Fatal("no usage at all")
		}
	}
}

func TestUsageArrivalOrderNeverMatters(t *testing.T) {
	// "All 120 arrival orders of a 5-event history give identical usage."
	h := time.Hour
	history := []event.Event{
		ev("e1", "i-1", create, march, "p1", "active", `{"vcpus":2}`),
		ev("e2", "i-1", update, march.Add(h), "p1", "active", `{"vcpus":4}`),
		ev("e3", "i-1", update, march.Add(h), "p1", "stopped", ""),
		ev("e4", "i-1", update, march.Add(2*h+time.Millisecond), "p2", "", ""),
		ev("e5", "i-1", del, march.Add(3*h), "p2", "", ""),
	}
	q := usage.Query{From: march, To: march.AddDate(0, 0, 1), Window: usage.WindowHour, GroupBy: []string{"project_id", "state"}, Quantity: "size.vcpus"}
	var want []row
	n := 0
	permute(history, func(order []event.Event) {
		// Each event in its own batch, in this order: the arrival order.
		batches := make([][]event.Event, len(order))
		for i := range order {
			batches[i] = []event.Event{order[i]}
		}
		got := rows(answer(t, newStore(t, batches...), q))
		if want == nil {
			want = got
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("order %d (-want +got):\n%s", n, diff)
		}
		n++
	})
	if n != 120 {
		t.Fatalf("%d orders", n)
	}
}

func permute(s []event.Event, f func([]event.Event)) {
	var rec func(k int)
	rec = func(k int) {
		if k == len(s) {
			f(slices.Clone(s))
			return
		}
		for i := k; i < len(s); i++ {
			s[k], s[i] = s[i], s[k]
			rec(k + 1)
			s[k], s[i] = s[i], s[k]
		}
	}
	rec(0)
}

func TestUsageReproducibleAsOf(t *testing.T) {
	// "The same query and as_of give byte-identical bodies before and after
	// a late event; without as_of the answer changes."
	st := newStore(t, randomHistories(rand.New(rand.NewPCG(3, 4)), 50))
	q := usage.Query{From: march, To: march.AddDate(0, 1, 0), Window: usage.WindowDay, GroupBy: []string{"project_id"}, Quantity: "size.vcpus", Limit: 1000}
	first := answer(t, st, q)
	before, _ := json.Marshal(first)
	commit(t, st, []event.Event{ev("late", "i-000", update, march.Add(36*time.Hour), "p3", "active", `{"vcpus":16}`)})
	q.AsOf = first.AsOf
	again, _ := json.Marshal(answer(t, st, q))
	if string(before) != string(again) {
		t.Errorf("as_of %s: the answer changed after a late event:\n%s\n%s", q.AsOf, before, again)
	}
	q.AsOf = ""
	fresh, _ := json.Marshal(answer(t, st, q))
	if string(fresh) == string(before) {
		t.Error("without as_of the answer does not reflect the late event")
	}
}

// "A query that would produce more than 10,000 windows ... is 422
// result_too_large": exactly 10,000 windows is an answer, one more is not.
func TestUsageWindowBoundExact(t *testing.T) {
	svc, _ := usage.New(newStore(t))
	y2k := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	hour := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name     string
		q        usage.Query
		tooLarge bool
	}{
		{"10,000 days", usage.Query{From: y2k, To: y2k.AddDate(0, 0, 10000), Window: usage.WindowDay}, false},
		{"10,000 days and a microsecond", usage.Query{From: y2k, To: y2k.AddDate(0, 0, 10000).Add(time.Microsecond), Window: usage.WindowDay}, true},
		{"10,001 days", usage.Query{From: y2k, To: y2k.AddDate(0, 0, 10001), Window: usage.WindowDay}, true},
		{"10,000 days from mid-day", usage.Query{From: y2k.Add(12 * time.Hour), To: y2k.AddDate(0, 0, 10000), Window: usage.WindowDay}, false},
		{"10,000 months", usage.Query{From: y2k, To: y2k.AddDate(0, 10000, 0), Window: usage.WindowMonth}, false},
		{"10,001 months", usage.Query{From: y2k, To: y2k.AddDate(0, 10000, 1), Window: usage.WindowMonth}, true},
		{"400 days of hours", usage.Query{From: hour, To: hour.AddDate(0, 0, 400), Window: usage.WindowHour}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := svc.Usage(context.Background(), tt.q)
			if got := isTooLarge(err); got != tt.tooLarge || !got && err != nil {
				t.Errorf("err %v, want too large %v", err, tt.tooLarge)
			}
		})
	}
}

// "window ... UTC-aligned buckets": a library query whose bounds carry
// another zone, or a fraction finer than the microsecond every stored time
// has, is answered in UTC at the microsecond, as GET /api/v1/events treats
// a bound (rounded up).
func TestUsageBoundsNormalized(t *testing.T) {
	st := newStore(t, []event.Event{ev("a1", "i-a", create, march.Add(-48*time.Hour), "p1", "active", `{"vcpus":1}`)})
	plus5 := time.FixedZone("+05:00", 5*3600)
	for _, tt := range []struct {
		name string
		q    usage.Query
		from string
		want []row
	}{
		{"a zone other than UTC", usage.Query{From: time.Date(2026, 3, 1, 2, 0, 0, 0, plus5), To: time.Date(2026, 3, 2, 2, 0, 0, 0, plus5), Window: usage.WindowDay},
			"2026-02-28T21:00:00Z", []row{
				{"2026-02-28T21:00:00Z", "{}", 1, "10800", "10800", true},
				{"2026-03-01T00:00:00Z", "{}", 1, "75600", "75600", true},
			}},
		{"the last instant RFC 3339 writes", usage.Query{From: march, To: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)},
			"2026-03-01T00:00:00Z", []row{{"2026-03-01T00:00:00Z", "{}", 1, "5270400", "5270400", false}}},
		{"a fraction finer than a microsecond", usage.Query{From: march.Add(100 * time.Nanosecond), To: march.Add(time.Second + 400*time.Nanosecond)},
			"2026-03-01T00:00:00.000001Z", []row{{"2026-03-01T00:00:00Z", "{}", 1, "1", "1", true}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := answer(t, st, tt.q)
			if _, err := json.Marshal(a); err != nil {
				t.Fatal(err)
			}
			if got := a.From.Format(time.RFC3339Nano); got != tt.from {
				t.Errorf("from %s, want %s", got, tt.from)
			}
			if diff := cmp.Diff(tt.want, rows(a)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// "Bounded answers": a page holds at most 8 MiB of items (page.MaxBytes,
// as every listing), whatever the size members grouped by hold; the cursor
// pages on without skipping or repeating an item.
func TestUsagePageBytes(t *testing.T) {
	blob := strings.Repeat("x", 3<<20)
	var evs []event.Event
	for _, id := range []string{"i-a", "i-b", "i-c"} {
		evs = append(evs, ev("c-"+id, id, create, march, "p1", "active", `{"blob":"`+id+blob+`"}`))
	}
	st := newStore(t, evs)
	q := usage.Query{From: march, To: march.Add(time.Hour), GroupBy: []string{"size.blob"}}
	var pages []int
	for {
		a := answer(t, st, q)
		pages = append(pages, len(a.Items))
		if a.NextCursor == nil {
			break
		}
		q.Cursor = *a.NextCursor
	}
	if diff := cmp.Diff([]int{2, 1}, pages); diff != "" {
		t.Errorf("items per page (-want +got):\n%s", diff)
	}
}

// "the cost bounded": the groups a query holds while reading are bounded
// by their bytes too (usage.MaxGroupBytes), not only by their number: 25
// resources with distinct 3 MiB size members, grouped by that member, are
// result_too_large, not 150 MiB of keys held across every page.
func TestUsageGroupBytesBound(t *testing.T) {
	blob := strings.Repeat("x", 3<<20)
	var evs []event.Event
	for i := range 25 {
		id := fmt.Sprintf("i-%02d", i)
		evs = append(evs, ev("c-"+id, id, create, march, "p1", "active", `{"blob":"`+id+blob+`"}`))
	}
	svc, _ := usage.New(newStore(t, evs))
	_, err := svc.Usage(context.Background(), usage.Query{From: march, To: march.Add(time.Hour), GroupBy: []string{"size.blob"}})
	if !isTooLarge(err) {
		t.Errorf("err %v, want result_too_large", err)
	}
}
