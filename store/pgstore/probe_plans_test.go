package pgstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// TestKeyLookupsReadOnlyTheBatchMonths: the statements of a Commit that
// look events up by key (the duplicate probe, the marking of late events)
// plan over the partitions of the months of the batch's timestamps only,
// not over every partition of events: with a year or more of partitions
// each such statement would otherwise open, lock and plan every one of
// them, and ingest on a partitioned table is to stay at least 0.95× that
// on one table (docs/performance.md, Partitioned events and their DDL).
func TestKeyLookupsReadOnlyTheBatchMonths(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Open(t, pgtest.PartitionedURL(t), pgstore.Options{})
	if _, err := db.MakePartitions(ctx, time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	march := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		at   []time.Time
		want []string
	}{
		{"one month", []time.Time{march, march.Add(time.Hour)}, []string{"events_2026_03"}},
		{"two months", []time.Time{march, march.AddDate(0, 1, 0)}, []string{"events_2026_03", "events_2026_04"}},
		{"a month's last microsecond", []time.Time{time.Date(2026, 3, 31, 23, 59, 59, 999999000, time.UTC)}, []string{"events_2026_03"}},
		{"an offset that is another UTC month", []time.Time{time.Date(2026, 4, 1, 1, 0, 0, 0, time.FixedZone("", 2*3600))}, []string{"events_2026_03"}},
	} {
		var evs []event.Event
		for i, at := range tc.at {
			evs = append(evs, ev("k"+string(rune('a'+i)), at))
		}
		for name, q := range map[string]func([]event.Event) (string, []any){"probe": pgstore.ProbeQuery, "mark late": pgstore.MarkLateQuery} {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				query, args := q(evs)
				root, text := explain(t, db, query, args...)
				var got []string
				root.walk(func(n planNode) {
					if strings.HasPrefix(n.Relation, "events_") && !slices.Contains(got, n.Relation) {
						got = append(got, n.Relation)
					}
				})
				slices.Sort(got)
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("partitions in the plan (-want +got):\n%s\n%s", diff, text)
				}
			})
		}
	}
}

// TestKeyLookupsAtTheEndsOfTime: the month bounds of the key lookups hold
// at the ends of the range an event may carry (a UTC month in year 0,
// written as 1 BC, and December 9999, whose upper bound is in year
// 10000): a batch with both is stored, its late event marked (older than
// what was stored of its resource before the batch), and sent again it is
// all duplicates ("A duplicate is the same (event_id, timestamp) pair").
func TestKeyLookupsAtTheEndsOfTime(t *testing.T) {
	ctx := context.Background()
	db, conn := openDB(t, pgstore.Options{})
	first := time.Date(1, 1, 1, 0, 30, 0, 0, time.FixedZone("", 3600)) // 0000-12-31T23:30Z
	last := time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
	a, b, c := ev("a", last), ev("b", first), ev("c", last.Add(-time.Second))
	b.ResourceID = a.ResourceID // older than a, stored before b's batch: late
	b.EventType = "compute.instance.update"
	if _, err := db.Ingest().Commit(ctx, ingest.Batch{Events: []event.Event{a}}); err != nil {
		t.Fatal(err)
	}
	batch := []event.Event{b, c}
	res, err := db.Ingest().Commit(ctx, ingest.Batch{Events: batch})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]bool{true, true}, res.Inserted); diff != "" {
		t.Errorf("first commit, inserted (-want +got):\n%s", diff)
	}
	batch = []event.Event{a, b, c}
	var late []string
	rows, err := conn.Query(ctx, `SELECT event_id FROM events WHERE late ORDER BY event_id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		late = append(late, id)
	}
	if diff := cmp.Diff([]string{"b"}, late); diff != "" {
		t.Errorf("late events (-want +got):\n%s", diff)
	}
	for mode := range 2 { // the sample probe, then the full one
		res, err = pgstore.CommitInMode(ctx, db.Ingest(), ingest.Batch{Events: batch}, mode)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]bool{false, false, false}, res.Inserted); diff != "" {
			t.Errorf("again in mode %d, inserted (-want +got):\n%s", mode, diff)
		}
	}
}

// TestProbeLooksUpEachKey: the duplicate probe of a Commit looks each key
// up by index, whatever the statistics say. Its month's partition was
// analyzed when it held a few events and then grew to 40,000 (a new month,
// a burst of ingest, before autovacuum analyzes it again): as a join, the
// probe hashed every event of the month, each batch paying for the whole
// month ("A duplicate is the same (event_id, timestamp) pair": finding one
// needs only its key).
func TestProbeLooksUpEachKey(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Open(t, pgtest.PartitionedURL(t), pgstore.Options{})
	march := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	if _, err := db.MakePartitions(ctx, march, march.AddDate(0, 1, 0)); err != nil {
		t.Fatal(err)
	}
	pool := pgstore.PoolOf(db)
	fill := func(from, to int) {
		t.Helper()
		if _, err := pool.Exec(ctx, `INSERT INTO events (event_id, timestamp, event_type, platform, cloud, resource_type,
    resource_id, project_id, source, payload, category, received_at)
SELECT 'e' || i, $1::timestamptz + i * interval '1 second', 'compute.instance.update', 'openstack', 'c1', 'instance',
    'r' || (i % 1000), 'p1', 'collector', '{"state":"active"}', 'update', now()
FROM generate_series($2::int, $3::int) AS i`, march, from, to); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `ALTER TABLE events_2026_03 SET (autovacuum_enabled = off)`); err != nil {
		t.Fatal(err)
	}
	fill(0, 29)
	if _, err := pool.Exec(ctx, `ANALYZE events_2026_03`); err != nil {
		t.Fatal(err)
	}
	fill(30, 39_999)
	var evs []event.Event
	for i := range 1000 { // a batch's full probe: half its keys stored
		e := ev(fmt.Sprintf("e%d", i*40), march.Add(time.Duration(i*40)*time.Second))
		if i%2 == 1 {
			e.EventID = fmt.Sprintf("new%d", i)
		}
		evs = append(evs, e)
	}
	query, args := pgstore.ProbeQuery(evs)
	root, text := explain(t, db, query, args...)
	var bad []string
	root.walk(func(n planNode) {
		switch n.NodeType {
		case "Hash Join", "Merge Join", "Seq Scan", "Bitmap Heap Scan", "Bitmap Index Scan":
			bad = append(bad, n.NodeType+" "+n.Relation+n.IndexName)
		}
	})
	if len(bad) > 0 {
		t.Errorf("the probe reads more than its keys: %s\n%s", strings.Join(bad, ", "), text)
	}
	res, err := pgstore.CommitInMode(ctx, db.Ingest(), ingest.Batch{Events: evs}, 1) // the full probe
	if err != nil {
		t.Fatal(err)
	}
	var inserted int
	for _, in := range res.Inserted {
		if in {
			inserted++
		}
	}
	if inserted != 500 {
		t.Errorf("inserted %d of the batch, want the 500 whose keys were not stored", inserted)
	}
}
