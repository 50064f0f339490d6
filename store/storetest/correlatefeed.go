package storetest

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/correlate"
)

// feedAll reads the change log of st that f selects until it holds want
// changes (or 10 s have passed), one change per read when one is set, each
// read resuming where the previous one said. A change becomes readable
// once every transaction that started before it has ended, which on a
// shared PostgreSQL server may be a moment after its commit.
func feedAll(t *testing.T, st correlate.Store, f correlate.FeedFilter, one bool, want int) []correlate.Change {
	t.Helper()
	limit := 1000
	if one {
		limit = 1
	}
	var out []correlate.Change
	after := correlate.FeedPosition{}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := st.Feed(context.Background(), correlate.FeedRead{After: after, Limit: limit, Filter: f})
		if err != nil {
			t.Fatalf("Feed after %+v: %v", after, err)
		}
		if b.Next.Less(after) {
			t.Fatalf("Feed after %+v: Next %+v is before the read's start", after, b.Next)
		}
		out = append(out, b.Changes...)
		after = b.Next
		if b.CaughtUp {
			if len(out) >= want || time.Now().After(deadline) {
				return out
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

type feedSeen struct {
	Kind correlate.ChangeKind
	ID   string
}

func seen(cs []correlate.Change) []feedSeen {
	var out []feedSeen
	for _, c := range cs {
		out = append(out, feedSeen{c.Kind, c.Event.ID})
	}
	return out
}

// testCorrelateFeed: the change log of the correlated-event feed. One
// change per create that recorded, counted or resolved (none for a
// replay), per status change and per delete, holding the event after the
// change; scoped as getEvents is; resumable from any position; a position
// this database cannot have written is refused.
func testCorrelateFeed(t *testing.T, newStore func(t *testing.T) correlate.Store) {
	for _, c := range []struct {
		name string
		run  func(t *testing.T, newStore func(t *testing.T) correlate.Store)
	}{
		{"one change of the right kind per change, none for a replay, each holding the event after it", changeFeedKinds},
		{"bulk status and bulk delete log one change per event changed", changeFeedBulk},
		{"scoped as getEvents: an events caller sees its own, a reader its whole organization, filters apply", changeFeedScope},
		{"from any position returned, exactly the changes after it; the head is the last position", changeFeedResume},
		{"a position this database cannot have written is refused", changeFeedForeign},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, newStore) })
	}
}

