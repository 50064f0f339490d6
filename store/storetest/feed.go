package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/internal/feed"
)

// runFeed is the lifecycle feed (ingest.Store.Feed, ingest.Service.Feed):
// "every stored event exactly once, never a duplicate or a refused item, in
// one total order that is the same for every reader", resumable from any
// cursor it gave.
func runFeed(t *testing.T, newStore func(t *testing.T) ingestStore) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, e *env)
	}{
		{"every stored event once, in commit order, never a duplicate or a refused item", feedOnceInOrder},
		{"a read after any position it gave returns exactly the events after it", feedResume},
		{"a backdated event comes with late true, a batch oldest first", feedLate},
		{"a Go caller's nanosecond timestamps: late and order by the microsecond", feedLateSubMicro},
		{"random batches: late and order as a model of the rule says", feedLateRandom},
		{"the ends of time: an event of year 0000 is late only against a stored event", feedLateEndsOfTime},
		{"filters select as Match does, and limit pages the same order", feedFilters},
		{"after=now starts at the head: only later events", feedHead},
		{"a cursor tampered, of another feed or another database is refused naming /after", feedBadCursor},
		{"wait returns as soon as an event is stored", feedWait},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newEnv(t, newStore, ingest.Options{}))
		})
	}
	t.Run("a filtered read examines a bounded number of events and still moves on", func(t *testing.T) {
		t.Parallel()
		feedScanBound(t, newEnv(t, newStore, ingest.Options{}))
	})
}

// readAll follows the feed from after to its end through the store, limit
// events at a time.
func readAll(t *testing.T, st ingest.Store, after ingest.FeedPosition, f ingest.FeedFilter, limit int) []ingest.FeedEvent {
	t.Helper()
	var out []ingest.FeedEvent
	for range 100000 {
		b, err := st.Feed(context.Background(), ingest.FeedRead{After: after, Limit: limit, FeedFilter: f})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b.Items...)
		if len(b.Items) > limit {
			t.Fatalf("a read of limit %d returned %d events", limit, len(b.Items))
		}
		after = b.Next
		if b.CaughtUp {
			return out
		}
	}
	t.Fatal("the feed never caught up")
	return nil
}

