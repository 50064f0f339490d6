package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/internal/feed"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// insertEventRow inserts one events row of id through q (a transaction
// opened by hand), so that it takes q's transaction id and the next feed
// seq now.
func insertEventRow(t *testing.T, q pgx.Tx, id string, ts time.Time) {
	t.Helper()
	if _, err := q.Exec(context.Background(), `
INSERT INTO events (event_id, timestamp, event_type, platform, cloud, resource_type, resource_id,
                    project_id, source, payload, category, received_at)
VALUES ($1, $2, 'compute.instance.create.end', 'openstack', 'east', 'instance', 'vm-' || $1,
        'p1', 'collector', '{"state":"active"}', 'compute', now())`, id, ts); err != nil {
		t.Fatalf("insert %s: %v", id, err)
	}
}

// follow reads the store's feed from after, limit events at a time, until
// it has n events in all (waiting for the watermark: any open transaction
// of the server holds it back) and returns them with the last Next.
func follow(t *testing.T, st ingest.Store, after ingest.FeedPosition, n, limit int) ([]ingest.FeedEvent, ingest.FeedPosition) {
	t.Helper()
	var out []ingest.FeedEvent
	deadline := time.Now().Add(20 * time.Second)
	for len(out) < n {
		b, err := st.Feed(context.Background(), ingest.FeedRead{After: after, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b.Items...)
		after = b.Next
		if b.CaughtUp && len(out) < n {
			if time.Now().After(deadline) {
				t.Fatalf("after 20s the feed gave %d of %d events: %v", len(out), n, ids(out))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return out, after
}

func ids(evs []ingest.FeedEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Event.EventID
	}
	return out
}

// The race positions alone lose an event to: "transaction A takes position
// 1 and stays open; B takes 2 and commits; a reader polling position > 0
// sees 2, moves its cursor to 2, and after A commits position > 2 returns
// nothing". With (tx, seq) read below the watermark the reader gets both,
// once each, in feed order, whichever of A and B took its transaction id
// first.
func TestFeedNoEventSkippedByALateCommit(t *testing.T) {
	ts := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		// run opens A (and B, when by hand), commits B, and returns a func
		// that commits A.
		run  func(t *testing.T, u string, svc *ingest.Service) func()
		want []string
	}{
		{
			name: "A takes its transaction id and seq first, B commits through the service",
			run: func(t *testing.T, u string, svc *ingest.Service) func() {
				a := beginByHand(t, u)
				insertEventRow(t, a, "A", ts)
				res, err := svc.Ingest(context.Background(), ingest.Caller{Credential: "c"}, [][]byte{raw(t, ev("B", ts))})
				if err != nil || res.Accepted != 1 {
					t.Fatalf("ingest B: %+v, %v", res, err)
				}
				return func() { commit(t, a) }
			},
			want: []string{"A", "B"},
		},
		{
			name: "B takes its transaction id first, A its seq first",
			run: func(t *testing.T, u string, svc *ingest.Service) func() {
				b := beginByHand(t, u)
				if _, err := b.Exec(context.Background(), `SELECT pg_current_xact_id()`); err != nil {
					t.Fatal(err)
				}
				a := beginByHand(t, u)
				insertEventRow(t, a, "A", ts)
				insertEventRow(t, b, "B", ts)
				commit(t, b)
				return func() { commit(t, a) }
			},
			want: []string{"B", "A"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := pgtest.URL(t)
			db := pgtest.Open(t, u, pgstore.Options{})
			if _, err := db.MakePartitions(context.Background(), ts, ts); err != nil {
				t.Fatal(err)
			}
			st := db.Ingest()
			svc, err := ingest.New(st, ingest.Options{})
			if err != nil {
				t.Fatal(err)
			}
			commitA := tc.run(t, u, svc)
			// The reader polls while A is open: it must not see A, and
			// whatever it sees moves its cursor.
			var seen []ingest.FeedEvent
			after := ingest.FeedPosition{}
			for range 5 {
				b, err := st.Feed(context.Background(), ingest.FeedRead{After: after, Limit: 10})
				if err != nil {
					t.Fatal(err)
				}
				seen, after = append(seen, b.Items...), b.Next
				time.Sleep(5 * time.Millisecond)
			}
			if slices.Contains(ids(seen), "A") {
				t.Fatalf("the reader saw A before it committed: %v", ids(seen))
			}
			if tc.want[0] == "A" && len(seen) > 0 {
				t.Fatalf("the reader saw %v while A, first in feed order, is open", ids(seen))
			}
			commitA()
			rest, _ := follow(t, st, after, len(tc.want)-len(seen), 10)
			got := append(seen, rest...)
			if d := cmp.Diff(tc.want, ids(got)); d != "" {
				t.Errorf("the reader's feed (-want +got):\n%s", d)
			}
			if b, err := st.Feed(context.Background(), ingest.FeedRead{After: got[len(got)-1].Position, Limit: 10}); err != nil || len(b.Items) != 0 {
				t.Errorf("after the last event: %v, %v; want nothing", ids(b.Items), err)
			}
		})
	}
}

// beginByHand opens a transaction on its own connection to u, rolled back
// on cleanup unless committed.
func beginByHand(t *testing.T, u string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

func commit(t *testing.T, tx pgx.Tx) {
	t.Helper()
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A cursor whose transaction id this server has not reached is from
// another database: the store says ErrFeedPosition, the service refuses it
// naming /after.
func TestFeedForeignCursor(t *testing.T) {
	db := pgtest.DB(t, pgstore.Options{})
	st := db.Ingest()
	foreign := feed.Position{Kind: feed.Current, TX: 1 << 60, Seq: 1}
	if _, err := st.Feed(context.Background(), ingest.FeedRead{After: foreign, Limit: 10}); !errors.Is(err, ingest.ErrFeedPosition) {
		t.Errorf("store: %v, want ErrFeedPosition", err)
	}
	svc, err := ingest.New(st, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.Feed(context.Background(), ingest.FeedQuery{After: feed.Encode(feed.Lifecycle, foreign)})
	var ve *event.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Member != "/after" {
		t.Errorf("service: %v, want a validation error naming /after", err)
	}
}

// followService reads svc's feed from cursor with wait until it has n
// items, and returns them.
func followService(t *testing.T, svc *ingest.Service, cursor string, n int, deadline time.Time) ([]ingest.FeedItem, error) {
	var out []ingest.FeedItem
	for len(out) < n {
		if time.Now().After(deadline) {
			return out, fmt.Errorf("the feed gave %d of %d events", len(out), n)
		}
		p, err := svc.Feed(context.Background(), ingest.FeedQuery{After: cursor, Limit: 1 + rand.IntN(50), Wait: 200 * time.Millisecond})
		if err != nil {
			return out, err
		}
		out = append(out, p.Items...)
		cursor = p.NextCursor
	}
	return out, nil
}

// Property: 32 writers commit small batches at overlapping times, some
// holding their transaction open a while; 3 readers follow the feed with
// wait from the beginning. Each reader gets exactly the accepted events,
// none twice, in one order all readers share.
func TestFeedConcurrentWritersReaders(t *testing.T) {
	u := pgtest.URL(t)
	db := pgtest.Open(t, u, pgstore.Options{})
	svc, err := ingest.New(db.Ingest(), ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	if _, err := db.MakePartitions(context.Background(), ts, ts); err != nil {
		t.Fatal(err)
	}
	const writers, batches = 32, 6
	var (
		mu       sync.Mutex
		accepted []string
		total    atomic.Int64
		wg       sync.WaitGroup
		errs     = make(chan error, writers+3)
	)
	total.Store(-1)
	for w := range writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			var conn *pgx.Conn
			if w%8 == 0 { // writes by hand, holding its transaction open
				var err error
				if conn, err = pgx.Connect(context.Background(), u); err != nil {
					errs <- err
					return
				}
				defer conn.Close(context.Background())
			}
			for b := range batches {
				n := 1 + r.IntN(4)
				var mine []string
				for i := range n {
					mine = append(mine, fmt.Sprintf("w%02d-b%d-%d", w, b, i))
				}
				time.Sleep(time.Duration(r.IntN(3000)) * time.Microsecond)
				if conn != nil {
					if err := heldInsert(conn, mine, ts, time.Duration(r.IntN(20))*time.Millisecond); err != nil {
						errs <- err
						return
					}
				} else {
					items := make([][]byte, n)
					for i, id := range mine {
						b, err := ev(id, ts).MarshalJSON()
						if err != nil {
							errs <- err
							return
						}
						items[i] = b
					}
					res, err := svc.Ingest(context.Background(), ingest.Caller{Credential: "c"}, items)
					if err != nil || res.Accepted != n {
						errs <- fmt.Errorf("ingest %v: %+v, %v", mine, res, err)
						return
					}
				}
				mu.Lock()
				accepted = append(accepted, mine...)
				mu.Unlock()
			}
		})
	}
	got := make([][]string, 3)
	var rg sync.WaitGroup
	for r := range got {
		rg.Go(func() {
			deadline := time.Now().Add(60 * time.Second)
			cursor := ""
			for {
				n := total.Load()
				if n >= 0 && int64(len(got[r])) >= n {
					return
				}
				if time.Now().After(deadline) {
					errs <- fmt.Errorf("reader %d: after 60s %d events", r, len(got[r]))
					return
				}
				p, err := svc.Feed(context.Background(), ingest.FeedQuery{After: cursor, Limit: 1 + rand.IntN(40), Wait: 300 * time.Millisecond})
				if err != nil {
					errs <- fmt.Errorf("reader %d: %w", r, err)
					return
				}
				for _, it := range p.Items {
					got[r] = append(got[r], it.Event.EventID)
				}
				cursor = p.NextCursor
			}
		})
	}
	wg.Wait()
	total.Store(int64(len(accepted)))
	rg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	want := slices.Sorted(slices.Values(accepted))
	for r, g := range got {
		if d := cmp.Diff(want, slices.Sorted(slices.Values(g))); d != "" {
			t.Errorf("reader %d: events (-accepted +read):\n%s", r, d)
		}
		if r > 0 {
			if d := cmp.Diff(got[0], g); d != "" {
				t.Errorf("reader %d's order against reader 0's (-0 +%d):\n%s", r, r, d)
			}
		}
	}
}

// heldInsert inserts ids in one transaction on conn, holding it open for
// hold before it commits.
func heldInsert(conn *pgx.Conn, ids []string, ts time.Time, hold time.Duration) error {
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, id := range ids {
		if _, err := tx.Exec(ctx, `
INSERT INTO events (event_id, timestamp, event_type, platform, cloud, resource_type, resource_id,
                    project_id, source, payload, category, received_at)
VALUES ($1, $2, 'compute.instance.create.end', 'openstack', 'east', 'instance', 'vm-' || $1,
        'p1', 'collector', '{"state":"active"}', 'compute', now())`, id, ts); err != nil {
			return err
		}
		time.Sleep(hold / time.Duration(len(ids)))
	}
	return tx.Commit(ctx)
}

// Two replicas (two pools, two services) on one database: a cursor the
// feed gave on one continues on the other with exactly the events after
// it.
func TestFeedCursorsAcrossReplicas(t *testing.T) {
	u := pgtest.URL(t)
	var svcs [2]*ingest.Service
	for i := range svcs {
		s, err := ingest.New(pgtest.Open(t, u, pgstore.Options{}).Ingest(), ingest.Options{Feed: ingest.FeedOptions{Poll: 20 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		svcs[i] = s
	}
	ts := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	const n = 60
	batches := make([][][]byte, 20)
	for b := range batches {
		for i := range n / 20 {
			batches[b] = append(batches[b], raw(t, ev(fmt.Sprintf("e%02d-%d", b, i), ts)))
		}
	}
	written := make(chan error, 1)
	go func() {
		for b, items := range batches {
			if res, err := svcs[b%2].Ingest(context.Background(), ingest.Caller{Credential: "c"}, items); err != nil || res.Accepted != len(items) {
				written <- fmt.Errorf("batch %d: %+v, %v", b, res, err)
				return
			}
			time.Sleep(time.Millisecond)
		}
		written <- nil
	}()
	// Replica 1 long-polls, noting every cursor it was given.
	var (
		items   []ingest.FeedItem
		cursors = []string{""}
		at      []int // len(items) when each cursor was given
	)
	at = append(at, 0)
	deadline := time.Now().Add(20 * time.Second)
	for cursor := ""; len(items) < n; {
		if time.Now().After(deadline) {
			t.Fatalf("replica 1 gave %d of %d events", len(items), n)
		}
		p, err := svcs[0].Feed(context.Background(), ingest.FeedQuery{After: cursor, Limit: 7, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range p.Items {
			items = append(items, it)
			cursors, at = append(cursors, it.Position), append(at, len(items))
		}
		cursor = p.NextCursor
		cursors, at = append(cursors, cursor), append(at, len(items))
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, it := range items {
		all = append(all, it.Event.EventID)
	}
	for i, c := range cursors {
		rest, err := followService(t, svcs[1], c, n-at[i], time.Now().Add(10*time.Second))
		if err != nil {
			t.Fatalf("replica 2 after cursor %d: %v", i, err)
		}
		var got []string
		for _, it := range rest {
			got = append(got, it.Event.EventID)
		}
		if d := cmp.Diff(all[at[i]:], got, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("replica 2 after cursor %d (-replica 1 +replica 2):\n%s", i, d)
		}
		p, err := svcs[1].Feed(context.Background(), ingest.FeedQuery{After: cursorAfter(c, rest), Limit: 10})
		if err != nil || len(p.Items) != 0 {
			t.Errorf("replica 2 past the end after cursor %d: %d items, %v", i, len(p.Items), err)
		}
	}
}

func cursorAfter(c string, rest []ingest.FeedItem) string {
	if len(rest) == 0 {
		return c
	}
	return rest[len(rest)-1].Position
}

// An upgraded database: events stored at version 11 (before the feed's
// columns) come first, once, in (timestamp, event_id "C") order, then the
// events stored after the upgrade; a read resumes from every position,
// across the boundary, with exactly the events after it.
func TestFeedAfterUpgrade(t *testing.T) {
	ctx := context.Background()
	u := pgtest.EmptyURL(t)
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	sqlDB := stdlib.OpenDB(*cfg)
	defer sqlDB.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, os.DirFS("migrations"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 11); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	ts := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	// Stored out of order; "B" < "a" < "b" in "C" order; two share a
	// timestamp.
	legacy := []struct {
		id string
		ts time.Time
	}{
		{"b", ts}, {"z", ts.Add(-time.Hour)}, {"a", ts}, {"B", ts}, {"c", ts.Add(time.Microsecond)},
	}
	for _, l := range legacy {
		if _, err := conn.Exec(ctx, `
INSERT INTO events (event_id, timestamp, event_type, platform, cloud, resource_type, resource_id,
                    project_id, source, payload, category, received_at)
VALUES ($1, $2, 'compute.instance.create.end', 'openstack', 'east', 'instance', 'vm-' || $1,
        'p1', 'collector', '{"state":"active"}', 'compute', now())`, l.id, l.ts); err != nil {
			t.Fatal(err)
		}
	}
	db := pgtest.Open(t, u, pgstore.Options{})
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	svc, err := ingest.New(db.Ingest(), ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]string{{"n1", "n2"}, {"n3"}} {
		var items [][]byte
		for _, id := range b {
			items = append(items, raw(t, ev(id, ts.Add(-2*time.Hour))))
		}
		if res, err := svc.Ingest(ctx, ingest.Caller{Credential: "c"}, items); err != nil || res.Accepted != len(b) {
			t.Fatalf("ingest %v: %+v, %v", b, res, err)
		}
	}
	st := db.Ingest()
	all, _ := follow(t, st, ingest.FeedPosition{}, 8, 1000)
	got := ids(all)
	if d := cmp.Diff([]string{"z", "B", "a", "b", "c"}, got[:5]); d != "" {
		t.Errorf("legacy events (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"n1", "n2", "n3"}, slices.Sorted(slices.Values(got[5:]))); d != "" {
		t.Errorf("new events (-want +got):\n%s", d)
	}
	for i, e := range all {
		if want := feed.Current; i >= 5 && e.Position.Kind != want || i < 5 && e.Position.Kind != feed.Legacy {
			t.Errorf("%s: position kind %v", e.Event.EventID, e.Position.Kind)
		}
	}
	starts := []ingest.FeedPosition{{}}
	for _, e := range all {
		starts = append(starts, e.Position)
	}
	for i, after := range starts {
		for _, limit := range []int{1, 2, 3, 1000} {
			rest, _ := follow(t, st, after, len(all)-i, limit)
			if d := cmp.Diff(got[i:], ids(rest)); d != "" {
				t.Errorf("after position %d, limit %d (-want +got):\n%s", i, limit, d)
			}
		}
		cursor := ""
		if i > 0 {
			cursor = feed.Encode(feed.Lifecycle, after)
		}
		rest, err := followService(t, svc, cursor, len(all)-i, time.Now().Add(10*time.Second))
		if err != nil {
			t.Fatalf("service after cursor %d: %v", i, err)
		}
		var fromSvc []string
		for _, it := range rest {
			fromSvc = append(fromSvc, it.Event.EventID)
		}
		if d := cmp.Diff(got[i:], fromSvc, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("service after cursor %d (-want +got):\n%s", i, d)
		}
	}
}

// The unfiltered feed read and the head read over 200k events are index
// scans of idx_events_feed that stop at their limit: no sequential scan of
// events, no sort.
func TestFeedPlans(t *testing.T) {
	if testing.Short() {
		t.Skip("inserts 200k rows")
	}
	db := pgtest.DB(t, pgstore.Options{})
	ctx := context.Background()
	pool := pgstore.PoolOf(db)
	if _, err := db.MakePartitions(ctx, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	for range 4 { // a few transactions, so that tx has several values
		if _, err := pool.Exec(ctx, `
INSERT INTO events (event_id, timestamp, event_type, platform, cloud, resource_type, resource_id,
                    project_id, source, payload, category, received_at)
SELECT 'ev-' || i || '-' || txid_current(), timestamptz '2026-01-01' + (i * interval '13 seconds'),
       'compute.instance.' || (i % 20), 'platform-' || (i % 3), 'cloud-' || (i % 4),
       'type-' || (i % 5), 'res-' || (i % 20000), 'project-' || (i % 50), 'collector',
       '{}'::json, 'compute', timestamptz '2026-01-01' + (i * interval '13 seconds')
FROM generate_series(1, 50000) AS i`); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, "ANALYZE events"); err != nil {
		t.Fatal(err)
	}
	var mid feed.Position
	var tx string
	if err := pool.QueryRow(ctx, `SELECT tx::text, seq FROM events ORDER BY tx, seq OFFSET 100000 LIMIT 1`).Scan(&tx, &mid.Seq); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Sscan(tx, &mid.TX); err != nil {
		t.Fatal(err)
	}
	mid.Kind = feed.Current
	type plan struct {
		name  string
		query string
		args  []any
	}
	fromStart, startArgs := pgstore.FeedReadQuery(feed.Position{Kind: feed.Current}, 1000)
	fromMid, midArgs := pgstore.FeedReadQuery(mid, 1000)
	for _, tc := range []plan{
		{"read from the start", fromStart, startArgs},
		{"read from the middle", fromMid, midArgs},
		{"head", pgstore.FeedHeadQuery, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkPlan(t, db, "events", tc.query, tc.args...)
			root, text := explain(t, db, tc.query, tc.args...)
			used := false
			root.walk(func(n planNode) {
				used = used || isIndexOf(t, db, n.IndexName, "idx_events_feed")
				if n.NodeType == "Sort" || n.NodeType == "Incremental Sort" {
					t.Errorf("plan sorts:\n%s", text)
				}
			})
			if !used {
				t.Errorf("plan does not use idx_events_feed:\n%s", text)
			}
		})
	}
}

// The feed orders by the transaction id as a number: transaction 10 after
// 9 (not as text, where "10" < "9"), in a read, a filtered read (which
// first finds the end of its scan) and at the head.
func TestFeedOrdersTransactionIDsAsNumbers(t *testing.T) {
	db, conn := openDB(t, pgstore.Options{})
	ctx := context.Background()
	for _, r := range []struct {
		id  string
		tx  int
		seq int
	}{{"t9", 9, 2}, {"t10", 10, 1}, {"t100", 100, 3}} {
		if _, err := conn.Exec(ctx, `
INSERT INTO events (event_id, timestamp, event_type, platform, cloud, resource_type, resource_id,
                    project_id, source, payload, category, received_at, tx, seq)
VALUES ($1, now(), 'compute.instance.create.end', 'openstack', 'east', 'instance', 'vm-' || $1,
        'p1', 'collector', '{"state":"active"}', 'compute', now(), $2::text::xid8, $3)`, r.id, fmt.Sprint(r.tx), r.seq); err != nil {
			t.Fatal(err)
		}
	}
	st := db.Ingest()
	got, _ := follow(t, st, ingest.FeedPosition{}, 3, 1000)
	if d := cmp.Diff([]string{"t9", "t10", "t100"}, ids(got)); d != "" {
		t.Errorf("feed (-want +got):\n%s", d)
	}
	rest, _ := follow(t, st, feed.Position{Kind: feed.Current, TX: 9, Seq: 2}, 2, 1)
	if d := cmp.Diff([]string{"t10", "t100"}, ids(rest)); d != "" {
		t.Errorf("after t9, one at a time (-want +got):\n%s", d)
	}
	filtered, err := st.Feed(ctx, ingest.FeedRead{Limit: 1000, FeedFilter: ingest.FeedFilter{Cloud: "east"}})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"t9", "t10", "t100"}, ids(filtered.Items)); d != "" || !filtered.CaughtUp {
		t.Errorf("filtered read, caught up %v (-want +got):\n%s", filtered.CaughtUp, d)
	}
	head, err := st.Feed(ctx, ingest.FeedRead{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (feed.Position{Kind: feed.Current, TX: 100, Seq: 3}); head.Next != want {
		t.Errorf("head = %+v, want %+v", head.Next, want)
	}
}

// A read that does not wait sees what this replica committed before it
// asked, also when the commit became readable only after the tail reader
// last looked: an unrelated transaction, open when the event was
// committed, held the watermark back, then ended. Poll is long so that
// only the service's own wake-up moves the tail.
// (The Hub answers only waiting reads from its ring.)
func TestFeedServiceSeesOwnCommitHeldBackByTheWatermark(t *testing.T) {
	u := pgtest.URL(t)
	st := pgtest.Open(t, u, pgstore.Options{}).Ingest()
	svc, err := ingest.New(st, ingest.Options{Feed: ingest.FeedOptions{Poll: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ts := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	ingestOne := func(id string) {
		t.Helper()
		if res, err := svc.Ingest(ctx, ingest.Caller{Credential: "c"}, [][]byte{raw(t, ev(id, ts))}); err != nil || res.Accepted != 1 {
			t.Fatalf("ingest %s: %+v, %v", id, res, err)
		}
	}
	if _, err := svc.Feed(ctx, ingest.FeedQuery{Wait: 10 * time.Millisecond}); err != nil { // starts the tail reader
		t.Fatal(err)
	}
	ingestOne("e0")
	first, _ := follow(t, st, ingest.FeedPosition{}, 1, 10)
	svc.FeedNotify() // the tail reads e0 now that it is readable
	c0 := feed.Encode(feed.Lifecycle, first[0].Position)
	if p, err := svc.Feed(ctx, ingest.FeedQuery{After: c0, Wait: 50 * time.Millisecond}); err != nil || len(p.Items) != 0 {
		t.Fatalf("after e0: %d items, %v", len(p.Items), err)
	}

	held := beginByHand(t, u)
	if _, err := held.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	ingestOne("e1")
	time.Sleep(100 * time.Millisecond) // the tail reads, finds e1 held back
	commit(t, held)
	follow(t, st, first[0].Position, 1, 10) // e1 is readable in the store

	p, err := svc.Feed(ctx, ingest.FeedQuery{After: c0})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range p.Items {
		got = append(got, it.Event.EventID)
	}
	if d := cmp.Diff([]string{"e1"}, got); d != "" {
		t.Errorf("after e0, no wait, caught up %v (-want +got):\n%s", p.CaughtUp, d)
	}
}
