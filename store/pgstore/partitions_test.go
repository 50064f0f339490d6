package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store"
	"github.com/tallyhq/tally/store/pgstore"
	"github.com/tallyhq/tally/store/storetest"
)

// newYork is a connection parameter that sets the session's TimeZone to
// America/New_York (UTC-5 in winter, -4 in summer): a month's start there
// is not a UTC month's start.
const newYork = "&timezone=America%2FNew_York"

// partitionBounds is the bound of every partition of events as
// pg_get_expr prints it in a UTC session, by name, and whether a DEFAULT
// partition exists.
func partitionBounds(t *testing.T, u string) (map[string]string, bool) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u+"&timezone=UTC")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT c.relname::text, pg_get_expr(c.relpartbound, c.oid)
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = to_regclass('events')`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var name, bound string
	if _, err := pgx.ForEachRow(rows, []any{&name, &bound}, func() error { out[name] = bound; return nil }); err != nil {
		t.Fatal(err)
	}
	var defaults int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_partitioned_table WHERE partrelid = to_regclass('events') AND partdefid <> 0`).Scan(&defaults); err != nil {
		t.Fatal(err)
	}
	return out, defaults > 0
}

// monthBound is the bound of the UTC month of year y, month m, as
// pg_get_expr prints it in a UTC session.
func monthBound(y int, m time.Month) string {
	from := time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
	to := from.AddDate(0, 1, 0)
	return fmt.Sprintf("FOR VALUES FROM ('%s+00') TO ('%s+00')", from.Format("2006-01-02 15:04:05"), to.Format("2006-01-02 15:04:05"))
}