// awaitFeed waits until every stored event is readable in the feed. On
// PostgreSQL an event becomes readable once every transaction that started
// before its own has ended, and the suite's other cases write meanwhile
// (the database's oldest open writing transaction holds the feed back).
func awaitFeed(t *testing.T, st ingest.Store) {
	t.Helper()
	want := len(Events(t, st))
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := st.Feed(context.Background(), ingest.FeedRead{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for after := (ingest.FeedPosition{}); ; {
			p, err := st.Feed(context.Background(), ingest.FeedRead{After: after, Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			n += len(p.Items)
			after = p.Next
			if p.CaughtUp || feed.Compare(after, b.Next) >= 0 {
				break
			}
		}
		if n >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20s the feed has %d of %d stored events", n, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func feedIDs(evs []ingest.FeedEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Event.EventID
	}
	return out
}

func feedOnceInOrder(t *testing.T, e *env) {
	ts := t0.Add(time.Hour)
	e.ingest(collector, items(volumeCreate("a1", ts), volumeCreate("a2", ts), volumeCreate("a3", ts))...)
	bad := volumeCreate("bad", ts).set("payload.state", nil)
	conflict := volumeCreate("a1", ts).set("resource_id", "vol-other")
	res := e.ingest(collector, items(volumeCreate("a2", ts), bad, conflict, volumeCreate("b1", ts), volumeCreate("b2", ts), volumeCreate("b1", ts))...)
	if res.Accepted != 2 {
		t.Fatalf("second batch accepted %d, want 2: %+v", res.Accepted, res)
	}
	awaitFeed(t, e.st)
	got := readAll(t, e.st, ingest.FeedPosition{}, ingest.FeedFilter{}, 1000)
	ids := feedIDs(got)
	// Within one batch the order is the store's (one commit); batches come
	// in commit order.
	if len(ids) != 5 {
		t.Fatalf("feed = %v, want the 5 stored events", ids)
	}
	first, second := slices.Sorted(slices.Values(ids[:3])), slices.Sorted(slices.Values(ids[3:]))
	if d := cmp.Diff([]string{"a1", "a2", "a3"}, first); d != "" {
		t.Errorf("first commit (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"b1", "b2"}, second); d != "" {
		t.Errorf("second commit (-want +got):\n%s", d)
	}
	for i := 1; i < len(got); i++ {
		if feed.Compare(got[i-1].Position, got[i].Position) >= 0 {
			t.Errorf("positions not increasing at %d: %+v then %+v", i, got[i-1].Position, got[i].Position)
		}
	}
	again := readAll(t, e.st, ingest.FeedPosition{}, ingest.FeedFilter{}, 1000)
	if d := cmp.Diff(ids, feedIDs(again)); d != "" {
		t.Errorf("a second reader saw another order (-first +second):\n%s", d)
	}
	stored := Events(t, e.st)
	for _, it := range got {
		if it.ReceivedAt.IsZero() {
			t.Errorf("%s: no received_at", it.Event.EventID)
		}
	}
	if len(stored) != len(got) {
		t.Errorf("feed has %d events, the store %d", len(got), len(stored))
	}
}

func feedResume(t *testing.T, e *env) {
	ts := t0.Add(time.Hour)
	for i := range 4 {
		e.ingest(collector, items(volumeCreate(fmt.Sprintf("r%d-a", i), ts), volumeCreate(fmt.Sprintf("r%d-b", i), ts))...)
	}
	awaitFeed(t, e.st)
	all := readAll(t, e.st, ingest.FeedPosition{}, ingest.FeedFilter{}, 3)
	if len(all) != 8 {
		t.Fatalf("feed has %d events, want 8", len(all))
	}
	for i, it := range all {
		rest := readAll(t, e.st, it.Position, ingest.FeedFilter{}, 2)
		if d := cmp.Diff(feedIDs(all[i+1:]), feedIDs(rest)); d != "" {
			t.Errorf("after event %d (-want +got):\n%s", i, d)
		}
	}
	// The cursor of a caught-up read continues with what is stored next.
	page, err := e.svc.Feed(context.Background(), ingest.FeedQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if !page.CaughtUp || len(page.Items) != 8 {
		t.Fatalf("first page: %d items, caught up %v", len(page.Items), page.CaughtUp)
	}
	e.ingest(collector, items(volumeCreate("later", ts))...)
	awaitFeed(t, e.st)
	next, err := e.svc.Feed(context.Background(), ingest.FeedQuery{After: page.NextCursor})
	if err != nil {
		t.Fatal(err)
	}
	if len(next.Items) != 1 || next.Items[0].Event.EventID != "later" {
		t.Errorf("after the caught-up cursor: %v, want [later]", next.Items)
	}
	for i, it := range page.Items {
		p, err := e.svc.Feed(context.Background(), ingest.FeedQuery{After: it.Position, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if want := 8 - i; len(p.Items) != want {
			t.Errorf("after item %d's cursor: %d items, want %d", i, len(p.Items), want)
		}
	}
}

func feedLate(t *testing.T, e *env) {
	ts := t0.Add(time.Hour)
	e.ingest(collector, items(volumeCreate("c", ts), volumeCreate("other", ts))...)
	upd := func(id string, at time.Time) item {
		return volumeCreate(id, at).set("event_type", "volume.resize.end").set("resource_id", "vol-c").set("payload.size.size_gb", 200)
	}
	e.ingest(collector, items(upd("u-later", ts.Add(time.Minute)))...)
	e.ingest(collector, items(upd("u-backdated", ts.Add(-time.Minute)), volumeCreate("fresh", ts.Add(-time.Hour)))...)
	// One batch: b-1 (later) then b-2 (earlier) for one resource, both
	// newer than the stored row: a batch's events enter the feed oldest
	// first, so neither is late; b-3 in the same batch is older than the
	// stored row (u-later), so it is.
	e.ingest(collector, items(upd("b-1", ts.Add(3*time.Minute)), upd("b-2", ts.Add(2*time.Minute)), upd("b-3", ts.Add(30*time.Second)))...)
	awaitFeed(t, e.st)
	got := map[string]bool{}
	var order []string
	for _, it := range readAll(t, e.st, ingest.FeedPosition{}, ingest.FeedFilter{}, 1000) {
		got[it.Event.EventID] = it.Late
		order = append(order, it.Event.EventID)
	}
	want := map[string]bool{"c": false, "other": false, "u-later": false, "u-backdated": true, "fresh": false, "b-1": false, "b-2": false, "b-3": true}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("late by event (-want +got):\n%s", d)
	}
	// Within a batch, by (timestamp, event_id): "c" and "other" share one.
	wantOrder := []string{"c", "other", "u-later", "fresh", "u-backdated", "b-3", "b-2", "b-1"}
	if d := cmp.Diff(wantOrder, order); d != "" {
		t.Errorf("feed order (-want +got):\n%s", d)
	}
}

// subMicroEvent is it (an item of volume vol-ns, size_gb 200 set) decoded
// and checked as a Go caller commits it straight to a store: source
// collector, and its timestamp at, nanoseconds and all.
func subMicroEvent(t *testing.T, it item, at time.Time) event.Event {
	t.Helper()
	ev, err := event.DecodeValidate(it.set("resource_id", "vol-ns").set("payload.size.size_gb", 200).bytes())
	if err != nil {
		t.Fatal(err)
	}
	ev.Source = event.SourceCollector
	ev.Timestamp = at
	return ev
}

// feedLateSubMicro commits events straight to the store (a Go caller that
// did not normalize its timestamps) whose timestamps differ below the
// microsecond: the stores key, order and keep every timestamp to the
// microsecond, so none of them is late against another, in one batch or
// against the stored row, on either store.
func feedLateSubMicro(t *testing.T, e *env) {
	ctx := context.Background()
	base := t0.Add(time.Hour)
	mk := func(id, typ string, at time.Time) event.Event {
		return subMicroEvent(t, volumeCreate(id, base).set("event_type", typ), at)
	}
	at := base.Add(time.Minute)
	for _, b := range [][]event.Event{
		{mk("ns-create", "volume.create.end", base)},
		// One microsecond: "a" sorts first by event_id, with the later
		// nanoseconds.
		{mk("ns-a", "volume.resize.end", at.Add(1500)), mk("ns-b", "volume.resize.end", at.Add(1200))},
		// The same microsecond as the stored last event, fewer nanoseconds.
		{mk("ns-c", "volume.resize.end", at.Add(1000))},
	} {
		if _, err := e.st.Commit(ctx, ingest.Batch{Events: b}); err != nil {
			t.Fatal(err)
		}
	}
	awaitFeed(t, e.st)
	got := map[string]bool{}
	var order []string
	for _, it := range readAll(t, e.st, ingest.FeedPosition{}, ingest.FeedFilter{}, 1000) {
		got[it.Event.EventID] = it.Late
		order = append(order, it.Event.EventID)
	}
	want := map[string]bool{"ns-create": false, "ns-a": false, "ns-b": false, "ns-c": false}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("late by event (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"ns-create", "ns-a", "ns-b", "ns-c"}, order); d != "" {
		t.Errorf("feed order (-want +got):\n%s", d)
	}
}

// feedLateEndsOfTime commits events of year 0000 (before Go's zero time,
// year 1) and of 9999 straight to the store: an event is late only when
// it is before its resource's latest event stored before its batch, so
// the first events of a resource, of any year, are never late; a year-0000
// event older than a stored year-0000 event is.
func feedLateEndsOfTime(t *testing.T, e *env) {
	ctx := context.Background()
	y0 := time.Date(0, 6, 1, 0, 0, 0, 0, time.UTC)
	y9999 := time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
	mk := func(id, res, typ string, at time.Time) event.Event {
		ev, err := event.DecodeValidate(volumeCreate(id, t0).set("event_type", typ).set("resource_id", res).set("payload.size.size_gb", 200).bytes())
		if err != nil {
			t.Fatal(err)
		}
		ev.Source = event.SourceCollector
		ev.Timestamp = at
		return ev
	}
	for _, b := range [][]event.Event{
		{mk("a-create", "vol-a", "volume.create.end", y0), mk("z-create", "vol-z", "volume.create.end", y9999)},
		{mk("a-later", "vol-a", "volume.resize.end", y0.Add(time.Hour)), mk("a-earlier", "vol-a", "volume.resize.end", y0.Add(-time.Hour)),
			mk("b-1", "vol-b", "volume.create.end", y0), mk("b-2", "vol-b", "volume.resize.end", y0.Add(time.Second)),
			mk("z-earlier", "vol-z", "volume.resize.end", y0)},
	} {
		if _, err := e.st.Commit(ctx, ingest.Batch{Events: b}); err != nil {
			t.Fatal(err)
		}
	}
	awaitFeed(t, e.st)
	got := map[string]bool{}
	for _, it := range readAll(t, e.st, ingest.FeedPosition{}, ingest.FeedFilter{}, 1000) {
		got[it.Event.EventID] = it.Late
	}
	want := map[string]bool{"a-create": false, "z-create": false, "a-later": false, "a-earlier": true, "b-1": false, "b-2": false, "z-earlier": true}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("late by event (-want +got):\n%s", d)
	}
}

// feedLateRandom commits seeded random batches straight to the store:
// events of three resources within a few microseconds, nanoseconds apart,
// ids drawn from a small pool (so that some are duplicates or conflicts of
// stored ones and of their own batch), and checks the feed's order and
// Late against a model of the rule: a batch's fresh events by (timestamp
// to the microsecond, event_id), Late when before the resource's latest
// event stored before the batch.
func feedLateRandom(t *testing.T, e *env) {
	ctx := context.Background()
	base := t0.Add(time.Hour).Truncate(time.Second)
	rnd := rand.New(rand.NewPCG(7, 11))
	mk := func(id, res, typ string, at time.Time) event.Event {
		ev, err := event.DecodeValidate(volumeCreate(id, base).set("event_type", typ).set("resource_id", res).set("payload.size.size_gb", 200).bytes())
		if err != nil {
			t.Fatal(err)
		}
		ev.Source = event.SourceCollector
		ev.Timestamp = at
		return ev
	}
	type key struct {
		id string
		us int64
	}
	seen := map[key]bool{}
	latest := map[string]time.Time{}
	wantLate := map[key]bool{}
	var wantOrder []key
	resources := []string{"vol-r0", "vol-r1", "vol-r2"}
	var batches [][]event.Event
	var first []event.Event
	for _, r := range resources {
		first = append(first, mk("create-"+r, r, "volume.create.end", base))
	}
	batches = append(batches, first)
	for range 12 {
		var b []event.Event
		for range 1 + rnd.IntN(6) {
			at := base.Add(time.Microsecond + time.Duration(rnd.IntN(8000)))
			typ := []string{"volume.resize.end", "volume.delete.end", "volume.create.end"}[rnd.IntN(3)]
			b = append(b, mk(fmt.Sprintf("r-%d", rnd.IntN(10)), resources[rnd.IntN(len(resources))], typ, at))
		}
		batches = append(batches, b)
	}
	for _, b := range batches {
		var fresh []int
		for i, ev := range b {
			k := key{ev.EventID, ev.Timestamp.UnixMicro()}
			if seen[k] {
				continue
			}
			seen[k] = true
			fresh = append(fresh, i)
		}
		slices.SortFunc(fresh, func(i, j int) int {
			return strings.Compare(fmt.Sprintf("%020d/%s", b[i].Timestamp.UnixMicro(), b[i].EventID), fmt.Sprintf("%020d/%s", b[j].Timestamp.UnixMicro(), b[j].EventID))
		})
		before := maps.Clone(latest)
		for _, i := range fresh {
			ev := b[i]
			at := event.Normalize(ev.Timestamp)
			k := key{ev.EventID, at.UnixMicro()}
			wantOrder = append(wantOrder, k)
			wantLate[k] = at.Before(before[ev.ResourceID])
			if at.After(latest[ev.ResourceID]) {
				latest[ev.ResourceID] = at
			}
		}
		if _, err := e.st.Commit(ctx, ingest.Batch{Events: b}); err != nil {
			t.Fatal(err)
		}
	}
	awaitFeed(t, e.st)
	gotLate := map[key]bool{}
	var gotOrder []key
	for _, it := range readAll(t, e.st, ingest.FeedPosition{}, ingest.FeedFilter{}, 1000) {
		k := key{it.Event.EventID, it.Event.Timestamp.UnixMicro()}
		gotLate[k] = it.Late
		gotOrder = append(gotOrder, k)
	}
	if d := cmp.Diff(wantLate, gotLate, cmp.AllowUnexported(key{})); d != "" {
		t.Errorf("late by event (-want +got):\n%s", d)
	}
	if d := cmp.Diff(wantOrder, gotOrder, cmp.AllowUnexported(key{})); d != "" {
		t.Errorf("feed order (-want +got):\n%s", d)
	}
}

func feedFilters(t *testing.T, e *env) {
	ts := t0.Add(time.Hour)
	var batch []item
	for i := range 12 {
		it := volumeCreate(fmt.Sprintf("f%02d", i), ts)
		if i%3 == 0 {
			it = instanceCreate(fmt.Sprintf("f%02d", i), ts)
		}
		if i%4 == 0 {
			it.set("project_id", "p2")
		}
		batch = append(batch, it)
	}
	e.ingest(collector, items(batch[:6]...)...)
	e.ingest(collector, items(batch[6:]...)...)
	awaitFeed(t, e.st)
	all := readAll(t, e.st, ingest.FeedPosition{}, ingest.FeedFilter{}, 1000)
	for _, f := range []ingest.FeedFilter{
		{ResourceType: "instance"}, {ProjectID: "p2"}, {ResourceType: "volume", ProjectID: "p2"},
		{Cloud: "c1"}, {Cloud: "c2"}, {Platform: "openstack", EventType: "compute.instance.create.end"},
	} {
		var want []string
		for _, it := range all {
			if f.Match(&it.Event) {
				want = append(want, it.Event.EventID)
			}
		}
		for _, limit := range []int{1, 2, 1000} {
			if d := cmp.Diff(want, feedIDs(readAll(t, e.st, ingest.FeedPosition{}, f, limit)), cmpopts.EquateEmpty()); d != "" {
				t.Errorf("filter %+v, limit %d (-want +got):\n%s", f, limit, d)
			}
		}
	}
}

func feedHead(t *testing.T, e *env) {
	ts := t0.Add(time.Hour)
	now, err := e.svc.Feed(context.Background(), ingest.FeedQuery{After: "now"})
	if err != nil {
		t.Fatal(err)
	}
	if len(now.Items) != 0 || !now.CaughtUp {
		t.Errorf("after=now on an empty store: %+v", now)
	}
	e.ingest(collector, items(volumeCreate("h1", ts))...)
	awaitFeed(t, e.st)
	now, err = e.svc.Feed(context.Background(), ingest.FeedQuery{After: "now"})
	if err != nil {
		t.Fatal(err)
	}
	if len(now.Items) != 0 {
		t.Errorf("after=now returned stored events: %v", now.Items)
	}
	e.ingest(collector, items(volumeCreate("h2", ts))...)
	awaitFeed(t, e.st)
	next, err := e.svc.Feed(context.Background(), ingest.FeedQuery{After: now.NextCursor})
	if err != nil {
		t.Fatal(err)
	}
	if len(next.Items) != 1 || next.Items[0].Event.EventID != "h2" {
		t.Errorf("after the head: %v, want [h2]", next.Items)
	}
}

func feedBadCursor(t *testing.T, e *env) {
	e.ingest(collector, items(volumeCreate("x", t0))...)
	awaitFeed(t, e.st)
	page, err := e.svc.Feed(context.Background(), ingest.FeedQuery{})
	if err != nil {
		t.Fatal(err)
	}
	good := page.Items[0].Position
	foreign := feed.Encode(feed.Lifecycle, feed.Position{Kind: feed.Current, TX: 1 << 60, Seq: 1 << 40})
	for name, c := range map[string]string{
		"tampered":           good[:len(good)-2] + "AA",
		"not base64":         "%%%",
		"a listing cursor":   "WyJlMSIsMCwiYSJd",
		"another database's": foreign,
	} {
		_, err := e.svc.Feed(context.Background(), ingest.FeedQuery{After: c})
		var ve *event.ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Member != "/after" {
			t.Errorf("%s cursor: err = %v, want one problem naming /after", name, err)
		}
	}
	if _, err := e.svc.Feed(context.Background(), ingest.FeedQuery{Limit: 1001, Wait: 31 * time.Second}); err == nil {
		t.Error("limit 1001 and wait 31s accepted")
	}
}

func feedWait(t *testing.T, e *env) {
	ctx := context.Background()
	head, err := e.svc.Feed(ctx, ingest.FeedQuery{After: "now"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		time.Sleep(50 * time.Millisecond)
		e.ingest(collector, items(volumeCreate("w", t0))...)
	})
	page, err := e.svc.Feed(ctx, ingest.FeedQuery{After: head.NextCursor, Wait: ingest.MaxFeedWait})
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 || page.Items[0].Event.EventID != "w" {
		t.Fatalf("wait returned %v, want [w]", page.Items)
	}
	// Nothing new: the wait ends after Wait with no items, the cursor kept.
	empty, err := e.svc.Feed(ctx, ingest.FeedQuery{After: page.NextCursor, Wait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(empty.Items) != 0 || empty.NextCursor != page.NextCursor {
		t.Errorf("an idle wait returned %d items, cursor %q (was %q)", len(empty.Items), empty.NextCursor, page.NextCursor)
	}
}

func feedScanBound(t *testing.T, e *env) {
	n := ingest.MaxFeedScan + 500
	for first := 0; first < n; first += 1000 {
		e.ingest(syncRun, GenerateBatch(first, min(1000, n-first))...)
	}
	awaitFeed(t, e.st)
	b, err := e.st.Feed(context.Background(), ingest.FeedRead{Limit: 10, FeedFilter: ingest.FeedFilter{ProjectID: "none"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Items) != 0 || b.CaughtUp || b.Next == (ingest.FeedPosition{}) {
		t.Fatalf("first filtered read: %d items, caught up %v, next %+v; want none, not caught up, moved on", len(b.Items), b.CaughtUp, b.Next)
	}
	b, err = e.st.Feed(context.Background(), ingest.FeedRead{After: b.Next, Limit: 10, FeedFilter: ingest.FeedFilter{ProjectID: "none"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Items) != 0 || !b.CaughtUp {
		t.Errorf("second filtered read: %d items, caught up %v; want none, caught up", len(b.Items), b.CaughtUp)
	}
}
