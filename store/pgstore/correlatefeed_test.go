package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// A change written by a transaction that started early but commits after a
// later one is not skipped by a reader that read in between: the feed
// reads only below the oldest running transaction (pg_snapshot_xmin), so
// the later change waits for the earlier one, and the next read returns
// both, in position order.
func TestFeedDoesNotSkipALateCommit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := pgtest.URL(t)
	db := pgtest.Open(t, url, pgstore.Options{})
	st := db.Correlate()
	conn := func() *pgx.Conn {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return c
	}
	early, late := conn(), conn()
	insert := func(c *pgx.Conn, id string) {
		t.Helper()
		snapshot := `{"id":"` + id + `","organization":"org-1","user_id":"alice","category":"c","action":"a","severity":"informational",` +
			`"status":"unread","description":"","created_at":"2026-03-01T12:00:00+00:00","updated_at":"2026-03-01T12:00:00+00:00"}`
		if _, err := c.Exec(ctx, `INSERT INTO correlated_event_changes (kind, event_id, organization, user_id, category, action,
			severity, status, resolved, description, snapshot) VALUES ('created', $1, 'org-1', 'alice', 'c', 'a', 'informational',
			'unread', false, '', $2::json)`, id, snapshot); err != nil {
			t.Fatal(err)
		}
	}
	const earlyID, lateID = "00000000-0000-7000-8000-000000000001", "00000000-0000-7000-8000-000000000002"
	for _, c := range []*pgx.Conn{early, late} {
		if _, err := c.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
	}
	insert(early, earlyID) // the early transaction takes its id first
	insert(late, lateID)
	if _, err := late.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	between, err := st.Feed(ctx, correlate.FeedRead{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(between.Changes) != 0 || between.Next != (correlate.FeedPosition{}) {
		t.Fatalf("read while the early transaction runs: %+v, want no change and Next still at the start", between)
	}
	if _, err := early.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	var got []string
	after := between.Next
	for deadline := time.Now().Add(10 * time.Second); len(got) < 2 && time.Now().Before(deadline); {
		b, err := st.Feed(ctx, correlate.FeedRead{After: after, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range b.Changes {
			got = append(got, c.Event.ID)
		}
		after = b.Next
		time.Sleep(10 * time.Millisecond)
	}
	if diff := cmp.Diff([]string{earlyID, lateID}, got); diff != "" {
		t.Errorf("changes after the late commit (-want +got):\n%s", diff)
	}
}

// A position whose transaction this database has not started yet (as a
// cursor of another database holds) is refused, not read as "nothing yet".
func TestFeedRefusesAnotherDatabasesPosition(t *testing.T) {
	db := pgtest.DB(t, pgstore.Options{})
	_, err := db.Correlate().Feed(context.Background(), correlate.FeedRead{After: correlate.FeedPosition{TX: 1 << 60, Seq: 1}, Limit: 1})
	if !errors.Is(err, correlate.ErrCursor) {
		t.Errorf("Feed after a far transaction: %v, want ErrCursor", err)
	}
}

// A filtered read scans at most correlate.MaxFeedScan changes: past that
// many it stops, not caught up, with Next at the last one scanned, and the
// next read from there finds the selected change.
func TestFeedScanIsBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := pgtest.URL(t)
	db := pgtest.Open(t, url, pgstore.Options{})
	st := db.Correlate()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	snapshot := `{"id":"00000000-0000-7000-8000-000000000001","organization":"org-1","user_id":"alice","category":"c","action":"a",` +
		`"severity":"informational","status":"unread","description":"","created_at":"2026-03-01T12:00:00+00:00","updated_at":"2026-03-01T12:00:00+00:00"}`
	if _, err := c.Exec(ctx, `INSERT INTO correlated_event_changes (kind, event_id, organization, user_id, category, action,
		severity, status, resolved, description, snapshot)
		SELECT 'created', '00000000-0000-7000-8000-000000000001', 'org-1', CASE WHEN i > $1 THEN 'alice' ELSE 'bob' END, 'c', 'a',
			'informational', 'unread', false, '', $2::json FROM generate_series(1, $1 + 1) i ORDER BY i`,
		correlate.MaxFeedScan+5, snapshot); err != nil {
		t.Fatal(err)
	}
	alice := correlate.FeedFilter{Scope: correlate.Caller{Organization: "org-1", User: "alice"}}
	var b correlate.FeedBatch
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, err = st.Feed(ctx, correlate.FeedRead{Limit: 10, Filter: alice}); err != nil {
			t.Fatal(err)
		}
		if b.Next != (correlate.FeedPosition{}) {
			break // readable
		}
	}
	if len(b.Changes) != 0 || b.CaughtUp || b.Next.Seq != correlate.MaxFeedScan {
		t.Fatalf("first read: %d changes, caught up %v, next %+v; want none, not caught up, next at seq %d", len(b.Changes), b.CaughtUp, b.Next, correlate.MaxFeedScan)
	}
	b, err = st.Feed(ctx, correlate.FeedRead{After: b.Next, Limit: 10, Filter: alice})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Changes) != 1 || b.Changes[0].Event.User != "alice" || !b.CaughtUp {
		t.Errorf("second read: %+v, want alice's change, caught up", b)
	}
}
