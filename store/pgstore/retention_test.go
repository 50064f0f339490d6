package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/ingest/usage"
	"github.com/tallyhq/tally/internal/feed"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// lifeEvent is an event of resource res of category kind ("create",
// "update", "delete") at ts with state.
func lifeEvent(id, res, kind string, ts time.Time, state string, vcpus int) event.Event {
	e := ev(id, ts)
	e.ResourceID = res
	e.EventType = "compute.instance." + kind + ".end"
	e.Payload = event.PayloadEnvelope{
		State: event.StateOf(state),
		Size:  jsontext.Value(fmt.Sprintf(`{"vcpus":%d,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"}`, vcpus)),
	}
	return e
}

// listAll is every projection row, in key order.
func listAll(t *testing.T, db *pgstore.DB) []projection.Resource {
	t.Helper()
	rows, err := db.Projection().List(context.Background(), projection.Query{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// foldAll is the projection row of each resource of evs, folded in Go
// from its whole history.
func foldAll(evs []event.Event) map[projection.Key]projection.Resource {
	by := map[projection.Key][]event.Event{}
	for _, e := range evs {
		by[projection.KeyOf(&e)] = append(by[projection.KeyOf(&e)], e)
	}
	out := map[projection.Key]projection.Resource{}
	for k, h := range by {
		out[k] = projection.Fold(h)
	}
	return out
}

func byKey(rows []projection.Resource) map[projection.Key]projection.Resource {
	out := map[projection.Key]projection.Resource{}
	for _, r := range rows {
		out[r.Key] = r
	}
	return out
}

// "Retention that keeps history answerable": with a horizon of
// 2026-09-01 (KeepEvents 100 days on 2026-12-15), the partitions of
// January to August 2026 are dropped, after checkpoints of the resources
// with events in them; the projection, and a rebuild after the drop, are
// the rows folding every event gives (resources whose whole history is
// gone included); a late event after the horizon folds from the
// checkpoint as from the whole history; a late event before it is a dead
// letter whose reason names the horizon, on this replica and on one whose
// cache predates the run; no DEFAULT partition appears, and a second run
// drops nothing more.
func TestRetentionKeepsAnswers(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 15, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	u := pgtest.PartitionedURL(t)
	db := pgtest.Open(t, u, pgstore.Options{Now: clock})
	stale := pgtest.Open(t, u, pgstore.Options{Now: clock})
	svc, err := ingest.New(db.Ingest(), ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	staleSvc, err := ingest.New(stale.Ingest(), ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := func(m time.Month, day int) time.Time { return time.Date(2026, m, day, 10, 0, 0, 0, time.UTC) }
	history := []event.Event{
		lifeEvent("a1", "vm-a", "create", d(2, 3), "active", 2), // created, resized, deleted: all before the horizon
		lifeEvent("a2", "vm-a", "update", d(3, 4), "active", 4),
		lifeEvent("a3", "vm-a", "delete", d(4, 5), "deleted", 4),
		lifeEvent("b1", "vm-b", "create", d(1, 6), "active", 2), // created before, updated after
		lifeEvent("b2", "vm-b", "update", d(11, 7), "stopped", 2),
		lifeEvent("c1", "vm-c", "create", d(3, 8), "active", 8),  // only before
		lifeEvent("d1", "vm-d", "create", d(11, 9), "active", 1), // only after
		lifeEvent("e1", "vm-e", "create", d(8, 31), "active", 2), // the last day before the horizon
		lifeEvent("e2", "vm-e", "update", d(9, 1), "stopped", 2),
	}
	var items [][]byte
	for _, e := range history {
		items = append(items, raw(t, e))
	}
	if res, err := svc.Ingest(ctx, ingest.Caller{Credential: "c"}, items); err != nil || res.Accepted != len(history) {
		t.Fatalf("ingest: %+v, %v", res, err)
	}
	// the stale replica reads its cache of partitions and horizon now
	if res, err := staleSvc.Ingest(ctx, ingest.Caller{Credential: "c"}, [][]byte{raw(t, lifeEvent("d2", "vm-d", "update", d(12, 1), "active", 1))}); err != nil || res.Accepted != 1 {
		t.Fatalf("ingest on the stale replica: %+v, %v", res, err)
	}
	history = append(history, lifeEvent("d2", "vm-d", "update", d(12, 1), "active", 1))
	want := foldAll(history)
	if diff := cmp.Diff(want, byKey(listAll(t, db))); diff != "" {
		t.Fatalf("projection before retention (-fold +stored):\n%s", diff)
	}

	res, err := db.Retention(ctx, pgstore.RetentionOptions{KeepEvents: 100 * 24 * time.Hour, BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	horizon := time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
	if !res.Horizon.Equal(horizon) {
		t.Errorf("horizon %v, want %v", res.Horizon, horizon)
	}
	wantDropped := []string{"events_2026_01", "events_2026_02", "events_2026_03", "events_2026_04", "events_2026_08"}
	if diff := cmp.Diff(wantDropped, res.PartitionsDropped); diff != "" {
		t.Errorf("partitions dropped (-want +got):\n%s", diff)
	}
	if res.EventsDropped != 6 || res.Checkpoints != 4 {
		t.Errorf("events dropped %d, checkpoints %d; want 6 and 4 (vm-a, vm-b, vm-c, vm-e)", res.EventsDropped, res.Checkpoints)
	}
	if want := d(9, 1); !res.OldestEvent.Equal(want) {
		t.Errorf("oldest event kept %v, want %v", res.OldestEvent, want)
	}
	if diff := cmp.Diff(want, byKey(listAll(t, db))); diff != "" {
		t.Errorf("projection after the drop (-fold +stored):\n%s", diff)
	}
	if _, err := db.Projection().Rebuild(ctx, projection.RebuildQuery{BatchSize: 2}, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, byKey(listAll(t, db))); diff != "" {
		t.Errorf("projection rebuilt after the drop (-fold of every event +rebuilt):\n%s", diff)
	}

	// A late event after the horizon, before vm-b's November update: the
	// resource replays from its checkpoint.
	late := lifeEvent("b-late", "vm-b", "update", d(10, 2), "paused", 16)
	if r, err := svc.Ingest(ctx, ingest.Caller{Credential: "c"}, [][]byte{raw(t, late)}); err != nil || r.Accepted != 1 {
		t.Fatalf("late event after the horizon: %+v, %v", r, err)
	}
	history = append(history, late)
	want = foldAll(history)
	if diff := cmp.Diff(want, byKey(listAll(t, db))); diff != "" {
		t.Errorf("projection after a late event past the horizon (-fold +stored):\n%s", diff)
	}

	// Late events before the horizon: dead letters naming it, on both
	// replicas (the stale one's insert meets a dropped month and reads the
	// horizon again).
	for name, s := range map[string]*ingest.Service{"this replica": svc, "a stale replica": staleSvc} {
		old := lifeEvent("old-"+strings.ReplaceAll(name, " ", "-"), "vm-b", "update", d(5, 1), "active", 2)
		r, err := s.Ingest(ctx, ingest.Caller{Credential: "c"}, [][]byte{raw(t, old)})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.Accepted != 0 || len(r.Rejected) != 1 || !strings.HasPrefix(r.Rejected[0].Reason, "retention: /timestamp: minimum: ") ||
			!strings.Contains(r.Rejected[0].Reason, "2026-09-01T00:00:00Z") {
			t.Errorf("%s: an event before the horizon: %+v; want one refusal naming the horizon", name, r)
		}
	}
	dls, err := db.Ingest().DeadLetters(ctx, ingest.DeadLetterQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(dls) != 2 || dls[0].Reason != ingest.RetentionReason(horizon) {
		t.Errorf("dead letters %+v; want 2 with the retention reason", dls)
	}
	if diff := cmp.Diff(want, byKey(listAll(t, db))); diff != "" {
		t.Errorf("projection after refused late events (-fold +stored):\n%s", diff)
	}
	if _, hasDefault := partitionBounds(t, u); hasDefault {
		t.Error("a DEFAULT partition exists")
	}
	again, err := db.Retention(ctx, pgstore.RetentionOptions{KeepEvents: 100 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if len(again.PartitionsDropped) != 0 || !again.Horizon.Equal(horizon) {
		t.Errorf("a second run: %+v; want nothing dropped, the same horizon", again)
	}
}

// "every --keep-* purges exactly what it names": rows of each kind, one
// older than its cut-off and one newer; each Keep option deletes the old
// row of its kind only, the others are untouched; a zero Keep keeps all.
func TestRetentionPurgesExactlyWhatItNames(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 15, 12, 0, 0, 0, time.UTC)
	u := pgtest.PartitionedURL(t)
	db := pgtest.Open(t, u, pgstore.Options{Now: func() time.Time { return now }})
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	old, fresh := now.Add(-40*24*time.Hour), now.Add(-time.Hour)
	for i, at := range []time.Time{old, fresh} {
		id := fmt.Sprint(i)
		for _, q := range []string{
			`INSERT INTO dead_letters (raw, raw_size, reason, event_id, received_at) VALUES ('{}', 2, 'schema: x', $1, $2)`,
			`INSERT INTO audit_log (at, action, credential, event_id, platform, cloud) VALUES ($2, 'events.scope_violation', 'c', $1, 'p', 'c')`,
			`INSERT INTO correlated_events (id, organization, category, action, severity, status, created_at, updated_at, deleted_at)
VALUES (('00000000-0000-0000-0000-00000000000' || $1)::uuid, 'o', 'c', 'a', 'informational', 'read', $2, $2, $2)`,
			`INSERT INTO correlated_events (id, organization, category, action, severity, status, created_at, updated_at)
VALUES (('00000000-0000-0000-0000-00000000001' || $1)::uuid, 'o', 'c', 'a', 'informational', 'read', $2, $2)`,
			`INSERT INTO correlated_event_idempotency_keys (organization, user_id, key, event_id, bound_at)
VALUES ('o', 'u', 'k' || $1, ('00000000-0000-0000-0000-00000000001' || $1)::uuid, $2)`,
		} {
			if _, err := conn.Exec(ctx, q, id, at); err != nil {
				t.Fatal(err)
			}
		}
	}
	counts := func() map[string]int {
		out := map[string]int{}
		for _, table := range []string{"dead_letters", "audit_log", "correlated_event_idempotency_keys"} {
			out[table] = count(t, conn, table)
		}
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM correlated_events WHERE deleted_at IS NOT NULL`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out["deleted correlated_events"] = n
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM correlated_events WHERE deleted_at IS NULL`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out["live correlated_events"] = n
		return out
	}
	month := 30 * 24 * time.Hour
	all := map[string]int{"dead_letters": 2, "audit_log": 2, "correlated_event_idempotency_keys": 2, "deleted correlated_events": 2, "live correlated_events": 2}
	steps := []struct {
		name string
		o    pgstore.RetentionOptions
		row  string
		n    func(pgstore.RetentionResult) int64
	}{
		{"nothing", pgstore.RetentionOptions{}, "", nil},
		{"KeepDeadLetters", pgstore.RetentionOptions{KeepDeadLetters: month}, "dead_letters", func(r pgstore.RetentionResult) int64 { return r.DeadLetters }},
		{"KeepAudit", pgstore.RetentionOptions{KeepAudit: month}, "audit_log", func(r pgstore.RetentionResult) int64 { return r.Audit }},
		{"KeepIdempotencyKeys", pgstore.RetentionOptions{KeepIdempotencyKeys: month}, "correlated_event_idempotency_keys", func(r pgstore.RetentionResult) int64 { return r.IdempotencyKeys }},
		{"KeepDeletedEvents", pgstore.RetentionOptions{KeepDeletedEvents: month, BatchSize: 1}, "deleted correlated_events", func(r pgstore.RetentionResult) int64 { return r.DeletedEvents }},
	}
	for _, s := range steps {
		res, err := db.Retention(ctx, s.o)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if s.row != "" {
			all[s.row]--
			if got := s.n(res); got != 1 {
				t.Errorf("%s: deleted %d rows, want 1", s.name, got)
			}
		}
		if diff := cmp.Diff(all, counts()); diff != "" {
			t.Errorf("after %s (-want +got):\n%s", s.name, diff)
		}
	}
	if _, err := db.Retention(ctx, pgstore.RetentionOptions{KeepAudit: -1}); err == nil {
		t.Error("a negative Keep: no error")
	}
}

// A batch with an event before the horizon keeps the rest of what it
// writes: its other events, and the sync run it records (Committed's
// SyncRunID), as a batch without one would.
func TestRetentionExpiredKeepsTheRestOfTheBatch(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 15, 12, 0, 0, 0, time.UTC)
	db := pgtest.Open(t, pgtest.PartitionedURL(t), pgstore.Options{Now: func() time.Time { return now }})
	old := time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC)
	if _, err := db.Ingest().Commit(ctx, ingest.Batch{Events: []event.Event{ev("jan", old)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Retention(ctx, pgstore.RetentionOptions{KeepEvents: 100 * 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	evs := []event.Event{ev("late", old.Add(time.Hour)), ev("fresh", now.Add(-time.Hour))}
	conflicts := make([]ingest.Conflict, len(evs))
	for i, e := range evs {
		conflicts[i] = ingest.Conflict{DeadLetter: ingest.DeadLetter{Raw: []byte("{}"), RawSize: 2, EventID: e.EventID, ReceivedAt: now}}
	}
	run := &ingest.SyncRun{Cloud: "east", Platform: "openstack", ObservedAt: now, StartedAt: now, FinishedAt: now,
		Status: ingest.SyncCompleted, Errors: []string{}}
	var judged ingest.Committed // what the sync run is recorded by
	record := func(c ingest.Committed) *ingest.SyncRun { judged = c; return run }
	res, err := db.Ingest().Commit(ctx, ingest.Batch{Events: evs, Conflicts: conflicts, SyncRun: record})
	if err != nil {
		t.Fatal(err)
	}
	// The run is judged on the whole batch, the expired event too.
	if diff := cmp.Diff(ingest.Committed{Inserted: []bool{false, true}, Expired: []bool{true, false}, Horizon: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)}, judged); diff != "" {
		t.Errorf("SyncRun called with (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ingest.Committed{Inserted: []bool{false, true}, Expired: []bool{true, false}, Horizon: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC),
		SyncRunID: res.SyncRunID}, res); diff != "" || res.SyncRunID == 0 {
		t.Errorf("Commit (-want +got), sync run %d:\n%s", res.SyncRunID, diff)
	}
}

// "History stays answerable" for usage too: after retention dropped the
// months before the horizon, usage, the summary and resources?at= of a
// window after it answer as before the drop: the same query with the same
// as_of gives the same body, a resource untouched since before the horizon
// included (each fold starts from the resource's checkpoint).
func TestRetentionKeepsUsage(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 15, 12, 0, 0, 0, time.UTC)
	u := pgtest.PartitionedURL(t)
	db := pgtest.Open(t, u, pgstore.Options{Now: func() time.Time { return now }})
	svc, err := ingest.New(db.Ingest(), ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := func(m time.Month, day int) time.Time { return time.Date(2026, m, day, 10, 0, 0, 0, time.UTC) }
	var items [][]byte
	for _, e := range []event.Event{
		lifeEvent("a1", "vm-a", "create", d(2, 3), "active", 2), // created and deleted before the horizon
		lifeEvent("a3", "vm-a", "delete", d(4, 5), "deleted", 2),
		lifeEvent("b1", "vm-b", "create", d(1, 6), "active", 2), // created before, resized after
		lifeEvent("b2", "vm-b", "update", d(11, 7), "active", 4),
		lifeEvent("c1", "vm-c", "create", d(3, 8), "active", 8),  // only before: untouched since
		lifeEvent("d1", "vm-d", "create", d(11, 9), "active", 1), // only after
	} {
		items = append(items, raw(t, e))
	}
	if res, err := svc.Ingest(ctx, ingest.Caller{Credential: "c"}, items); err != nil || res.Accepted != len(items) {
		t.Fatalf("ingest: %+v, %v", res, err)
	}
	us, err := usage.New(db.Ingest())
	if err != nil {
		t.Fatal(err)
	}
	q := usage.Query{From: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		Window: usage.WindowMonth, GroupBy: []string{"resource_id"}, Quantity: "size.vcpus", Unit: usage.UnitHour}
	body := func(q usage.Query) (usage.Answer, string) {
		t.Helper()
		a, err := us.Usage(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		return a, string(b)
	}
	var before usage.Answer
	var want string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if before, want = body(q); strings.Contains(want, `"vm-d"`) || time.Now().After(deadline) {
			break // the feed's head covers every event
		}
	}
	// The answers compared must hold what retention could lose: the
	// resources created before the horizon and used after it.
	for _, id := range []string{`"vm-b"`, `"vm-c"`, `"vm-d"`} {
		if !strings.Contains(want, id) {
			t.Fatalf("usage before the drop lacks %s: %s", id, want)
		}
	}
	sq := usage.SummaryQuery{Cloud: "east", ProjectID: "p1", From: q.From, To: q.To}
	sumBefore, err := us.Summary(ctx, sq)
	if err != nil || len(sumBefore.ResourceTypes) != 1 || sumBefore.ResourceTypes[0].ActiveNow != 3 {
		t.Fatalf("summary before the drop: %+v, %v; want vm-b, vm-c and vm-d active", sumBefore, err)
	}
	atBefore, err := us.At(ctx, projection.Filter{Status: projection.StatusAll}, d(10, 1))
	if err != nil || len(atBefore.Items) < 2 {
		t.Fatalf("resources at October 1st before the drop: %+v, %v; want vm-b and vm-c at least", atBefore, err)
	}
	lcBefore, err := us.Lifecycle(ctx, projection.Key{Cloud: "east", ResourceType: "instance", ResourceID: "vm-a"})
	if err != nil || len(lcBefore.Events) != 2 {
		t.Fatalf("lifecycle of vm-a before the drop: %+v, %v", lcBefore, err)
	}
	// "killed mid-run … no double counting in usage": a first run stops
	// after the checkpoints, with January detached and February to April
	// still attached (an operator's view of January makes its DROP fail;
	// a kill -9 stops there as well). The answers, which now meet both a
	// checkpoint and the events before it, are those of before.
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE VIEW january AS SELECT * FROM events_2026_01`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Retention(ctx, pgstore.RetentionOptions{KeepEvents: 100 * 24 * time.Hour}); err == nil {
		t.Fatal("the interrupted run: no error")
	}
	var checkpoints int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM resource_checkpoints`).Scan(&checkpoints); err != nil || checkpoints != 3 {
		t.Fatalf("checkpoints after the interrupted run: %d, %v; want 3 (vm-a, vm-b, vm-c)", checkpoints, err)
	}
	if _, got := body(usage.Query{From: q.From, To: q.To, Window: q.Window, GroupBy: q.GroupBy, Quantity: q.Quantity, Unit: q.Unit, AsOf: before.AsOf}); got != want {
		t.Errorf("usage after the interrupted run:\n%s\nbefore it:\n%s", got, want)
	}
	if sum, err := us.Summary(ctx, sq); err != nil || !cmp.Equal(sumBefore, sum) {
		t.Errorf("summary after the interrupted run (-before +after):\n%s%v", cmp.Diff(sumBefore, sum), err)
	}
	if at, err := us.At(ctx, projection.Filter{Status: projection.StatusAll}, d(10, 1)); err != nil || !cmp.Equal(atBefore, at) {
		t.Errorf("resources at October 1st after the interrupted run (-before +after):\n%s%v", cmp.Diff(atBefore, at), err)
	}
	// A lifecycle shows the events from the checkpoint on: the same as
	// once the partitions are gone (compared below), the row as before.
	lcMid, err := us.Lifecycle(ctx, projection.Key{Cloud: "east", ResourceType: "instance", ResourceID: "vm-a"})
	if err != nil || !cmp.Equal(lcBefore.Resource, lcMid.Resource) {
		t.Errorf("lifecycle of vm-a after the interrupted run: %v; row (-before +after):\n%s", err, cmp.Diff(lcBefore.Resource, lcMid.Resource))
	}
	if _, err := conn.Exec(ctx, `DROP VIEW january`); err != nil {
		t.Fatal(err)
	}
	if res, err := db.Retention(ctx, pgstore.RetentionOptions{KeepEvents: 100 * 24 * time.Hour}); err != nil || res.EventsDropped != 4 || !res.Horizon.Equal(q.From) {
		t.Fatalf("retention: %+v, %v; want the 4 events before May dropped (the months with no event have no partition)", res, err)
	}
	q.AsOf = before.AsOf
	if _, got := body(q); got != want {
		t.Errorf("usage as of %s after the drop:\n%s\nbefore it:\n%s", q.AsOf, got, want)
	}
	// As of the feed's start nothing is stored, checkpoints included.
	n := 0
	if err := db.Ingest().Histories(ctx, usage.HistoryQuery{AsOf: feed.Position{Kind: feed.Start}}, func(usage.History) error { n++; return nil }); err != nil || n != 0 {
		t.Errorf("histories as of the feed's start after the drop: %d, %v; want none", n, err)
	}
	if sum, err := us.Summary(ctx, sq); err != nil || !cmp.Equal(sumBefore, sum) {
		t.Errorf("summary after the drop (-before +after):\n%s%v", cmp.Diff(sumBefore, sum), err)
	}
	if at, err := us.At(ctx, projection.Filter{Status: projection.StatusAll}, d(10, 1)); err != nil || !cmp.Equal(atBefore, at) {
		t.Errorf("resources at October 1st after the drop (-before +after):\n%s%v", cmp.Diff(atBefore, at), err)
	}
	if lc, err := us.Lifecycle(ctx, projection.Key{Cloud: "east", ResourceType: "instance", ResourceID: "vm-a"}); err != nil || !cmp.Equal(lcMid, lc, cmpopts.EquateEmpty()) {
		t.Errorf("lifecycle of vm-a after the drop: %v (-after the interrupted run +after the drop):\n%s", err, cmp.Diff(lcMid, lc, cmpopts.EquateEmpty()))
	}
	// The lifecycle of a resource known only from its checkpoint: its row,
	// no event, and the interval open since the horizon.
	lc, err := us.Lifecycle(ctx, projection.Key{Cloud: "east", ResourceType: "instance", ResourceID: "vm-c"})
	if err != nil || lc.Resource.State != "active" || len(lc.Events) != 0 || len(lc.Intervals) != 1 ||
		!lc.Intervals[0].From.Equal(q.From) || lc.Intervals[0].To != nil || len(lc.Warnings) != 0 {
		t.Errorf("lifecycle of vm-c after the drop: %+v, %v", lc, err)
	}
	// One with events after it: folded on from the checkpoint, no warning.
	lc, err = us.Lifecycle(ctx, projection.Key{Cloud: "east", ResourceType: "instance", ResourceID: "vm-b"})
	if err != nil || len(lc.Events) != 1 || len(lc.Intervals) != 2 || len(lc.Warnings) != 0 || lc.Resource.CreatedAt == nil {
		t.Errorf("lifecycle of vm-b after the drop: %+v, %v", lc, err)
	}
}

// "killed mid-run … rerun must be correct": a run whose DROP TABLE fails
// after the partition's DETACH … CONCURRENTLY completed (here a view
// depends on it; a kill -9 there leaves the same state) left the detached table behind, outside events, which
// no later run saw: its rows stayed on disk, uncounted, for good. The
// rerun drops it and counts its rows once; the answers are unchanged.
func TestRetentionRerunDropsADetachedPartition(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 15, 12, 0, 0, 0, time.UTC)
	u := pgtest.PartitionedURL(t)
	db := pgtest.Open(t, u, pgstore.Options{Now: func() time.Time { return now }})
	svc, err := ingest.New(db.Ingest(), ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	history := []event.Event{
		lifeEvent("a1", "vm-a", "create", time.Date(2026, 2, 3, 0, 0, 0, 0, time.UTC), "active", 2),
		lifeEvent("a2", "vm-a", "update", time.Date(2026, 2, 4, 0, 0, 0, 0, time.UTC), "active", 4),
		lifeEvent("b1", "vm-b", "create", time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC), "active", 2),
	}
	var items [][]byte
	for _, e := range history {
		items = append(items, raw(t, e))
	}
	if res, err := svc.Ingest(ctx, ingest.Caller{Credential: "c"}, items); err != nil || res.Accepted != len(history) {
		t.Fatalf("ingest: %+v, %v", res, err)
	}
	want := foldAll(history)
	holder, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	// An operator's view of the partition makes the DROP fail (2BP01),
	// after the DETACH completed, where a kill -9 would stop too.
	if _, err := holder.Exec(ctx, `CREATE VIEW february AS SELECT * FROM events_2026_02`); err != nil {
		t.Fatal(err)
	}
	keep := pgstore.RetentionOptions{KeepEvents: 100 * 24 * time.Hour}
	if _, err := db.Retention(ctx, keep); err == nil {
		t.Fatal("the first run dropped a partition a view depends on")
	}
	if _, err := holder.Exec(ctx, `DROP VIEW february`); err != nil {
		t.Fatal(err)
	}
	var attached, exists bool
	if err := holder.QueryRow(ctx, `SELECT to_regclass('events_2026_02') IS NOT NULL,
       EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass('events_2026_02'))`).Scan(&exists, &attached); err != nil {
		t.Fatal(err)
	}
	if !exists || attached {
		t.Fatalf("after the failed run: exists %v, attached %v; the test wants the partition detached, not dropped", exists, attached)
	}
	res, err := db.Retention(ctx, keep)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"events_2026_02"}, res.PartitionsDropped); diff != "" || res.EventsDropped != 2 {
		t.Errorf("the rerun dropped %v (%d events); want events_2026_02 (2 events) (-want +got):\n%s", res.PartitionsDropped, res.EventsDropped, diff)
	}
	if err := holder.QueryRow(ctx, `SELECT to_regclass('events_2026_02') IS NOT NULL`).Scan(&exists); err != nil || exists {
		t.Errorf("after the rerun events_2026_02 exists: %v, %v", exists, err)
	}
	st, err := db.EventStorage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.PartitionsDropped != 1 || st.EventsDropped != 2 {
		t.Errorf("storage counters: %+v; want 1 partition and 2 events dropped, counted once", st)
	}
	if _, err := db.Projection().Rebuild(ctx, projection.RebuildQuery{}, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, byKey(listAll(t, db))); diff != "" {
		t.Errorf("projection rebuilt after the rerun (-fold of every event +rebuilt):\n%s", diff)
	}
}

// "a retention run concurrent with … another retention run": two runs at
// once (two cron jobs, two hosts) both succeed, drop each partition once,
// and the counters count each dropped event once.
func TestRetentionConcurrentRuns(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 15, 12, 0, 0, 0, time.UTC)
	u := pgtest.PartitionedURL(t)
	db := pgtest.Open(t, u, pgstore.Options{Now: func() time.Time { return now }})
	other := pgtest.Open(t, u, pgstore.Options{Now: func() time.Time { return now }})
	svc, err := ingest.New(db.Ingest(), ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var items [][]byte
	for m := time.January; m <= time.June; m++ {
		for i := range 3 {
			items = append(items, raw(t, lifeEvent(fmt.Sprintf("e%d-%d", m, i), fmt.Sprintf("vm-%d", i), "update", time.Date(2026, m, 2+i, 0, 0, 0, 0, time.UTC), "active", 2)))
		}
	}
	if res, err := svc.Ingest(ctx, ingest.Caller{Credential: "c"}, items); err != nil || res.Accepted != len(items) {
		t.Fatalf("ingest: %+v, %v", res, err)
	}
	keep := pgstore.RetentionOptions{KeepEvents: 100 * 24 * time.Hour, BatchSize: 1}
	var (
		wg   sync.WaitGroup
		errs [2]error
		res  [2]pgstore.RetentionResult
	)
	for i, d := range []*pgstore.DB{db, other} {
		wg.Go(func() { res[i], errs[i] = d.Retention(ctx, keep) })
	}
	wg.Wait()
	dropped := map[string]int{}
	for i := range 2 {
		if errs[i] != nil {
			t.Errorf("run %d: %v", i, errs[i])
		}
		for _, p := range res[i].PartitionsDropped {
			dropped[p]++
		}
	}
	st, err := db.EventStorage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.PartitionsDropped != 6 || st.EventsDropped != 18 || res[0].EventsDropped+res[1].EventsDropped != 18 {
		t.Errorf("counters %+v, runs' events %d + %d; want 6 partitions and 18 events, once", st, res[0].EventsDropped, res[1].EventsDropped)
	}
	for p, n := range dropped {
		if n != 1 {
			t.Errorf("%s reported dropped by %d runs", p, n)
		}
	}
}
