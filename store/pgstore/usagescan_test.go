package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/ingest/usage"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// TestHistoriesScanChunks: Histories of a query without a project or
// platform filter reads the events in key order, a bounded number of rows
// a statement, holding a chunk's last key back for the next. At every
// chunk size, from one row on, and for every bound (after a key, before an
// instant, a resource limit, as of the start), it gives exactly what the
// read by resources gives: the same histories in the same order, each
// with its checkpoint, including a resource with more events than a chunk
// holds, resources known only from a checkpoint, and events older than
// their checkpoint (a retention run stopped before its drop), which the
// checkpoint replaces.
func TestHistoriesScanChunks(t *testing.T) {
	ctx := context.Background()
	u := pgtest.URL(t)
	db := pgtest.Open(t, u, pgstore.Options{})
	st := db.Ingest()
	r := rand.New(rand.NewPCG(7, 26))
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var evs []event.Event
	for i := range 40 {
		n := r.IntN(6) // resources without events are checkpoint-only ones below
		if i == 17 {
			n = 23 // longer than every small chunk
		}
		for j := range n {
			typ := "instance.update"
			if j == 0 {
				typ = "instance.create.end"
			}
			e := event.Event{EventID: fmt.Sprintf("e-%02d-%02d", i, j), Timestamp: base.Add(time.Duration(r.IntN(40*24)) * time.Hour),
				EventType: typ, Platform: "openstack", Cloud: []string{"c1", "c2"}[i%2], ResourceType: "instance",
				ResourceID: fmt.Sprintf("r%02d", i), ProjectID: fmt.Sprintf("p%d", i%3), Source: event.SourceCollector}
			e.Payload.Size = []byte(fmt.Sprintf(`{"vcpus":%d}`, 1+r.IntN(4)))
			evs = append(evs, e)
		}
	}
	if _, err := st.Commit(ctx, ingest.Batch{Events: evs}); err != nil {
		t.Fatal(err)
	}
	snap := settledSnapshot(t, st, len(evs))
	pl, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	// Checkpoints: resources 3, 9 and 33 have none of their events left
	// (some have none at all), 17 and 20 keep events on both sides of
	// theirs.
	for _, i := range []int{3, 9, 17, 20, 33} {
		at := base.Add(time.Duration(10+i) * 24 * time.Hour)
		if _, err := pl.Exec(ctx, `INSERT INTO resource_checkpoints (cloud, resource_type, resource_id, at, platform, project_id, state, size,
created_at, deleted_at, first_event_at, last_event_at, last_event_type, last_event_id)
VALUES ($1, 'instance', $2, $3, 'openstack', 'p1', 'active', '{"vcpus":8}', $4, NULL, $4, $3, 'instance.update', 'gone')`,
			[]string{"c1", "c2"}[i%2], fmt.Sprintf("r%02d", i), at, base.Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	after := projection.Key{Cloud: "c1", ResourceType: "instance", ResourceID: "r16"}
	queries := map[string]usage.HistoryQuery{
		"all":                               {AsOf: snap.Position},
		"after a key":                       {AsOf: snap.Position, After: &after},
		"before":                            {AsOf: snap.Position, Before: base.Add(20 * 24 * time.Hour)},
		"limit 1":                           {AsOf: snap.Position, Limit: 1},
		"limit 7":                           {AsOf: snap.Position, Limit: 7},
		"one cloud":                         {AsOf: snap.Position, Cloud: "c2"},
		"one resource":                      {AsOf: snap.Position, Cloud: "c2", ResourceType: "instance", ResourceID: "r17"},
		"one cloud and type":                {AsOf: snap.Position, Cloud: "c1", ResourceType: "instance"},
		"one cloud, after a key of it":      {AsOf: snap.Position, Cloud: "c1", After: &after},
		"one cloud and type, after a key":   {AsOf: snap.Position, Cloud: "c1", ResourceType: "instance", After: &after},
		"one cloud, after a key of another": {AsOf: snap.Position, Cloud: "c2", After: &after},
		"one cloud, after a key of a type":  {AsOf: snap.Position, Cloud: "c1", ResourceType: "volume", After: &after},
		"as of start":                       {AsOf: ingest.FeedPosition{}},
	}
	read := func(f func(context.Context, usage.HistoryQuery, func(usage.History) error) error, q usage.HistoryQuery) []usage.History {
		var got []usage.History
		if err := f(ctx, q, func(h usage.History) error { got = append(got, h); return nil }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	byResource := func(ctx context.Context, q usage.HistoryQuery, fn func(usage.History) error) error {
		return pgstore.HistoriesByResource(ctx, st, q, fn)
	}
	for name, q := range queries {
		want := read(byResource, q)
		if name == "all" && len(want) < 30 {
			t.Fatalf("the reference read gave %d histories: the data is not what the test means", len(want))
		}
		if q.After != nil && q.Limit == 0 {
			// The reference itself, against the same query without the key
			// bound, cut in Go.
			whole := q
			whole.After = nil
			var cut []usage.History
			for _, h := range read(byResource, whole) {
				if h.Key.Compare(*q.After) > 0 {
					cut = append(cut, h)
				}
			}
			if diff := cmp.Diff(cut, want, cmpopts.EquateEmpty(), cmpopts.EquateComparable(event.State{})); diff != "" {
				t.Errorf("%s: the read by resources after the key differs from the whole read cut after it (-cut +after):\n%s", name, diff)
			}
		}
		for _, chunk := range []int{1, 2, 3, 5, 8, 23, 24, 10_000} {
			restore := pgstore.SetScanChunk(chunk)
			got := read(st.Histories, q)
			restore()
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty(), cmpopts.EquateComparable(event.State{})); diff != "" {
				t.Errorf("%s, %d rows a statement: scan differs from the read by resources (-want +got):\n%s", name, chunk, diff)
			}
		}
	}
}

// TestHistoriesScanStopsOnError: an error of fn ends the read at once and
// is returned as it is; the reader goroutine stops with it.
func TestHistoriesScanStopsOnError(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Open(t, pgtest.URL(t), pgstore.Options{})
	st := db.Ingest()
	var evs []event.Event
	for i := range 600 {
		evs = append(evs, event.Event{EventID: fmt.Sprintf("e-%03d", i), Timestamp: time.Date(2026, 3, 1, 0, 0, i, 0, time.UTC),
			EventType: "instance.create.end", Platform: "openstack", Cloud: "c1", ResourceType: "instance",
			ResourceID: fmt.Sprintf("r%03d", i), ProjectID: "p", Source: event.SourceCollector})
	}
	if _, err := st.Commit(ctx, ingest.Batch{Events: evs}); err != nil {
		t.Fatal(err)
	}
	snap := settledSnapshot(t, st, len(evs))
	defer pgstore.SetScanChunk(50)()
	stop := fmt.Errorf("enough")
	n := 0
	err := st.Histories(ctx, usage.HistoryQuery{AsOf: snap.Position}, func(usage.History) error {
		n++
		if n == 120 {
			return stop
		}
		return nil
	})
	if err != stop || n != 120 {
		t.Fatalf("Histories = %v after %d histories, want the error of fn after 120", err, n)
	}
}

// settledSnapshot waits until the feed's head covers n stored events (its
// watermark is the server's: another test's open transaction holds it
// back) and returns that snapshot; it counts them with the read by
// resources, not with the scan under test.
func settledSnapshot(t *testing.T, st *pgstore.Ingest, n int) usage.Snapshot {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(30 * time.Second); ; {
		snap, err := st.Snapshot(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		if err := pgstore.HistoriesByResource(ctx, st, usage.HistoryQuery{AsOf: snap.Position}, func(h usage.History) error {
			got += len(h.Events)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if got == n {
			return snap
		}
		if time.Now().After(deadline) {
			t.Fatalf("the feed's head covers %d events of %d after 30 s", got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHistoriesScanStartsAfterKey: a statement of the key-order scan for
// one cloud (or one cloud and type) starts reading the index at the key
// it continues after, not at the cloud's first entry: the chunk after a
// key near the end of 20,000 events touches a few pages, where a row
// comparison over the whole key beside "cloud = …" read the cloud's
// index from its start at every statement.
func TestHistoriesScanStartsAfterKey(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Open(t, pgtest.URL(t), pgstore.Options{})
	st := db.Ingest()
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	n := 0
	for b := range 20 {
		var evs []event.Event
		for i := range 1000 {
			r := b*1000 + i
			evs = append(evs, event.Event{EventID: fmt.Sprintf("e-%05d", r), Timestamp: base.Add(time.Duration(r) * time.Second),
				EventType: "instance.create.end", Platform: "openstack", Cloud: "c1", ResourceType: "instance",
				ResourceID: fmt.Sprintf("r%05d", r), ProjectID: "p", Source: event.SourceCollector})
		}
		if _, err := st.Commit(ctx, ingest.Batch{Events: evs}); err != nil {
			t.Fatal(err)
		}
		n += len(evs)
	}
	snap := settledSnapshot(t, st, n)
	if _, err := pgstore.PoolOf(db).Exec(ctx, "ANALYZE events"); err != nil {
		t.Fatal(err)
	}
	after := projection.Key{Cloud: "c1", ResourceType: "instance", ResourceID: "r19900"}
	for name, q := range map[string]usage.HistoryQuery{
		"one cloud":          {AsOf: snap.Position, Cloud: "c1", After: &after},
		"one cloud and type": {AsOf: snap.Position, Cloud: "c1", ResourceType: "instance", After: &after},
		"every cloud":        {AsOf: snap.Position, After: &after},
	} {
		query, args := pgstore.ScanEventsQuery(q)
		tx, err := pgstore.PoolOf(db).Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// As scanOnce runs it.
		if _, err := tx.Exec(ctx, "SET LOCAL enable_sort = off; SET LOCAL jit = off"); err != nil {
			t.Fatal(err)
		}
		var raw []byte
		err = tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+query, args...).Scan(&raw)
		_ = tx.Rollback(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var plans []struct {
			Plan struct {
				Rows float64 `json:"Actual Rows"`
				Hit  int     `json:"Shared Hit Blocks"`
				Read int     `json:"Shared Read Blocks"`
			} `json:"Plan"`
		}
		if err := json.Unmarshal(raw, &plans); err != nil || len(plans) != 1 {
			t.Fatalf("explain: %v %s", err, raw)
		}
		p := plans[0].Plan
		// 99 events after the key: their heap pages and a few index pages
		// (the cloud's index alone is over 100 leaf pages).
		if p.Rows != 99 || p.Hit+p.Read > 60 {
			t.Errorf("%s: %v rows, %d buffers, want 99 rows from at most 60 buffers:\n%s", name, p.Rows, p.Hit+p.Read, raw)
		}
	}
}