// changeFeedKinds: one change of the right kind per change, none for a replay, each holding the event after it.
func changeFeedKinds(t *testing.T, newStore func(t *testing.T) correlate.Store) {
	ctx := context.Background()
	f := newCorrFixture(t, newStore, correlate.Options{})
	opened, _ := f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck","idempotencyKey":"k1"}`)
	f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck","idempotencyKey":"k1"}`) // replay
	f.clock.Advance(1e6)
	counted, _ := f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck"}`)
	f.clock.Advance(1e6)
	closed, _ := f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck","resolvedAt":"2026-03-01T13:00:00Z"}`)
	read, err := f.svc.SetStatus(ctx, corrAlice, opened.ID, correlate.StatusRead)
	if err != nil {
		t.Fatal(err)
	}
	deleted, err := f.svc.Delete(ctx, corrAlice, opened.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := feedAll(t, f.store, correlate.FeedFilter{}, false, 5)
	want := []correlate.Change{
		{Kind: correlate.ChangeCreated, Event: opened},
		{Kind: correlate.ChangeIncremented, Event: counted},
		{Kind: correlate.ChangeResolved, Event: closed},
		{Kind: correlate.ChangeStatus, Event: read},
		{Kind: correlate.ChangeDeleted, Event: deleted},
	}
	if len(got) == len(want) {
		for i := range got {
			want[i].Position = got[i].Position
			if i > 0 && !got[i-1].Position.Less(got[i].Position) {
				t.Errorf("change %d at %+v is not after change %d at %+v", i, got[i].Position, i-1, got[i-1].Position)
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("change log (-want +got):\n%s", diff)
	}
	if deleted.DeletedAt == nil {
		t.Error("the deleted change's event has no deletedAt")
	}
}

// changeFeedBulk: bulk status and bulk delete log one change per event changed.
func changeFeedBulk(t *testing.T, newStore func(t *testing.T) correlate.Store) {
	ctx := context.Background()
	f := newCorrFixture(t, newStore, correlate.Options{})
	a, _ := f.create(corrAlice, `{"category":"c","action":"a"}`)
	b, _ := f.create(corrAlice, `{"category":"c","action":"b"}`)
	other, _ := f.create(corrBob, `{"category":"c","action":"a"}`)
	ids := []string{a.ID, b.ID, other.ID}
	if _, err := f.svc.SetStatuses(ctx, corrAlice, ids, correlate.StatusRead); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.DeleteMany(ctx, corrAlice, ids); err != nil {
		t.Fatal(err)
	}
	got := seen(feedAll(t, f.store, correlate.FeedFilter{}, false, 7))
	want := []feedSeen{{"created", a.ID}, {"created", b.ID}, {"created", other.ID},
		{"status", a.ID}, {"status", b.ID}, {"deleted", a.ID}, {"deleted", b.ID}}
	sortPair := func(s []feedSeen) {
		// a bulk call's changes share one transaction: their order within it is the store's.
		for i := 3; i+1 < len(s); i += 2 {
			if s[i].ID > s[i+1].ID {
				s[i], s[i+1] = s[i+1], s[i]
			}
		}
	}
	sortPair(got)
	sortPair(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("change log (-want +got):\n%s", diff)
	}
}

// changeFeedScope: scoped as getEvents: an events caller sees its own, a reader its whole organization, filters apply.
func changeFeedScope(t *testing.T, newStore func(t *testing.T) correlate.Store) {
	f := newCorrFixture(t, newStore, correlate.Options{})
	mine, _ := f.create(corrAlice, `{"category":"c","action":"a","severity":"error"}`)
	mineInfo, _ := f.create(corrAlice, `{"category":"c","action":"a"}`)
	bobs, _ := f.create(corrBob, `{"category":"c","action":"a"}`)
	public, _ := f.create(corrPublic, `{"category":"c","action":"a"}`)
	f.create(corrMallory, `{"category":"c","action":"a"}`)
	reader := corrBob
	reader.AllUsers = true
	for _, tt := range []struct {
		name string
		f    correlate.FeedFilter
		want []feedSeen
	}{
		{"alice", correlate.FeedFilter{Scope: corrAlice}, []feedSeen{{"created", mine.ID}, {"created", mineInfo.ID}}},
		{"alice, severity error", correlate.FeedFilter{Scope: corrAlice, Severity: []correlate.Severity{"error"}}, []feedSeen{{"created", mine.ID}}},
		{"a caller with no user", correlate.FeedFilter{Scope: corrPublic}, []feedSeen{{"created", public.ID}}},
		{"a reader of org-1", correlate.FeedFilter{Scope: reader}, []feedSeen{{"created", mine.ID}, {"created", mineInfo.ID}, {"created", bobs.ID}, {"created", public.ID}}},
	} {
		for _, one := range []bool{false, true} {
			if diff := cmp.Diff(tt.want, seen(feedAll(t, f.store, tt.f, one, len(tt.want)))); diff != "" {
				t.Errorf("%s (one at a time %v) (-want +got):\n%s", tt.name, one, diff)
			}
		}
	}
}

// changeFeedResume: from any position returned, exactly the changes after it; the head is the last position.
func changeFeedResume(t *testing.T, newStore func(t *testing.T) correlate.Store) {
	ctx := context.Background()
	f := newCorrFixture(t, newStore, correlate.Options{})
	for range 5 {
		f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck"}`)
	}
	all := feedAll(t, f.store, correlate.FeedFilter{}, false, 5)
	if len(all) != 5 {
		t.Fatalf("%d changes, want 5", len(all))
	}
	for i, c := range all {
		b, err := f.store.Feed(ctx, correlate.FeedRead{After: c.Position, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(all[i+1:], b.Changes, cmpEmpty); diff != "" || !b.CaughtUp {
			t.Errorf("after change %d: caught up %v (-want +got):\n%s", i, b.CaughtUp, diff)
		}
	}
	head, err := f.store.Feed(ctx, correlate.FeedRead{})
	if err != nil {
		t.Fatal(err)
	}
	if head.Next != all[4].Position || len(head.Changes) != 0 {
		t.Errorf("head %+v, want Next %+v and no changes", head, all[4].Position)
	}
}

// changeFeedForeign: a position this database cannot have written is refused.
func changeFeedForeign(t *testing.T, newStore func(t *testing.T) correlate.Store) {
	ctx := context.Background()
	f := newCorrFixture(t, newStore, correlate.Options{})
	f.create(corrAlice, `{"category":"c","action":"a"}`)
	for _, p := range []correlate.FeedPosition{{TX: math.MaxUint64 >> 1, Seq: 1}, {TX: 0, Seq: math.MaxInt64}} {
		_, err := f.store.Feed(ctx, correlate.FeedRead{After: p, Limit: 10})
		if p.TX == 0 && err == nil {
			continue // PostgreSQL reads positions by transaction: TX 0 lies before them all
		}
		if !errors.Is(err, correlate.ErrCursor) {
			t.Errorf("Feed after %+v: %v, want ErrCursor", p, err)
		}
	}
}

var cmpEmpty = cmp.Comparer(func(a, b []correlate.Change) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return cmp.Equal(a, b)
})
