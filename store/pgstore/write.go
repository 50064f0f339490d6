package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
)

// The write path of Commit (the performance rules), on pgx directly:
//
//  1. A duplicate probe on a sample of the batch's keys; the full probe only
//     when the sample finds a stored event, or when the store's previous
//     batch met one (duplicates come in runs: a collector re-sending).
//  2. A binary COPY of the new events into events, in (timestamp, event_id)
//     order. A unique violation after the sample probe (a stored event the
//     sample missed) redoes the batch with the full probe; one after the
//     full probe (an event stored meanwhile by a concurrent batch) redoes
//     it with INSERT … ON CONFLICT DO NOTHING RETURNING instead of the
//     probe and the COPY. A batch that started with the full probe goes
//     straight to the latter.
//  3. The new events folded in Go per resource, from the empty row, into one
//     delta row per resource (projection.Apply in projection.Compare order).
//  4. One merge-upsert of the delta rows into current_resources, in key
//     order, whose CASE rules combine each delta with the stored row, guarded
//     by stored.last_event_at < the delta's oldest new event. It returns the
//     keys it wrote; the others are the ones the guard refused, which the
//     statement has row-locked.
//  5. Those keys only (about 1 % of a batch) are read back: the ones whose
//     new events all sort after the stored row are applied incrementally,
//     the others (late events) replay the resource's history; one plain
//     upsert writes them.
//
// No advisory lock: two batches touching one resource are serialised by the
// row lock of the upsert (taken in key order, so they never deadlock), and
// the later one's guard sees the earlier one's committed row. The guard
// compares timestamps only, so a delta whose oldest event has the stored
// row's timestamp goes through step 5 too, which then decides exactly as
// projection.FoldBatch does.

// sampleSize is how many of a batch's keys the duplicate probe looks up
// before deciding whether the full probe is needed.
const sampleSize = 16

// insertMode is how commitOnce finds and inserts a batch's new events.
type insertMode int

const (
	sampleProbe insertMode = iota // sample probe (full when it finds one), then COPY
	fullProbe                     // full probe, then COPY
	onConflict                    // INSERT … ON CONFLICT DO NOTHING RETURNING, no probe
)

// commitBatch is Ingest.Commit's transaction. It starts with the sample
// probe unless the previous batch met stored events, and escalates on a
// unique violation: to the full probe (the sample missed a stored event),
// then to INSERT … ON CONFLICT (a concurrent batch stored one meanwhile),
// which cannot fail so.
func commitBatch(ctx context.Context, c *conn, b ingest.Batch, now time.Time) (res ingest.Committed, err error) {
	mode := sampleProbe
	if c.duplicatesSeen.Load() {
		mode = fullProbe
	}
	for {
		res, err = commitOnce(ctx, c, b, now, mode)
		var pgErr *pgconn.PgError
		if err == nil || mode == onConflict || !errors.As(err, &pgErr) || pgErr.Code != "23505" {
			return res, err
		}
		mode++
	}
}

// resourceOf is what an events row names besides its key: an event with a
// stored key is a duplicate when these agree, a conflict when not
// (event.Collides).
type resourceOf struct {
	platform, cloud, resourceType, resourceID string
}

func resourceOfEvent(e *event.Event) resourceOf {
	return resourceOf{e.Platform, e.Cloud, e.ResourceType, e.ResourceID}
}

