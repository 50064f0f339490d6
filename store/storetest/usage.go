package storetest

import (
	stdcmp "cmp"
	"context"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/ingest/usage"
	"github.com/tallyhq/tally/internal/feed"
)

// runUsage runs the cases of usage.Store: the histories a usage query
// reads, bounded by a feed position, and usage answers checked against an
// oracle.
func runUsage(t *testing.T, open func(t *testing.T) Stores) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, Stores)
	}{
		{"Snapshot", testUsageSnapshot},
		{"Histories", testUsageHistories},
		{"Oracle", testUsageOracle},
		{"AsOf", testUsageAsOf},
		{"Paging", testUsagePaging},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, open(t))
		})
	}
}

var usageMonth = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func usageEvent(id, resource, typ string, at time.Time, project, state, size string) event.Event {
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

func commitEvents(t testing.TB, st ingest.Store, evs ...event.Event) {
	t.Helper()
	if _, err := st.Commit(context.Background(), ingest.Batch{Events: evs}); err != nil {
		t.Fatal(err)
	}
}

// settled waits until the feed's head covers n stored events (on
// PostgreSQL an event is readable once every older transaction of the
// server has ended) and returns that snapshot.
func settled(t *testing.T, st usage.Store, n int) usage.Snapshot {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		snap := snapshot(t, st, nil)
		got := 0
		if err := st.Histories(context.Background(), usage.HistoryQuery{AsOf: snap.Position}, func(h usage.History) error {
			got += len(h.Events)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if got == n {
			return snap
		}
		if time.Now().After(deadline) {
			t.Fatalf("the feed's head covers %d events, not %d, after 30s", got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func snapshot(t *testing.T, st usage.Store, at *ingest.FeedPosition) usage.Snapshot {
	t.Helper()
	s, err := st.Snapshot(context.Background(), at)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testUsageSnapshot: a snapshot of the head is the last readable event's
// position and received_at; the empty store's has no instant; a position
// the store never gave is refused.
func testUsageSnapshot(t *testing.T, s Stores) {
	empty := snapshot(t, s.Usage, nil)
	if !empty.At.IsZero() {
		t.Errorf("empty store: instant %v, want none", empty.At)
	}
	commitEvents(t, s.Ingest, usageEvent("e1", "i-1", "compute.instance.create.end", usageMonth, "p1", "active", `{"vcpus":1}`))
	settled(t, s.Usage, 1)
	head, err := s.Ingest.Feed(context.Background(), ingest.FeedRead{})
	if err != nil {
		t.Fatal(err)
	}
	got := snapshot(t, s.Usage, nil)
	if feed.Compare(got.Position, head.Next) != 0 || got.At.IsZero() || got.At.Location() != time.UTC {
		t.Errorf("head snapshot %+v, feed head %+v", got, head.Next)
	}
	again := snapshot(t, s.Usage, &got.Position)
	if diff := cmp.Diff(got, again); diff != "" {
		t.Errorf("snapshot of the head's position (-head +again):\n%s", diff)
	}
	past := got.Position
	past.Seq += 1000
	if past.TX > 0 {
		past.TX += 1 << 40
	}
	if _, err := s.Usage.Snapshot(context.Background(), &past); !errors.Is(err, ingest.ErrFeedPosition) {
		t.Errorf("a position past the head: %v, want ErrFeedPosition", err)
	}
}

// collect returns what Histories gives for q, as "resource:event,event".
func collect(t *testing.T, st usage.Store, q usage.HistoryQuery) []string {
	t.Helper()
	out := []string{}
	err := st.Histories(context.Background(), q, func(h usage.History) error {
		s := h.Key.ResourceID + ":"
		for i, e := range h.Events {
			if i > 0 {
				s += ","
			}
			s += e.EventID
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// testUsageHistories: the selected resources' histories, by key, each in
// fold order, bounded by the feed position and the timestamp bound; a
// project or platform selects a resource that had one event with it.
func testUsageHistories(t *testing.T, s Stores) {
	h := time.Hour
	commitEvents(t, s.Ingest,
		usageEvent("b1", "i-b", "compute.instance.create.end", usageMonth, "p1", "active", `{"vcpus":1}`),
		usageEvent("b3", "i-b", "compute.instance.delete.end", usageMonth.Add(h), "p2", "", ""),
		usageEvent("b2", "i-b", "compute.instance.update", usageMonth.Add(h), "p2", "", ""), // same instant: update before delete
		usageEvent("a1", "i-a", "compute.instance.create.end", usageMonth.Add(2*h), "p1", "active", `{"vcpus":2}`),
	)
	first := settled(t, s.Usage, 4)
	commitEvents(t, s.Ingest, usageEvent("a0", "i-a", "compute.instance.update", usageMonth.Add(h), "p3", "", "")) // late
	now := settled(t, s.Usage, 5)
	for _, tt := range []struct {
		name string
		q    usage.HistoryQuery
		want []string
	}{
		{"everything, by key, in fold order", usage.HistoryQuery{AsOf: now.Position}, []string{"i-a:a0,a1", "i-b:b1,b2,b3"}},
		{"as of an earlier position", usage.HistoryQuery{AsOf: first.Position}, []string{"i-a:a1", "i-b:b1,b2,b3"}},
		{"a project selects every event of a resource that had it", usage.HistoryQuery{AsOf: now.Position, ProjectID: "p2"}, []string{"i-b:b1,b2,b3"}},
		{"a project only a late event names, before it", usage.HistoryQuery{AsOf: first.Position, ProjectID: "p3"}, []string{}},
		{"timestamps before a bound", usage.HistoryQuery{AsOf: now.Position, Before: usageMonth.Add(h)}, []string{"i-b:b1"}},
		{"by cloud, type and id", usage.HistoryQuery{AsOf: now.Position, Cloud: "c1", ResourceType: "instance", ResourceID: "i-b"}, []string{"i-b:b1,b2,b3"}},
		{"another cloud", usage.HistoryQuery{AsOf: now.Position, Cloud: "c2"}, []string{}},
		{"another platform", usage.HistoryQuery{AsOf: now.Position, Platform: "vmware"}, []string{}},
		{"after a key, limited", usage.HistoryQuery{AsOf: now.Position, After: &projection.Key{Cloud: "c1", ResourceType: "instance", ResourceID: "i-a"}, Limit: 1}, []string{"i-b:b1,b2,b3"}},
		{"limited", usage.HistoryQuery{AsOf: now.Position, Limit: 1}, []string{"i-a:a0,a1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, collect(t, s.Usage, tt.q)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	stop := errors.New("stop")
	n := 0
	err := s.Usage.Histories(context.Background(), usage.HistoryQuery{AsOf: now.Position}, func(usage.History) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("fn's error: Histories returned %v after %d calls, want it after 1", err, n)
	}
}

// randomUsageHistories returns random histories of n resources around a
// month, with sub-second timestamps, in random batches (late events
// among them).
func randomUsageHistories(r *rand.Rand, n int) [][]event.Event {
	types := []string{"compute.instance.create.end", "compute.instance.update", "compute.instance.resize.confirm.end",
		"compute.instance.delete.end", "compute.instance.create.end"}
	sizes := []string{`{"vcpus":1}`, `{"vcpus":2}`, `{"vcpus":2.0}`, `{"vcpus":0.25}`, `{"vcpus":"2"}`, `{"flavor":"f"}`, ""}
	var all []event.Event
	for i := range n {
		for j := range 1 + r.IntN(6) {
			at := usageMonth.Add(-3*24*time.Hour + time.Duration(r.Int64N(int64(36*24*time.Hour))))
			typ := types[r.IntN(len(types))]
			if j == 0 && r.IntN(5) > 0 {
				typ = types[0]
			}
			all = append(all, usageEvent(fmt.Sprintf("e%d-%d", i, j), fmt.Sprintf("i-%03d", i), typ, at,
				[]string{"p1", "p2"}[r.IntN(2)], []string{"active", "stopped", ""}[r.IntN(3)], sizes[r.IntN(len(sizes))]))
		}
	}
	r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	var batches [][]event.Event
	for len(all) > 0 {
		k := min(len(all), 1+r.IntN(20))
		batches = append(batches, all[:k])
		all = all[k:]
	}
	return batches
}

// oracleCell is what the oracle sums for one (window, group).
type oracleCell struct {
	seconds, quantity *big.Rat
	resources         map[string]bool
}

// oracle computes a usage answer by brute force, independently of
// ingest/timeline and ingest/usage: each resource's events sorted by
// (timestamp, create < update < delete, event_id), the state after each
// event held until the next, every second of [from, end) counted into the
// window that holds it. It groups by project_id and state and takes
// size.vcpus as the quantity.
func oracle(histories []usage.History, bounds []time.Time, end time.Time) map[string]*oracleCell {
	out := map[string]*oracleCell{}
	rank := map[event.Category]int{event.CategoryCreate: 0, event.CategoryUpdate: 1, event.CategoryDelete: 2}
	for _, h := range histories {
		evs := slices.Clone(h.Events)
		slices.SortFunc(evs, func(a, b event.Event) int {
			return stdcmp.Or(a.Timestamp.Compare(b.Timestamp), stdcmp.Compare(rank[event.Categorize(a.EventType)], rank[event.Categorize(b.EventType)]),
				stdcmp.Compare(a.EventID, b.EventID))
		})
		var (
			alive          bool
			state, project string
			size           jsontext.Value
		)
		for i, e := range evs {
			cat := event.Categorize(e.EventType)
			switch {
			case cat == event.CategoryDelete:
				alive = false
			case cat == event.CategoryCreate || alive || i == 0:
				if !alive {
					// A new life starts from nothing (a create carries
					// state and size; one that does not leaves them empty).
					state, size = "", nil
				}
				alive = true
				project = e.ProjectID
				if !e.Payload.State.Missing() {
					state = e.Payload.State.String()
				}
				if e.Payload.Size.Kind() == '{' {
					size = e.Payload.Size
				}
			}
			if !alive {
				continue
			}
			from, to := e.Timestamp, end
			if i+1 < len(evs) && evs[i+1].Timestamp.Before(to) {
				to = evs[i+1].Timestamp
			}
			vcpus := oracleVCPUs(size)
			for w := 0; w+1 < len(bounds); w++ {
				a, b := maxTime(from, bounds[w]), minTime(to, bounds[w+1])
				if !b.After(a) {
					continue
				}
				k := fmt.Sprintf("%s|%q|%q", bounds[w].Format(time.RFC3339), project, state)
				c := out[k]
				if c == nil {
					c = &oracleCell{seconds: new(big.Rat), quantity: new(big.Rat), resources: map[string]bool{}}
					out[k] = c
				}
				secs := new(big.Rat).SetFrac64(b.UnixMicro()-a.UnixMicro(), 1e6)
				c.seconds.Add(c.seconds, secs)
				if vcpus != nil {
					c.quantity.Add(c.quantity, new(big.Rat).Mul(secs, vcpus))
				}
				c.resources[h.Key.ResourceID] = true
			}
		}
	}
	return out
}

func oracleVCPUs(size jsontext.Value) *big.Rat {
	var m map[string]jsontext.Value
	if json.Unmarshal(size, &m) != nil || m["vcpus"].Kind() != '0' {
		return nil
	}
	r, ok := new(big.Rat).SetString(string(m["vcpus"]))
	if !ok {
		return nil
	}
	return r
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// testUsageOracle: on randomized histories stored in random batches, every
// usage answer agrees with the brute-force oracle, for each window.
func testUsageOracle(t *testing.T, s Stores) {
	r := rand.New(rand.NewPCG(22, 7))
	n := 0
	// The oracle folds the events as generated, not as the store reads
	// them back, so that a read that loses or adds an event shows.
	byResource := map[projection.Key]*usage.History{}
	for _, b := range randomUsageHistories(r, 60) {
		commitEvents(t, s.Ingest, b...)
		n += len(b)
		for _, e := range b {
			k := projection.Key{Cloud: e.Cloud, ResourceType: e.ResourceType, ResourceID: e.ResourceID}
			if byResource[k] == nil {
				byResource[k] = &usage.History{Key: k}
			}
			byResource[k].Events = append(byResource[k].Events, e)
		}
	}
	snap := settled(t, s.Usage, n)
	var histories []usage.History
	for _, h := range byResource {
		histories = append(histories, *h)
	}
	svc, err := usage.New(s.Usage)
	if err != nil {
		t.Fatal(err)
	}
	from, to := usageMonth.Add(-36*time.Hour+123456*time.Microsecond), usageMonth.AddDate(0, 1, 0)
	for _, w := range []usage.Window{usage.WindowNone, usage.WindowDay, usage.WindowMonth, usage.WindowHour} {
		t.Run(string(w), func(t *testing.T) {
			q := usage.Query{From: from, To: to, Window: w, GroupBy: []string{"project_id", "state"}, Quantity: "size.vcpus", Limit: 1000,
				AsOf: feed.Encode(feed.Lifecycle, snap.Position)}
			got := map[string]*oracleCell{}
			var bounds []time.Time
			for {
				a, err := svc.Usage(context.Background(), q)
				if err != nil {
					t.Fatal(err)
				}
				for _, it := range a.Items {
					if len(bounds) == 0 || !bounds[len(bounds)-1].Equal(it.WindowStart) {
						bounds = append(bounds, it.WindowStart)
					}
					secs, _ := new(big.Rat).SetString(it.Seconds)
					qty, _ := new(big.Rat).SetString(it.Quantity)
					k := fmt.Sprintf("%s|%s|%s", it.WindowStart.Format(time.RFC3339), it.Group[0].Value, it.Group[1].Value)
					got[k] = &oracleCell{seconds: secs, quantity: qty, resources: map[string]bool{fmt.Sprint(it.Resources): true}}
				}
				if a.NextCursor == nil {
					break
				}
				q.Cursor = *a.NextCursor
			}
			want := oracle(histories, windowBounds(w, from, to), minTime(to, snap.At))
			if len(want) == 0 {
				t.Fatal("the oracle counts nothing")
			}
			for k, wc := range want {
				gc := got[k]
				if gc == nil {
					t.Errorf("%s: missing; the oracle has %s s", k, wc.seconds.FloatString(6))
					continue
				}
				n := fmt.Sprint(len(wc.resources))
				if gc.seconds.Cmp(wc.seconds) != 0 || gc.quantity.Cmp(wc.quantity) != 0 || !gc.resources[n] {
					t.Errorf("%s: got %s s, %s, %v resources; the oracle has %s s, %s, %s resources", k,
						gc.seconds.FloatString(6), gc.quantity.FloatString(6), gc.resources, wc.seconds.FloatString(6), wc.quantity.FloatString(6), n)
				}
			}
			for k := range got {
				if want[k] == nil {
					t.Errorf("%s: an item the oracle does not have", k)
				}
			}
		})
	}
}

// testUsagePaging: "cursor paging across windows/groups never skips or
// repeats an item": limit=1 pages, concatenated, are the one page of
// limit=1000, byte for byte.
func testUsagePaging(t *testing.T, s Stores) {
	r := rand.New(rand.NewPCG(3, 9))
	n := 0
	for _, b := range randomUsageHistories(r, 12) {
		commitEvents(t, s.Ingest, b...)
		n += len(b)
	}
	snap := settled(t, s.Usage, n)
	svc, err := usage.New(s.Usage)
	if err != nil {
		t.Fatal(err)
	}
	q := usage.Query{From: usageMonth, To: usageMonth.AddDate(0, 0, 10), Window: usage.WindowDay, GroupBy: []string{"project_id", "resource_id"},
		Quantity: "size.vcpus", AsOf: feed.Encode(feed.Lifecycle, snap.Position)}
	items := func(limit int) []string {
		q := q
		q.Limit = limit
		var out []string
		for pages := 0; ; pages++ {
			a, err := svc.Usage(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range a.Items {
				b, err := json.Marshal(it)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, string(b))
			}
			if a.NextCursor == nil || pages > 10000 {
				return out
			}
			q.Cursor = *a.NextCursor
		}
	}
	one := items(1000)
	if len(one) < 20 {
		t.Fatalf("only %d items", len(one))
	}
	if diff := cmp.Diff(one, items(1)); diff != "" {
		t.Errorf("limit=1000 vs limit=1 pages (-one +paged):\n%s", diff)
	}
}

// windowBounds lists the UTC-aligned windows of [from, to), clipped.
func windowBounds(w usage.Window, from, to time.Time) []time.Time {
	out := []time.Time{from}
	var t time.Time
	step := func(t time.Time) time.Time { return t.Add(time.Hour) }
	switch w {
	case usage.WindowNone:
		return []time.Time{from, to}
	case usage.WindowHour:
		t = from.Truncate(time.Hour)
	case usage.WindowDay:
		t = from.Truncate(24 * time.Hour)
		step = func(t time.Time) time.Time { return t.AddDate(0, 0, 1) }
	case usage.WindowMonth:
		t = time.Date(from.Year(), from.Month(), 1, 0, 0, 0, 0, time.UTC)
		step = func(t time.Time) time.Time { return t.AddDate(0, 1, 0) }
	}
	for t = step(t); t.Before(to); t = step(t) {
		out = append(out, t)
	}
	return append(out, to)
}

// testUsageAsOf: "the same query with the same as_of returns the same body,
// byte for byte, after later (late) events arrive; a fresh query reflects
// them."
func testUsageAsOf(t *testing.T, s Stores) {
	r := rand.New(rand.NewPCG(5, 6))
	n := 0
	for _, b := range randomUsageHistories(r, 20) {
		commitEvents(t, s.Ingest, b...)
		n += len(b)
	}
	settled(t, s.Usage, n)
	svc, err := usage.New(s.Usage)
	if err != nil {
		t.Fatal(err)
	}
	q := usage.Query{From: usageMonth, To: usageMonth.AddDate(0, 1, 0), Window: usage.WindowDay, GroupBy: []string{"project_id"}, Quantity: "size.vcpus", Limit: 1000}
	body := func(q usage.Query) (usage.Answer, string) {
		t.Helper()
		a, err := svc.Usage(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		return a, string(b)
	}
	first, before := body(q)
	commitEvents(t, s.Ingest,
		usageEvent("late-1", "i-late", "compute.instance.create.end", usageMonth.Add(24*time.Hour), "p1", "active", `{"vcpus":64}`))
	settled(t, s.Usage, n+1)
	q.AsOf = first.AsOf
	if _, again := body(q); again != before {
		t.Errorf("as_of %s: the body changed after a late event:\n%s\n%s", q.AsOf, before, again)
	}
	q.AsOf = ""
	if _, fresh := body(q); fresh == before {
		t.Error("without as_of the answer does not reflect the late event")
	}
}