// "one partition per UTC month (bounds exactly YYYY-MM-01 00:00:00+00
// whatever the server's TimeZone) … no default partition ever" and "An
// event for a month with no partition gets one made on demand … and its
// batch stored": with every session at America/New_York, the migration's
// partitions, the ones made ahead and the ones made on demand for a past
// and a far future month all start at UTC month starts; an event at the
// last microsecond of a month and one at the first of the next land in
// their own month's partition; no DEFAULT partition exists.
func TestPartitionBoundsAreUTCMonthStarts(t *testing.T) {
	ctx := context.Background()
	u := pgtest.EmptyURL(t) + newYork
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	db := pgtest.Open(t, u, pgstore.Options{Now: func() time.Time { return now }})
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.KeepPartitionsAhead(ctx, 0); err != nil {
		t.Fatal(err)
	}
	svc, err := ingest.New(db.Ingest(), ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stamps := map[string]time.Time{
		"feb-last":  time.Date(2025, 2, 28, 23, 59, 59, 999999000, time.UTC),
		"mar-first": time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC),
		"mar-ny":    time.Date(2025, 3, 1, 4, 59, 59, 0, time.UTC), // still February in New York
		"far":       time.Date(2031, 7, 31, 23, 59, 59, 0, time.UTC),
	}
	var items [][]byte
	for id, ts := range stamps {
		items = append(items, raw(t, ev(id, ts)))
	}
	res, err := svc.Ingest(ctx, ingest.Caller{Credential: "c"}, items)
	if err != nil || res.Accepted != len(items) {
		t.Fatalf("ingest: %+v, %v", res, err)
	}
	got, hasDefault := partitionBounds(t, u)
	if hasDefault {
		t.Error("a DEFAULT partition exists")
	}
	for name, bound := range got {
		var y, m int
		if _, err := fmt.Sscanf(name, "events_%04d_%02d", &y, &m); err != nil {
			t.Errorf("partition %s: not named events_YYYY_MM", name)
			continue
		}
		if want := monthBound(y, time.Month(m)); bound != want {
			t.Errorf("partition %s: bound %s, want %s", name, bound, want)
		}
	}
	// Made ahead: November 2026 and the three months after it (by the
	// migration with the real clock, by KeepPartitionsAhead with the
	// store's); on demand: February and March 2025, July 2031.
	for _, name := range []string{"events_2026_11", "events_2026_12", "events_2027_01", "events_2027_02",
		"events_2025_02", "events_2025_03", "events_2031_07"} {
		if _, ok := got[name]; !ok {
			t.Errorf("no partition %s; partitions: %v", name, got)
		}
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT event_id, tableoid::regclass::text FROM events`)
	if err != nil {
		t.Fatal(err)
	}
	where := map[string]string{}
	var id, part string
	if _, err := pgx.ForEachRow(rows, []any{&id, &part}, func() error { where[id] = part; return nil }); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"feb-last": "events_2025_02", "mar-first": "events_2025_03", "mar-ny": "events_2025_03", "far": "events_2031_07"}
	if diff := cmp.Diff(want, where); diff != "" {
		t.Errorf("partition of each event (-want +got):\n%s", diff)
	}
	parts, err := db.EventPartitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		if p.From.Day() != 1 || p.From.Hour() != 0 || p.From.Location() != time.UTC || !p.To.Equal(p.From.AddDate(0, 1, 0)) {
			t.Errorf("EventPartitions: %+v is not one UTC month", p)
		}
	}
}

// "two replicas storing the first events of a new month at once create one
// partition and fail no batch": eight stores on their own pools (eight
// replicas) commit batches of a month that has no partition, all released
// at once; every batch is stored, and the month has exactly one partition.
func TestPartitionRacingReplicas(t *testing.T) {
	ctx := context.Background()
	u := pgtest.PartitionedURL(t)
	const replicas = 8
	month := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make([]error, replicas)
		res   = make([]ingest.Result, replicas)
	)
	for r := range replicas {
		db := pgtest.Open(t, u, pgstore.Options{})
		svc, err := ingest.New(db.Ingest(), ingest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		items := [][]byte{
			raw(t, ev(fmt.Sprintf("r%d-a", r), month.Add(time.Duration(r)*time.Minute))),
			raw(t, ev(fmt.Sprintf("r%d-b", r), month.AddDate(0, 1, -1))),
		}
		wg.Go(func() {
			<-start
			res[r], errs[r] = svc.Ingest(ctx, ingest.Caller{Credential: "c"}, items)
		})
	}
	close(start)
	wg.Wait()
	for r := range replicas {
		if errs[r] != nil || res[r].Accepted != 2 {
			t.Errorf("replica %d: %+v, %v", r, res[r], errs[r])
		}
	}
	got, hasDefault := partitionBounds(t, u)
	if hasDefault {
		t.Error("a DEFAULT partition exists")
	}
	n := 0
	for name, bound := range got {
		if bound == monthBound(2024, time.May) {
			n++
			if name != "events_2024_05" {
				t.Errorf("May 2024 is partition %s, want events_2024_05", name)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d partitions of May 2024, want 1: %v", n, got)
	}
}

// KeepPartitionsAhead makes the current month's partition and those of the
// months after it, once: a second call makes none. MakePartitions makes
// those of a span of months.
func TestKeepPartitionsAhead(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2029, 12, 15, 0, 0, 0, 0, time.UTC)
	db := pgtest.Open(t, pgtest.PartitionedURL(t), pgstore.Options{Now: func() time.Time { return now }})
	made, err := db.KeepPartitionsAhead(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"events_2029_12", "events_2030_01", "events_2030_02"}, made); diff != "" {
		t.Errorf("made (-want +got):\n%s", diff)
	}
	if made, err = db.KeepPartitionsAhead(ctx, 2); err != nil || len(made) != 0 {
		t.Errorf("second call: made %v, %v; want none", made, err)
	}
	if _, err := db.KeepPartitionsAhead(ctx, -1); err == nil {
		t.Error("a negative ahead: no error")
	}
	made, err = db.MakePartitions(ctx, time.Date(2020, 1, 15, 0, 0, 0, 0, time.UTC), time.Date(2020, 3, 1, 0, 0, 0, 0, time.UTC))
	if diff := cmp.Diff([]string{"events_2020_01", "events_2020_02", "events_2020_03"}, made); err != nil || diff != "" {
		t.Errorf("MakePartitions of January to March 2020: %v (-want +got):\n%s", err, diff)
	}
	if _, err := db.MakePartitions(ctx, time.Date(2020, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)); err == nil {
		t.Error("MakePartitions with to before from: no error")
	}
}

// "unique constraints must include the partition key": on the partitioned
// table the primary key is still (event_id, timestamp), so the same event
// again is a duplicate in every insert mode of Commit, and the same id at
// another time is another event.
func TestPartitionedDuplicates(t *testing.T) {
	ctx := context.Background()
	db := pgtest.DB(t, pgstore.Options{})
	st := db.Ingest()
	ts := time.Date(2023, 3, 31, 23, 0, 0, 0, time.UTC)
	e := ev("dup", ts)
	if res, err := st.Commit(ctx, ingest.Batch{Events: []event.Event{e}}); err != nil || !res.Inserted[0] {
		t.Fatalf("first commit: %+v, %v", res, err)
	}
	for mode := range 3 {
		res, err := pgstore.CommitInMode(ctx, st, ingest.Batch{Events: []event.Event{e}}, mode)
		if err != nil || res.Inserted[0] {
			t.Errorf("mode %d: the same event again: %+v, %v; want a duplicate", mode, res, err)
		}
	}
	other := ev("dup", ts.Add(time.Hour)) // April: another partition
	if res, err := st.Commit(ctx, ingest.Batch{Events: []event.Event{other}}); err != nil || !res.Inserted[0] {
		t.Errorf("the same id an hour later: %+v, %v; want stored", res, err)
	}
}

// The conformance suite passes on a database converted from the
// unpartitioned layout (events_legacy attached, monthly partitions after
// it), as on a new one (TestConformance).
func TestConformanceConverted(t *testing.T) {
	storetest.Run(t, func(tb testing.TB) storetest.Stores {
		u := pgtest.ConvertedURL(tb)
		return stores(pgtest.Open(tb, u, pgstore.Options{}), u)
	})
}

// The conformance suite passes on the unpartitioned layout too (a
// database where timescaledb keeps events one table): Commit makes no
// partition there.
func TestConformanceUnpartitioned(t *testing.T) {
	storetest.Run(t, func(tb testing.TB) storetest.Stores {
		u := pgtest.UnpartitionedURL(tb)
		return stores(pgtest.Open(tb, u, pgstore.Options{}), u)
	})
}

// "converting a database with 1,000,000 events keeps every row and its
// duplicate detection": a schema at the last unpartitioned version with
// 1M events (200k with -short) is migrated; every row is kept, in
// events_legacy, the migration's time is logged, and re-sending stored
// events finds them as duplicates, while new events go on being stored.
func TestConvertKeepsEveryRow(t *testing.T) {
	ctx := context.Background()
	n := 1_000_000
	if testing.Short() {
		n = 200_000
	}
	u := pgtest.EmptyURL(t)
	db := pgtest.Open(t, u, pgstore.Options{})
	if _, err := db.MigrateTo(ctx, pgtest.LastUnpartitioned); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := conn.Exec(ctx, `
INSERT INTO events (event_id, timestamp, event_type, platform, cloud, resource_type, resource_id,
                    project_id, source, payload, category, received_at)
SELECT 'e' || g, $1::timestamptz + g * interval '10 seconds', 'compute.instance.create.end', 'openstack', 'east',
       'instance', 'vm-e' || g, 'p1', 'collector', '{"state":"active"}', 'compute', now()
FROM generate_series(1, $2) AS g`, base, n); err != nil {
		t.Fatal(err)
	}
	var sumBefore int64
	if err := conn.QueryRow(ctx, `SELECT sum(hashtext(event_id || timestamp::text)::bigint) FROM events`).Scan(&sumBefore); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("converted %d events in %v", n, time.Since(began).Round(time.Millisecond))
	var kind string
	var inLegacy int
	var sumAfter int64
	if err := conn.QueryRow(ctx, `SELECT relkind::text FROM pg_class WHERE oid = to_regclass('events')`).Scan(&kind); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*), sum(hashtext(event_id || timestamp::text)::bigint) FROM events WHERE tableoid = 'events_legacy'::regclass`).Scan(&inLegacy, &sumAfter); err != nil {
		t.Fatal(err)
	}
	if kind != "p" || inLegacy != n || sumAfter != sumBefore {
		t.Errorf("after the conversion: relkind %s, %d rows in events_legacy (checksum %d, before %d); want p, %d rows, the same checksum", kind, inLegacy, sumAfter, sumBefore, n)
	}
	if _, hasDefault := partitionBounds(t, u); hasDefault {
		t.Error("a DEFAULT partition exists")
	}
	svc, err := ingest.New(db.Ingest(), ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	old := ev("e17", base.Add(170*time.Second))
	fresh := ev("new-1", base.Add(-time.Hour))
	res, err := svc.Ingest(ctx, ingest.Caller{Credential: "c"}, [][]byte{raw(t, old), raw(t, fresh)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 1 || res.Duplicates != 1 {
		t.Errorf("a stored event and a new one after the conversion: %+v; want 1 accepted, 1 duplicate", res)
	}
	for mode := range 3 {
		r, err := pgstore.CommitInMode(ctx, db.Ingest(), ingest.Batch{Events: []event.Event{old}}, mode)
		if err != nil || r.Inserted[0] {
			t.Errorf("mode %d: a converted event again: %+v, %v; want a duplicate", mode, r, err)
		}
	}
	var where string
	if err := conn.QueryRow(ctx, `SELECT tableoid::regclass::text FROM events WHERE event_id = 'new-1'`).Scan(&where); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(where, "events_legacy") {
		t.Errorf("an event older than the conversion went to %s, want events_legacy (FROM MINVALUE)", where)
	}
}

// "an event for a month with no partition gets one made on demand (bounded
// DDL …)": a batch of 1000 events in 1000 distinct months without a
// partition (an attacker's, or a sparse backfill) made them all in one
// transaction, which ran out of the server's lock table after 18 s ("out
// of shared memory", answered 503, so the client retried it forever). A
// batch that needs more than pgstore.MaxPartitionsPerBatch new months is
// refused whole, at once, with ingest.ErrTooManyMonths naming the
// timestamp and the bound, and makes no partition; one at the bound is
// stored.
func TestPartitionsPerBatchBounded(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Open(t, pgtest.PartitionedURL(t), pgstore.Options{})
	svc, err := ingest.New(db.Ingest(), ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	before, err := db.EventPartitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	batch := func(prefix string, first time.Time, months int) [][]byte {
		items := make([][]byte, 0, ingest.MaxBatch)
		for i := range ingest.MaxBatch {
			items = append(items, raw(t, ev(fmt.Sprintf("%s%d", prefix, i), first.AddDate(0, i%months, 0))))
		}
		return items
	}
	began := time.Now()
	_, err = svc.Ingest(ctx, ingest.Caller{Credential: "c"}, batch("m", time.Date(1900, 1, 15, 0, 0, 0, 0, time.UTC), ingest.MaxBatch))
	if !errors.Is(err, ingest.ErrTooManyMonths) || errors.Is(err, store.ErrUnavailable) ||
		!strings.Contains(err.Error(), "timestamp") || !strings.Contains(err.Error(), fmt.Sprint(pgstore.MaxPartitionsPerBatch)) {
		t.Errorf("1000 new months in one batch: %v; want ingest.ErrTooManyMonths naming the timestamp and the bound %d, not unavailable", err, pgstore.MaxPartitionsPerBatch)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("the refusal took %v: the DDL is not bounded", d)
	}
	after, err := db.EventPartitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("the refused batch made %d partitions, want none", len(after)-len(before))
	}
	res, err := svc.Ingest(ctx, ingest.Caller{Credential: "c"}, batch("ok", time.Date(1950, 1, 15, 0, 0, 0, 0, time.UTC), pgstore.MaxPartitionsPerBatch))
	if err != nil || res.Accepted != ingest.MaxBatch {
		t.Errorf("a batch of %d new months: %+v, %v; want every event stored", pgstore.MaxPartitionsPerBatch, res, err)
	}
}

// "bounds exactly YYYY-MM-01 00:00:00+00 whatever the server's TimeZone":
// and whatever its DateStyle. The partitions' bounds are read back from
// pg_get_expr's text, which follows the session's DateStyle; with a
// server (postgresql.conf) or a URL at SQL, German or Postgres, every
// batch failed (500) with "bound '01.12.2026 00:00:00 UTC' is not a
// timestamp with an offset". pgstore's sessions print ISO, keeping the
// given field order.
func TestPartitionsWhateverTheDateStyle(t *testing.T) {
	ctx := context.Background()
	for _, style := range []string{"German", "SQL, DMY", "Postgres, MDY", "ISO, DMY"} {
		t.Run(style, func(t *testing.T) {
			u := pgtest.PartitionedURL(t) + "&datestyle=" + strings.ReplaceAll(strings.ReplaceAll(style, ",", "%2C"), " ", "%20") + newYork
			db := pgtest.Open(t, u, pgstore.Options{})
			svc, err := ingest.New(db.Ingest(), ingest.Options{})
			if err != nil {
				t.Fatal(err)
			}
			res, err := svc.Ingest(ctx, ingest.Caller{Credential: "c"}, [][]byte{raw(t, ev("ds", time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)))})
			if err != nil || res.Accepted != 1 {
				t.Errorf("ingest: %+v, %v; want stored", res, err)
			}
			parts, err := db.EventPartitions(ctx)
			if err != nil || !slices.ContainsFunc(parts, func(p pgstore.Partition) bool {
				return p.Name == "events_2024_03" && p.From.Equal(time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC))
			}) {
				t.Errorf("EventPartitions: %+v, %v; want events_2024_03 from 2024-03-01", parts, err)
			}
		})
	}
}

// "bounded DDL": MakePartitions (a bulk load's, before COPY) over 1000
// months made them in one transaction, which ran out of the server's lock
// table ("out of shared memory") and made none. It makes them
// MaxPartitionsPerBatch per transaction: every month gets one.
func TestMakePartitionsOfManyMonths(t *testing.T) {
	if testing.Short() {
		t.Skip("makes 1000 partitions (about 20 s)")
	}
	ctx := context.Background()
	u := pgtest.PartitionedURL(t)
	db := pgtest.Open(t, u, pgstore.Options{})
	from := time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
	made, err := db.MakePartitions(ctx, from, from.AddDate(0, 999, 0))
	t.Cleanup(func() {
		// before pgtest's DROP SCHEMA, which 1000 tables at once would
		// run out of the lock table too
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		for chunk := range slices.Chunk(made, 50) {
			for i := range chunk {
				chunk[i] = pgx.Identifier{chunk[i]}.Sanitize()
			}
			if _, err := conn.Exec(ctx, `DROP TABLE `+strings.Join(chunk, ", ")); err != nil {
				t.Fatal(err)
			}
		}
	})
	if err != nil || len(made) != 1000 || made[0] != "events_1900_01" || made[999] != "events_1983_04" {
		n := len(made)
		t.Errorf("MakePartitions of 1000 months: %d made (%v … ), %v; want events_1900_01 to events_1983_04", n, made[:min(n, 2)], err)
	}
}

// Reading the partitions waits for no lock: pg_get_expr of a bound with
// the partition's oid opened each partition (ACCESS SHARE), so with a lock
// on events held elsewhere (an operator's ALTER TABLE, a migration) the
// read of the partitions (at each replica's first batch, after a missing
// month, and in tallyd's hourly KeepPartitionsAhead) queued behind it,
// holding a connection of the pool with no lock_timeout.
func TestListingPartitionsTakesNoLock(t *testing.T) {
	ctx := context.Background()
	u := pgtest.PartitionedURL(t)
	db := pgtest.Open(t, u, pgstore.Options{})
	holder, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE events IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if parts, err := db.EventPartitions(rctx); err != nil || len(parts) == 0 {
		t.Errorf("EventPartitions with events locked elsewhere: %d partitions, %v; want them at once", len(parts), err)
	}
}

// TestPartitionOfYear0AfterJanuaryOfYear1: January of year 1 starts at
// Go's zero time, which the cache of partitions also used to read as a
// lower bound of MINVALUE, so with events_0001_01 made, a batch with an
// event of December of year 0 (0000-12-31T23:30Z, which the API accepts)
// found its month "held", made no partition and was refused, twice, with
// "no partition of relation" ("an event is never refused for its month").
func TestPartitionOfYear0AfterJanuaryOfYear1(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Open(t, pgtest.PartitionedURL(t), pgstore.Options{})
	jan1 := ev("jan1", time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC))
	dec0 := ev("dec0", time.Date(0, 12, 31, 23, 30, 0, 0, time.UTC))
	for _, b := range [][]event.Event{{jan1}, {dec0}} {
		res, err := db.Ingest().Commit(ctx, ingest.Batch{Events: b})
		if err != nil {
			t.Fatalf("commit %s: %v", b[0].EventID, err)
		}
		if !res.Inserted[0] {
			t.Errorf("%s not inserted", b[0].EventID)
		}
	}
}