// commitOnce runs the transaction, inserting the events as mode says. The
// wait for a connection is bounded by the acquire timeout.
func commitOnce(ctx context.Context, c *conn, b ingest.Batch, now time.Time, mode insertMode) (res ingest.Committed, err error) {
	pc, err := c.acquireConn(ctx)
	if err != nil {
		return res, fmt.Errorf("acquire: %w", err)
	}
	defer pc.Release() // after the rollback below
	tx, err := pc.Begin(ctx)
	if err != nil {
		return res, fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if b.SizeNames != nil {
		if err := replaceSizeNames(ctx, tx, b.SizeNames.Cloud, b.SizeNames.Rows); err != nil {
			return res, err
		}
	}
	inserted := make([]bool, len(b.Events))
	var conflicted []bool
	if len(b.Events) > 0 {
		if conflicted, res.Replays, err = storeEvents(ctx, c, tx, b.Events, b.Checked(), inserted, now, mode); err != nil {
			return res, err
		}
	}
	dls, audit := withConflicts(b, conflicted)
	if err := insertRecords(ctx, tx, dls, audit, now); err != nil {
		return res, err
	}
	res.Inserted, res.Conflicted = inserted, conflicted
	if b.SyncRun != nil {
		if run := b.SyncRun(res); run != nil {
			if res.SyncRunID, err = insertSyncRun(ctx, tx, *run, now); err != nil {
				return res, err
			}
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return res, fmt.Errorf("commit: %w", err)
	}
	return res, nil
}

// storeEvents stores the events of evs whose key is neither stored nor
// held by an earlier event of evs, as mode says, marking each in inserted
// (parallel to evs), and folds them into current_resources. It returns
// which events conflict with their key's holder (nil when none does) and
// the replays by cloud. checked is the batch's Checked: the payloads need
// no second check.
func storeEvents(ctx context.Context, c *conn, tx pgx.Tx, evs []event.Event, checked bool, inserted []bool, now time.Time, mode insertMode) (conflicted []bool, replays map[string]int, err error) {
	// held is the stored events' resources by key, as far as read.
	var held map[eventKey]resourceOf
	if mode != onConflict {
		if held, err = probeEvents(ctx, tx, evs, mode == fullProbe); err != nil {
			return nil, nil, err
		}
		c.duplicatesSeen.Store(len(held) > 0)
	}
	fresh, first := freshEvents(evs, held, inserted)
	fresh = sortedEvents(fresh)
	if mode == onConflict {
		if fresh, held, err = insertFreshOnConflict(ctx, tx, evs, fresh, checked, inserted, now); err != nil {
			return nil, nil, err
		}
	} else if err := copyEvents(ctx, tx, fresh, checked, now); err != nil {
		return nil, nil, err
	}
	conflicted = conflicts(evs, inserted, held, first)
	var stored map[projection.Key]time.Time
	if replays, stored, err = mergeResources(ctx, tx, fresh); err != nil {
		return nil, nil, err
	}
	if err := markLate(ctx, tx, fresh, stored); err != nil {
		return nil, nil, err
	}
	return conflicted, replays, nil
}

// markLate sets late on the events of fresh (in insert order,
// sortedEvents) whose timestamp is before their resource's last_event_at
// when they were stored. Only a stored row can make one late: within the
// batch the insert order (the COPY's, and the feed's seq) is by timestamp,
// so an event never follows a newer one of its own batch; and of the
// stored rows only those in stored (the rows the merge could not take as
// is) can be newer than a new event, since the merge took every other
// delta because the row was older than the delta's oldest event. One
// UPDATE, only when an event is late (about 1 % of real traffic).
func markLate(ctx context.Context, tx pgx.Tx, fresh []*event.Event, stored map[projection.Key]time.Time) error {
	if len(stored) == 0 {
		return nil
	}
	var ids []string
	var stamps []time.Time
	for _, e := range fresh {
		last, ok := stored[projection.KeyOf(e)]
		if !ok {
			continue
		}
		if ts := utcMicro(e.Timestamp); ts.Before(last) {
			ids, stamps = append(ids, e.EventID), append(stamps, ts)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	query, args := markLateQuery(ids, stamps)
	if _, err := tx.Exec(ctx, query, args...); err != nil {
		return fmt.Errorf("mark late events: %w", err)
	}
	return nil
}

// markLateQuery is markLate's UPDATE of the events of the keys given as
// two column arrays.
func markLateQuery(ids []string, stamps []time.Time) (string, []any) {
	return `UPDATE events SET late = true
WHERE (event_id, timestamp) IN (SELECT * FROM unnest($1::text[], $2::timestamptz[]))` + withinMonths("timestamp", stamps), []any{ids, stamps}
}

// withinMonths is the condition " AND col >= 'from' AND col < 'to'",
// its bounds literals: the start of the UTC month of the earliest of
// stamps and that of the month after the latest's (stamps is not empty).
// A lookup by the keys of stamps finds the same rows with it. The planner
// prunes partitions by literal bounds of the partition key when it plans,
// so the plan holds, and each execution sets up and locks, only the
// partitions of those months; without it the plan holds every partition
// (pruning by the keys' own timestamps happens only as it runs), and its
// cost grows with the partitions kept
// (TestKeyLookupsReadOnlyTheBatchMonths). The text changes only from one
// span of months to another, so pgx's statement cache holds few of them.
func withinMonths(col string, stamps []time.Time) string {
	lo, hi := stamps[0], stamps[0]
	for _, t := range stamps[1:] {
		if t.Before(lo) {
			lo = t
		}
		if t.After(hi) {
			hi = t
		}
	}
	return fmt.Sprintf(" AND %s >= '%s' AND %s < '%s'", col, boundLiteral(monthOf(lo)), col, boundLiteral(monthOf(hi).AddDate(0, 1, 0)))
}

// freshEvents returns the events of evs to insert: the first of each key
// not in held, each marked in inserted (parallel to evs). first is the index
// in evs of each key's first event, held or not.
func freshEvents(evs []event.Event, held map[eventKey]resourceOf, inserted []bool) (fresh []*event.Event, first map[eventKey]int) {
	fresh = make([]*event.Event, 0, len(evs))
	first = make(map[eventKey]int, len(evs))
	for i := range evs {
		k := eventKey{evs[i].EventID, utcMicro(evs[i].Timestamp).UnixMicro()}
		if _, ok := held[k]; ok {
			continue
		}
		if _, ok := first[k]; ok {
			continue
		}
		first[k] = i
		inserted[i] = true
		fresh = append(fresh, &evs[i])
	}
	return fresh, first
}

// insertFreshOnConflict inserts fresh (events of evs) with INSERT … ON
// CONFLICT DO NOTHING, unmarks in inserted those it skipped, and returns
// the events it kept and the stored resources of the skipped events' keys.
func insertFreshOnConflict(ctx context.Context, tx pgx.Tx, evs []event.Event, fresh []*event.Event, checked bool, inserted []bool, now time.Time) (kept []*event.Event, held map[eventKey]resourceOf, err error) {
	if kept, err = insertEventsOnConflict(ctx, tx, fresh, checked, now); err != nil {
		return nil, nil, err
	}
	isKept := make(map[*event.Event]bool, len(kept))
	for _, e := range kept {
		isKept[e] = true
	}
	var skipped []*event.Event
	for i := range evs {
		if inserted[i] && !isKept[&evs[i]] {
			inserted[i] = false
			skipped = append(skipped, &evs[i])
		}
	}
	// A skipped key is held by a transaction that has committed meanwhile
	// (ON CONFLICT waited for it): this statement sees its row.
	if held, err = storedResources(ctx, tx, skipped); err != nil {
		return nil, nil, err
	}
	return kept, held, nil
}

// conflicts returns, parallel to evs, which events not stored conflict with
// their key's holder (the stored event in held, else the batch's first of
// the key): they name another resource (ingest.Collides). Every other event
// not stored is a duplicate. It returns nil when none conflicts.
func conflicts(evs []event.Event, inserted []bool, held map[eventKey]resourceOf, first map[eventKey]int) []bool {
	var conflicted []bool
	for i := range evs {
		if inserted[i] {
			continue
		}
		e := &evs[i]
		k := eventKey{e.EventID, utcMicro(e.Timestamp).UnixMicro()}
		h, ok := held[k]
		if !ok {
			j, in := first[k]
			if !in || !inserted[j] {
				continue // its holder went away meanwhile: nothing to conflict with
			}
			h = resourceOfEvent(&evs[j])
		}
		if h != resourceOfEvent(e) {
			if conflicted == nil {
				conflicted = make([]bool, len(evs))
			}
			conflicted[i] = true
		}
	}
	return conflicted
}

// withConflicts returns b's dead letters and audit entries, followed by
// those b.Conflicts gives for each conflicted event; b's own slices are
// not changed.
func withConflicts(b ingest.Batch, conflicted []bool) ([]ingest.DeadLetter, []ingest.AuditEntry) {
	dls, audit := b.DeadLetters, b.Audit
	if conflicted == nil || b.Conflicts == nil {
		return dls, audit
	}
	dls, audit = slices.Clone(dls), slices.Clone(audit)
	for i, c := range conflicted {
		if c {
			dls = append(dls, b.Conflicts[i].DeadLetter)
			audit = append(audit, b.Conflicts[i].Audit)
		}
	}
	return dls, audit
}

// insertRecords inserts the dead letters, then the audit entries, each
// only when there is one.
func insertRecords(ctx context.Context, tx pgx.Tx, dls []ingest.DeadLetter, audit []ingest.AuditEntry, now time.Time) error {
	if len(dls) > 0 {
		if err := insertDeadLetters(ctx, tx, dls, now); err != nil {
			return err
		}
	}
	if len(audit) > 0 {
		if err := insertAudit(ctx, tx, audit, now); err != nil {
			return err
		}
	}
	return nil
}

// probeQuery reads the stored events of the keys of evs, with the
// resource each names: one lookup by primary key per key. The lookup is a
// LATERAL subquery with LIMIT 1 (a key names at most one event) so that
// the planner cannot flatten it into a join: as a join, with the
// statistics of a month that grew since it was last analyzed (a new
// partition, a burst of ingest), it hashed every event of the months of
// the batch, a cost that grew with the month (4 ms per probe at 40,000
// events, TestProbeLooksUpEachKey).
func probeQuery(evs []*event.Event) (string, []any) {
	ids, stamps := make([]string, len(evs)), make([]time.Time, len(evs))
	for j, e := range evs {
		ids[j], stamps[j] = e.EventID, utcMicro(e.Timestamp)
	}
	return `SELECT e.event_id, e.timestamp, e.platform, e.cloud, e.resource_type, e.resource_id
FROM unnest($1::text[], $2::timestamptz[]) AS u(event_id, ts)
CROSS JOIN LATERAL (SELECT event_id, timestamp, platform, cloud, resource_type, resource_id FROM events
    WHERE event_id = u.event_id AND timestamp = u.ts` + withinMonths("timestamp", stamps) + ` LIMIT 1) e`, []any{ids, stamps}
}

// storedResources reads the resource each stored event of evs' keys names.
func storedResources(ctx context.Context, tx pgx.Tx, evs []*event.Event) (map[eventKey]resourceOf, error) {
	found := make(map[eventKey]resourceOf)
	if len(evs) == 0 {
		return found, nil
	}
	query, args := probeQuery(evs)
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("probe events: %w", err)
	}
	var (
		id string
		ts time.Time
		r  resourceOf
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &ts, &r.platform, &r.cloud, &r.resourceType, &r.resourceID}, func() error {
		found[eventKey{id, ts.UnixMicro()}] = r
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("probe events: %w", err)
	}
	return found, nil
}

// probeEvents returns the stored events among evs' keys, with the resource
// each names (empty when none is stored). Unless full, it first looks up
// sampleSize keys spread over the batch and returns "none" when none of
// them is stored; the COPY that follows fails on a unique violation if that
// guess was wrong, and the batch is redone with the full probe
// (commitBatch).
func probeEvents(ctx context.Context, tx pgx.Tx, evs []event.Event, full bool) (map[eventKey]resourceOf, error) {
	idx := make([]*event.Event, 0, len(evs))
	if full || len(evs) <= sampleSize {
		for i := range evs {
			idx = append(idx, &evs[i])
		}
	} else {
		step := len(evs) / sampleSize
		for i := 0; i < len(evs); i += step {
			idx = append(idx, &evs[i])
		}
	}
	found, err := storedResources(ctx, tx, idx)
	if err != nil || len(found) == 0 || full || len(evs) <= sampleSize {
		return found, err
	}
	return probeEvents(ctx, tx, evs, true)
}

// copyEvents inserts evs, in insert order (sortedEvents) so that
// concurrent batches wait on each other's keys in one order, with one
// binary COPY (copyEventRows).
func copyEvents(ctx context.Context, tx pgx.Tx, evs []*event.Event, checked bool, receivedAt time.Time) error {
	if len(evs) == 0 {
		return nil
	}
	stream, err := copyEventRows(evs, checked, receivedAt)
	if err != nil {
		return err
	}
	if err := copyStream(ctx, tx, stream); err != nil {
		return fmt.Errorf("insert events: %w", err)
	}
	return nil
}

// insertEventsOnConflict inserts evs (no two with one key, in insert
// order: sortedEvents), skipping those stored already (waiting for a
// concurrent transaction that holds one), and returns the ones it stored,
// in the order of evs.
func insertEventsOnConflict(ctx context.Context, tx pgx.Tx, evs []*event.Event, checked bool, receivedAt time.Time) ([]*event.Event, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	rows, err := eventRows(evs, checked, receivedAt)
	if err != nil {
		return nil, err
	}
	ids, stamps := make([]string, len(rows)), make([]time.Time, len(rows))
	strs := func(c int) []string {
		out := make([]string, len(rows))
		for i := range rows {
			out[i] = rows[i][c].(string)
		}
		return out
	}
	for i := range rows {
		ids[i], stamps[i] = rows[i][0].(string), rows[i][1].(time.Time)
	}
	res, err := tx.Query(ctx, `
INSERT INTO events (event_id, timestamp, event_type, platform, cloud, resource_type,
                    resource_id, project_id, source, payload, category, received_at)
SELECT u.event_id, u.ts, u.event_type, u.platform, u.cloud, u.resource_type,
       u.resource_id, u.project_id, u.source, u.payload::json, u.category, $12
FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[],
            $7::text[], $8::text[], $9::text[], $10::text[], $11::text[]) WITH ORDINALITY
     AS u(event_id, ts, event_type, platform, cloud, resource_type,
          resource_id, project_id, source, payload, category, ord)
ORDER BY u.ord
ON CONFLICT (event_id, timestamp) DO NOTHING
RETURNING event_id, timestamp`,
		ids, stamps, strs(2), strs(3), strs(4), strs(5), strs(6), strs(7), strs(8), strs(9), strs(10), receivedAt)
	if err != nil {
		return nil, fmt.Errorf("insert events: %w", err)
	}
	got := make(map[eventKey]bool, len(rows))
	var (
		id string
		ts time.Time
	)
	if _, err := pgx.ForEachRow(res, []any{&id, &ts}, func() error {
		got[eventKey{id, ts.UnixMicro()}] = true
		return nil
	}); err != nil {
		return nil, fmt.Errorf("insert events: %w", err)
	}
	out := make([]*event.Event, 0, len(got))
	for _, e := range evs {
		if got[eventKey{e.EventID, utcMicro(e.Timestamp).UnixMicro()}] {
			out = append(out, e)
		}
	}
	return out, nil
}

// sortedEvents is a copy of evs in insert order: by (timestamp as stored,
// to the microsecond, event_id). It is a total order of the events' keys,
// so concurrent batches with overlapping events take their keys' locks in
// one order and never deadlock; and it is the feed's order within a batch
// (seq follows the COPY's rows), so a batch carrying several events of one
// resource feeds them oldest first and marks none of them late against
// another event of the same batch (memstore's feedOrder is the same order).
// Each event's microseconds are computed once, not at every comparison.
func sortedEvents(evs []*event.Event) []*event.Event {
	type keyed struct {
		us int64
		e  *event.Event
	}
	ks := make([]keyed, len(evs))
	for i, e := range evs {
		ks[i] = keyed{pgMicros(e.Timestamp), e}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		return cmp.Or(cmp.Compare(a.us, b.us), strings.Compare(a.e.EventID, b.e.EventID))
	})
	sorted := make([]*event.Event, len(ks))
	for i := range ks {
		sorted[i] = ks[i].e
	}
	return sorted
}

// eventRows are the events rows of evs (in insert order, sortedEvents),
// in the order of copyEventsSQL's columns.
func eventRows(evs []*event.Event, checked bool, receivedAt time.Time) ([][]any, error) {
	rows := make([][]any, len(evs))
	for i, e := range evs {
		payload, err := appendPayload(nil, &e.Payload, checked)
		if err != nil {
			return nil, fmt.Errorf("encode payload of event %q: %w", e.EventID, err)
		}
		rows[i] = []any{e.EventID, utcMicro(e.Timestamp), e.EventType, e.Platform, e.Cloud, e.ResourceType,
			e.ResourceID, e.ProjectID, string(e.Source), string(payload), string(event.Categorize(e.EventType)), receivedAt}
	}
	return rows, nil
}

// delta is the fold of one resource's new events from the empty row.
type delta struct {
	row    projection.Resource
	oldest *event.Event
	events []*event.Event // in projection.Compare order
	// odd marks a history the CASE rules do not cover (an update without a
	// state, a create without a size object: never valid events, but a Go
	// caller may commit them); it goes through step 5.
	odd bool
}

// deltas folds evs per resource, in key order.
func deltas(evs []*event.Event) []delta {
	sorted := slices.Clone(evs)
	slices.SortFunc(sorted, func(a, b *event.Event) int { return projection.CompareKeyed(a, b) })
	var out []delta
	for _, e := range sorted {
		if n := len(out); n == 0 || out[n-1].row.Key != projection.KeyOf(e) {
			out = append(out, delta{oldest: e})
		}
		d := &out[len(out)-1]
		switch event.Categorize(e.EventType) {
		case event.CategoryCreate:
			d.odd = d.odd || e.Payload.Size.Kind() != '{' || e.Payload.State.Missing()
		case event.CategoryUpdate:
			d.odd = d.odd || e.Payload.State.Missing()
		}
		projection.Apply(&d.row, e)
		d.events = append(d.events, e)
	}
	return out
}

// insertResourcesSQL inserts rows given as the 13 column arrays of
// resourceParams, in the order given (key order: the order of the row locks).
const insertResourcesSQL = `
INSERT INTO current_resources AS cr (cloud, resource_type, resource_id, platform, project_id, state, size,
    created_at, deleted_at, first_event_at, last_event_at, last_event_type, last_event_id)
SELECT c, t, i, p, pr, st, sz::json, ca, da, fa, la, lt, li
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
    $8::timestamptz[], $9::timestamptz[], $10::timestamptz[], $11::timestamptz[], $12::text[], $13::text[])
    WITH ORDINALITY AS u(c, t, i, p, pr, st, sz, ca, da, fa, la, lt, li, ord)
ORDER BY ord`

// insertNewSQL inserts the rows of resources that have none.
const insertNewSQL = insertResourcesSQL + `
ON CONFLICT (cloud, resource_type, resource_id) DO NOTHING
RETURNING cloud, resource_type, resource_id`

// upsertSQL replaces rows (step 5 and rebuilds, which hold their locks).
const upsertSQL = insertResourcesSQL + `
ON CONFLICT (cloud, resource_type, resource_id) DO UPDATE SET
    platform = EXCLUDED.platform, project_id = EXCLUDED.project_id, state = EXCLUDED.state,
    size = EXCLUDED.size, created_at = EXCLUDED.created_at, deleted_at = EXCLUDED.deleted_at,
    first_event_at = EXCLUDED.first_event_at, last_event_at = EXCLUDED.last_event_at,
    last_event_type = EXCLUDED.last_event_type, last_event_id = EXCLUDED.last_event_id`

// lockKeysSQL row-locks the rows of the keys given as three column arrays,
// in key order, inserting a placeholder where there is none yet (which the
// same transaction then replaces): a rebuild holds its resources the way a
// Commit does, so the two serialise on the rows.
const lockKeysSQL = `
INSERT INTO current_resources AS cr (cloud, resource_type, resource_id, platform, project_id, state,
    first_event_at, last_event_at, last_event_type, last_event_id)
SELECT c, t, i, '', '', '', '-infinity', '-infinity', '', ''
FROM unnest($1::text[], $2::text[], $3::text[]) AS u(c, t, i)
ORDER BY c, t, i
ON CONFLICT (cloud, resource_type, resource_id) DO UPDATE SET cloud = cr.cloud`

// rebuildBatch recomputes the rows of keys from their stored events with
// projection.Fold, in one transaction holding their row locks (on a connection
// taken within the acquire timeout).
func rebuildBatch(ctx context.Context, c *conn, keys []projection.Key) error {
	pc, err := c.acquireConn(ctx)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	defer pc.Release()
	return pgx.BeginFunc(ctx, pc, func(tx pgx.Tx) error {
		clouds, types, ids := splitKeys(keys)
		if _, err := tx.Exec(ctx, lockKeysSQL, clouds, types, ids); err != nil {
			return fmt.Errorf("lock resources: %w", err)
		}
		hs, err := historiesTx(ctx, tx, keys)
		if err != nil {
			return err
		}
		rows := make([]projection.Resource, 0, len(keys))
		var gone []projection.Key
		for _, k := range keys {
			if !hs.has(k) {
				gone = append(gone, k)
				continue
			}
			rows = append(rows, hs.fold(k))
		}
		slices.SortFunc(rows, func(a, b projection.Resource) int { return a.Key.Compare(b.Key) })
		if err := execParams(ctx, tx, upsertSQL, resourceParams(rows), nil); err != nil {
			return fmt.Errorf("upsert resources: %w", err)
		}
		if len(gone) > 0 { // no events: no row (the placeholder goes)
			c, t, i := splitKeys(gone)
			if _, err := tx.Exec(ctx, `DELETE FROM current_resources WHERE (cloud, resource_type, resource_id) IN
(SELECT * FROM unnest($1::text[], $2::text[], $3::text[]))`, c, t, i); err != nil {
				return fmt.Errorf("rebuild resources: %w", err)
			}
		}
		return nil
	})
}

// mergeSQL combines each delta row with the stored one (README, The
// projection): a delta holding a create replaces the row (a create resets
// everything but first_event_at); otherwise created_at stays, deleted_at is
// the delta's delete or the stored one, a deleted row keeps its state
// "deleted" and its size (only a create revives), and a live row takes the
// delta's state and, when the delta carried one, its size. Platform,
// project_id and the last event are the delta's newest event's. The guard
// refuses a delta whose oldest event is not strictly newer than the stored
// row's last.
const mergeSQL = insertResourcesSQL + `
ON CONFLICT (cloud, resource_type, resource_id) DO UPDATE SET
    platform = EXCLUDED.platform,
    project_id = EXCLUDED.project_id,
    state = CASE WHEN EXCLUDED.created_at IS NULL AND cr.deleted_at IS NOT NULL THEN 'deleted' ELSE EXCLUDED.state END,
    size = CASE WHEN EXCLUDED.created_at IS NOT NULL THEN EXCLUDED.size
                WHEN cr.deleted_at IS NOT NULL OR EXCLUDED.size IS NULL THEN cr.size
                ELSE EXCLUDED.size END,
    created_at = COALESCE(EXCLUDED.created_at, cr.created_at),
    deleted_at = CASE WHEN EXCLUDED.created_at IS NOT NULL THEN EXCLUDED.deleted_at
                      ELSE COALESCE(EXCLUDED.deleted_at, cr.deleted_at) END,
    last_event_at = EXCLUDED.last_event_at,
    last_event_type = EXCLUDED.last_event_type,
    last_event_id = EXCLUDED.last_event_id
WHERE cr.last_event_at < EXCLUDED.first_event_at
RETURNING cloud, resource_type, resource_id`

// mergeResources folds the newly stored events into current_resources
// (steps 3 to 5) and returns the replays by cloud and the last_event_at of
// the stored rows step 5 read (the rows the merge could not take as is).
func mergeResources(ctx context.Context, tx pgx.Tx, evs []*event.Event) (map[string]int, map[projection.Key]time.Time, error) {
	if len(evs) == 0 {
		return nil, nil, nil
	}
	ds := deltas(evs)
	var merge, odd []projection.Resource
	for i := range ds {
		r := ds[i].row
		r.FirstEventAt = ds[i].oldest.Timestamp
		if ds[i].odd {
			odd = append(odd, r)
		} else {
			merge = append(merge, r)
		}
	}
	written := make(map[projection.Key]bool, len(ds))
	write := func(query string, rs []projection.Resource) error {
		if len(rs) == 0 {
			return nil
		}
		err := execParams(ctx, tx, query, resourceParams(rs), func(cols [][]byte) error {
			written[projection.Key{Cloud: string(cols[0]), ResourceType: string(cols[1]), ResourceID: string(cols[2])}] = true
			return nil
		})
		if err != nil {
			return fmt.Errorf("merge resources: %w", err)
		}
		return nil
	}
	// An odd delta is the row of a resource that has none yet (the fold of
	// its only events); for a stored one it goes through step 5.
	if err := write(insertNewSQL, odd); err != nil {
		return nil, nil, err
	}
	if err := write(mergeSQL, merge); err != nil {
		return nil, nil, err
	}
	var rest []*delta
	for i := range ds {
		if !written[ds[i].row.Key] {
			rest = append(rest, &ds[i])
		}
	}
	if len(rest) == 0 {
		return nil, nil, nil
	}
	return settle(ctx, tx, rest)
}

// settle is step 5: the deltas the guard refused (or that were odd), against
// the stored rows, which the merge has locked (odd ones are locked here).
func settle(ctx context.Context, tx pgx.Tx, rest []*delta) (map[string]int, map[projection.Key]time.Time, error) {
	keys := make([]projection.Key, len(rest))
	for i, d := range rest {
		keys[i] = d.row.Key
	}
	clouds, types, ids := splitKeys(keys)
	rows, err := tx.Query(ctx, `SELECT `+resourceColumns+` FROM current_resources
WHERE (cloud, resource_type, resource_id) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]))
ORDER BY cloud, resource_type, resource_id FOR UPDATE`, clouds, types, ids)
	if err != nil {
		return nil, nil, fmt.Errorf("load resources: %w", err)
	}
	current := make(map[projection.Key]projection.Resource, len(rest))
	var r resourceRow
	_, err = pgx.ForEachRow(rows, []any{&r.Cloud, &r.ResourceType, &r.ResourceID, &r.Platform, &r.ProjectID, &r.State, &r.Size,
		&r.CreatedAt, &r.DeletedAt, &r.FirstEventAt, &r.LastEventAt, &r.LastEventType, &r.LastEventID}, func() error {
		res := r.resource()
		current[res.Key] = res
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("load resources: %w", err)
	}
	var (
		replays map[string]int
		late    []projection.Key
	)
	out := make([]projection.Resource, 0, len(rest))
	for _, d := range rest {
		row, ok := current[d.row.Key]
		if !ok || row.After(d.oldest) {
			for _, e := range d.events {
				projection.Apply(&row, e)
			}
			out = append(out, row)
			continue
		}
		late = append(late, d.row.Key)
	}
	if len(late) > 0 {
		hs, err := historiesTx(ctx, tx, late)
		if err != nil {
			return nil, nil, err
		}
		replays = make(map[string]int)
		for _, k := range late {
			replays[k.Cloud]++
			out = append(out, hs.fold(k))
		}
	}
	slices.SortFunc(out, func(a, b projection.Resource) int { return a.Key.Compare(b.Key) })
	if err := execParams(ctx, tx, upsertSQL, resourceParams(out), nil); err != nil {
		return nil, nil, fmt.Errorf("upsert resources: %w", err)
	}
	stored := make(map[projection.Key]time.Time, len(current))
	for k, r := range current {
		stored[k] = r.LastEventAt
	}
	return replays, stored, nil
}

// histories is what the fold of each of some resources starts from: the
// checkpoint retention wrote (zero when none) and the stored events from
// its at on, in fold order.
type histories struct {
	start  map[projection.Key]projection.Resource
	events map[projection.Key][]event.Event
}

// has reports whether k has a checkpoint or an event.
func (h histories) has(k projection.Key) bool {
	_, ok := h.start[k]
	return ok || len(h.events[k]) > 0
}

// fold is the row of k: its checkpoint folded with its events.
func (h histories) fold(k projection.Key) projection.Resource {
	return projection.FoldFrom(h.start[k], h.events[k])
}

// historiesTx reads the histories of keys through tx (which sees its own
// inserts): their stored events, then their checkpoints, each in one
// statement, not one per key (the performance rules), keeping the events
// not before their checkpoint's at (a partition retention retired may
// still hold older ones). The events come first: reading them locks every
// partition of events for the rest of tx, so retention's DETACH waits for
// tx, and the checkpoints read after them include every one written
// before a partition could go.
func historiesTx(ctx context.Context, tx pgx.Tx, keys []projection.Key) (histories, error) {
	events, err := eventHistoriesTx(ctx, tx, keys, time.Time{})
	if err != nil {
		return histories{}, err
	}
	start, err := checkpointsTx(ctx, tx, keys)
	if err != nil {
		return histories{}, err
	}
	for k, cp := range start {
		events[k] = slices.DeleteFunc(events[k], func(e event.Event) bool { return e.Timestamp.Before(cp.at) })
	}
	out := histories{start: make(map[projection.Key]projection.Resource, len(start)), events: events}
	for k, cp := range start {
		out.start[k] = cp.Resource
	}
	return out, nil
}

// checkpoint is a row of resource_checkpoints.
type checkpoint struct {
	projection.Resource
	at time.Time
}

// checkpointsTx reads the checkpoints of keys through tx, by key.
func checkpointsTx(ctx context.Context, tx pgx.Tx, keys []projection.Key) (map[projection.Key]checkpoint, error) {
	clouds, types, ids := splitKeys(keys)
	rows, err := tx.Query(ctx, `SELECT `+resourceColumns+`, at FROM resource_checkpoints
WHERE (cloud, resource_type, resource_id) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]))`, clouds, types, ids)
	if err != nil {
		return nil, fmt.Errorf("read checkpoints: %w", err)
	}
	out := make(map[projection.Key]checkpoint)
	var (
		r  resourceRow
		at time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&r.Cloud, &r.ResourceType, &r.ResourceID, &r.Platform, &r.ProjectID, &r.State, &r.Size,
		&r.CreatedAt, &r.DeletedAt, &r.FirstEventAt, &r.LastEventAt, &r.LastEventType, &r.LastEventID, &at}, func() error {
		res := r.resource()
		out[res.Key] = checkpoint{Resource: res, at: at.UTC()}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read checkpoints: %w", err)
	}
	return out, nil
}

// eventHistoriesTx is every stored event of each resource of keys (before
// before, unless it is zero), in fold order, by key (a key without events
// is absent), read through tx in one statement.
func eventHistoriesTx(ctx context.Context, tx pgx.Tx, keys []projection.Key, before time.Time) (map[projection.Key][]event.Event, error) {
	clouds, types, ids := splitKeys(keys)
	var bound any // NULL: no bound
	if !before.IsZero() {
		bound = before
	}
	rows, err := tx.Query(ctx, `SELECT event_id, timestamp, event_type, platform, cloud, resource_type, resource_id,
       project_id, source, payload::text FROM events
WHERE (cloud, resource_type, resource_id) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]))
  AND ($4::timestamptz IS NULL OR timestamp < $4)`, clouds, types, ids, bound)
	if err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	var (
		out     = make(map[projection.Key][]event.Event, len(keys))
		e       event.Event
		source  string
		payload []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&e.EventID, &e.Timestamp, &e.EventType, &e.Platform, &e.Cloud, &e.ResourceType,
		&e.ResourceID, &e.ProjectID, &source, &payload}, func() error {
		x := e
		x.Timestamp = x.Timestamp.UTC()
		x.Source = event.Source(source)
		x.Payload = event.PayloadEnvelope{}
		if err := x.Payload.UnmarshalJSON(jsontext.Value(payload).Clone()); err != nil {
			return fmt.Errorf("payload of %q: %w", x.EventID, err)
		}
		k := projection.KeyOf(&x)
		out[k] = append(out[k], x)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	for _, h := range out {
		// Compare is 0 only for one (event_id, timestamp): the order the
		// rows came in does not matter.
		slices.SortFunc(h, func(a, b event.Event) int { return projection.Compare(&a, &b) })
	}
	return out, nil
}
