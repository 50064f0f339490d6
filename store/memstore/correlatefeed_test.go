package memstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/store/memstore"
)

// A filtered read scans at most correlate.MaxFeedScan changes: past that
// many it stops, not caught up, with Next at the last one scanned, and the
// next read from there finds the selected change.
func TestFeedScanIsBounded(t *testing.T) {
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := db.Correlate()
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	create := func(i int, user string) {
		e := correlate.Event{ID: fmt.Sprintf("00000000-0000-7000-8000-%012d", i), Organization: "org-1", User: user, Category: "c", Action: "a",
			Severity: correlate.SeverityInformational, Status: correlate.StatusUnread, CreatedAt: now, UpdatedAt: now}
		if _, _, err := st.Create(ctx, correlate.Create{Caller: correlate.Caller{Organization: "org-1", User: user}, Step: correlate.StepRecord, Event: e, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range correlate.MaxFeedScan + 5 {
		create(i, "bob")
	}
	create(correlate.MaxFeedScan+5, "alice")
	alice := correlate.FeedFilter{Scope: correlate.Caller{Organization: "org-1", User: "alice"}}
	b, err := st.Feed(ctx, correlate.FeedRead{Limit: 10, Filter: alice})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Changes) != 0 || b.CaughtUp || b.Next != (correlate.FeedPosition{Seq: correlate.MaxFeedScan}) {
		t.Fatalf("first read: %d changes, caught up %v, next %+v; want none, not caught up, next at the %dth", len(b.Changes), b.CaughtUp, b.Next, correlate.MaxFeedScan)
	}
	b, err = st.Feed(ctx, correlate.FeedRead{After: b.Next, Limit: 10, Filter: alice})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Changes) != 1 || b.Changes[0].Event.User != "alice" || !b.CaughtUp {
		t.Errorf("second read: %+v, want alice's change, caught up", b)
	}
}
