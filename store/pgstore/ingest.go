package pgstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/sizenames"
)

var (
	_ ingest.Store    = (*Ingest)(nil)
	_ sizenames.Store = (*SizeNames)(nil)
)

// limitClause returns the LIMIT clause of a listing, numbering its argument
// after args: LIMIT n for n > 0, none otherwise. The bounds of a page
// (1..1000) are the ingest Service's to enforce; it asks the store for one
// row more than the page to learn whether another page follows, and
// memstore reads a Limit of 0 or less as "no limit" too.
func limitClause(limit int, args []any) (string, []any) {
	if limit <= 0 {
		return "", args
	}
	args = append(args, limit)
	return fmt.Sprintf(" LIMIT $%d", len(args)), args
}

// utcMicro is how the store keeps every time: UTC, microseconds (PostgreSQL's
// precision). Truncating here, rather than letting the server round, keeps
// the times the caller gave and the times read back equal. It equals
// t.UTC().Truncate(time.Microsecond) (the nanoseconds of a second are never
// negative, so dropping their last three digits rounds down), at a fraction
// of Truncate's cost, which the write path pays several times an event.
func utcMicro(t time.Time) time.Time {
	t = t.UTC()
	return t.Add(-time.Duration(t.Nanosecond() % 1000))
}

// eventKey identifies an event for the duplicate rule (canonical-event.md,
// Rules: "A duplicate is the same (event_id, timestamp) pair").
type eventKey struct {
	id string
	ts int64 // microseconds since the Unix epoch, UTC
}

const insertDeadLettersSQL = `
INSERT INTO dead_letters (raw, raw_size, reason, event_id, received_at)
SELECT u.raw, u.raw_size, u.reason, u.event_id, u.received_at
FROM unnest($1::bytea[], $2::int[], $3::text[], $4::text[], $5::timestamptz[]) WITH ORDINALITY
     AS u(raw, raw_size, reason, event_id, received_at, ord)
ORDER BY u.ord`

// insertDeadLetters inserts every dead letter in one statement, in the order
// given, so that their ids increase in batch order. A zero ReceivedAt is
// stamped with now.
func insertDeadLetters(ctx context.Context, tx pgx.Tx, dls []ingest.DeadLetter, now time.Time) error {
	n := len(dls)
	raws, sizes := make([][]byte, n), make([]int32, n)
	reasons, ids, ats := make([]string, n), make([]string, n), make([]time.Time, n)
	for i, d := range dls {
		if d.RawSize < 0 || d.RawSize > 1<<31-1 {
			return fmt.Errorf("insert dead letters: raw size %d out of range", d.RawSize)
		}
		raws[i], sizes[i], reasons[i], ids[i] = d.Raw, int32(d.RawSize), d.Reason, d.EventID
		ats[i] = stamp(d.ReceivedAt, now)
	}
	if _, err := tx.Exec(ctx, insertDeadLettersSQL, raws, sizes, reasons, ids, ats); err != nil {
		return fmt.Errorf("insert dead letters: %w", err)
	}
	return nil
}

const insertAuditSQL = `
INSERT INTO audit_log (at, action, credential, event_id, platform, cloud)
SELECT u.at, u.action, u.credential, u.event_id, u.platform, u.cloud
FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) WITH ORDINALITY
     AS u(at, action, credential, event_id, platform, cloud, ord)
ORDER BY u.ord`

// insertAudit inserts every audit row in one statement, in the order given.
// A zero At is stamped with now.
func insertAudit(ctx context.Context, tx pgx.Tx, entries []ingest.AuditEntry, now time.Time) error {
	n := len(entries)
	ats, actions, creds := make([]time.Time, n), make([]string, n), make([]string, n)
	ids, platforms, clouds := make([]string, n), make([]string, n), make([]string, n)
	for i, a := range entries {
		ats[i], actions[i], creds[i] = stamp(a.At, now), a.Action, a.Credential
		ids[i], platforms[i], clouds[i] = a.EventID, a.Platform, a.Cloud
	}
	if _, err := tx.Exec(ctx, insertAuditSQL, ats, actions, creds, ids, platforms, clouds); err != nil {
		return fmt.Errorf("insert audit rows: %w", err)
	}
	return nil
}

// stamp returns t in the store's precision, or now when t is zero.
func stamp(t, now time.Time) time.Time {
	if t.IsZero() {
		return now
	}
	return utcMicro(t)
}

// Commit writes one batch in one transaction (canonical-event.md, Delivery:
// "A batch lands whole or not at all, and a batch of nothing but refused
// items still commits"), on pgx directly, with a fixed number of statements
// whatever the batch's size (see write.go): a duplicate probe on a sample of
// the keys (the full probe only when the sample finds a stored event), one
// binary COPY of the new events, one merge-upsert of one delta row per
// resource into the projection, one statement for the dead letters and one
// for the audit rows; late events add a read of their resource's history.
//
// inserted is parallel to b.Events: true when the event was newly stored,
// false when an event with the same (event_id, timestamp) was stored already
// or came earlier in b.Events (Rules: "A duplicate is the same (event_id,
// timestamp) pair"). When that event names another platform, cloud,
// resource_type or resource_id ([event.Collides]) the event is reported in
// Conflicted instead and entry i of b.Conflicts is written with the batch; this is
// decided on every path of the write (the probe, the COPY and its redo with
// ON CONFLICT, which reads the holder of each key it skipped once the
// concurrent transaction that held it has committed). Timestamps are stored in UTC, truncated to microseconds;
// each event's received_at, and the ReceivedAt of a dead letter or the At of
// an audit row left zero, is the store clock's time ([Options].Now).
//
// Concurrent Commits with overlapping events neither deadlock nor store an
// event twice: the events are copied in (timestamp, event_id) order, so the
// later transaction waits for the earlier one's keys, and its COPY then
// fails on the unique key and the batch is redone once with INSERT … ON
// CONFLICT DO NOTHING RETURNING; the projection rows are upserted in key
// order.
//
// On any error (including a cancelled ctx) the transaction is rolled back and
// nothing of the batch is written; the error is wrapped as "pgstore: commit
// batch: …". Safe for concurrent use.
func (s *Ingest) Commit(ctx context.Context, b ingest.Batch) (ingest.Committed, error) {
	if b.Conflicts != nil && len(b.Conflicts) != len(b.Events) {
		return ingest.Committed{}, fmt.Errorf("pgstore: commit batch: %d conflicts for %d events (nil or parallel)", len(b.Conflicts), len(b.Events))
	}
	res, err := s.commitPartitioned(ctx, microBatch(b))
	if err != nil {
		return ingest.Committed{}, fmt.Errorf("pgstore: commit batch: %w", interpretError(err))
	}
	return res, nil
}

// microBatch is b with every event's timestamp as the store keeps it
// (utcMicro), in a copy of b.Events when one is not (a Go caller's
// nanoseconds or zone; the pipeline's events are kept so already): the
// fold of the new events (deltas, settle) compares and orders them by
// projection.Compare, which a nanosecond below the stored microsecond
// would otherwise turn (an event of the stored row's microsecond applied
// after it instead of replaying the history, two of one microsecond
// folded in the other order), as memstore, which folds the kept times,
// does not.
func microBatch(b ingest.Batch) ingest.Batch {
	for i := range b.Events {
		if t := b.Events[i].Timestamp; t != utcMicro(t) {
			evs := slices.Clone(b.Events)
			for j := i; j < len(evs); j++ {
				evs[j].Timestamp = utcMicro(evs[j].Timestamp)
			}
			b.Events = evs
			return b
		}
	}
	return b
}

// commitPartitioned is commitBatch on a partitioned events table: the
// events before the retention horizon are refused (expire), the
// partitions of the other events' months are made first when the cache of
// partitions has none, and a batch that still meets a month without one
// (dropped or made elsewhere since the cache was read) or a partition
// retention retired is retried once with the partitions and the horizon
// read again. So an event is never refused for its month, and an event
// before the horizon is never stored (docs/operations.md, Retention).
func (s *Ingest) commitPartitioned(ctx context.Context, b ingest.Batch) (ingest.Committed, error) {
	res, err := s.commitKept(ctx, b, false)
	if !noPartition(err) {
		return res, err
	}
	return s.commitKept(ctx, b, true)
}

// commitKept commits the events of b at or after the retention horizon
// (read again with refresh) and writes a dead letter for each other.
func (s *Ingest) commitKept(ctx context.Context, b ingest.Batch, refresh bool) (ingest.Committed, error) {
	horizon, err := s.cachedHorizon(ctx, refresh)
	if err != nil {
		return ingest.Committed{}, err
	}
	kept, expired := expire(b, horizon)
	if err := s.ensureMonths(ctx, eventMonths(kept.Events), refresh); err != nil {
		return ingest.Committed{}, err
	}
	res, err := commitBatch(ctx, s.conn, kept, utcMicro(s.now()))
	if err != nil || expired == nil {
		return res, err
	}
	return spread(res, expired, horizon), nil
}

// expire splits b at horizon: the batch of its events at or after it, and
// which of b's events are before it (nil when none is). Each of those
// becomes the dead letter of its Conflicts entry with the reason
// ingest.RetentionReason, added to the batch's dead letters.
func expire(b ingest.Batch, horizon time.Time) (ingest.Batch, []bool) {
	if horizon.IsZero() || b.Conflicts == nil {
		return b, nil
	}
	var expired []bool
	for i := range b.Events {
		if b.Events[i].Timestamp.Before(horizon) {
			if expired == nil {
				expired = make([]bool, len(b.Events))
			}
			expired[i] = true
		}
	}
	if expired == nil {
		return b, nil
	}
	kept := b // the rest of the batch (size names) as it is
	kept.Events, kept.Conflicts, kept.DeadLetters = nil, nil, slices.Clone(b.DeadLetters)
	if run := b.SyncRun; run != nil {
		// The run is judged on the whole batch, the expired events too.
		kept.SyncRun = func(c ingest.Committed) *ingest.SyncRun { return run(spread(c, expired, horizon)) }
	}
	reason := ingest.RetentionReason(horizon)
	for i, x := range expired {
		if x {
			dl := b.Conflicts[i].DeadLetter
			dl.Reason = reason
			kept.DeadLetters = append(kept.DeadLetters, dl)
			continue
		}
		kept.Events = append(kept.Events, b.Events[i])
		kept.Conflicts = append(kept.Conflicts, b.Conflicts[i])
	}
	return kept, expired
}

// spread maps res, Commit's answer for the kept events, back onto the
// whole batch that expired is parallel to.
func spread(res ingest.Committed, expired []bool, horizon time.Time) ingest.Committed {
	out := res // Replays, SyncRunID and what else is not per event
	out.Inserted, out.Expired, out.Horizon, out.Conflicted = make([]bool, len(expired)), expired, horizon, nil
	if res.Conflicted != nil {
		out.Conflicted = make([]bool, len(expired))
	}
	j := 0
	for i, x := range expired {
		if x {
			continue
		}
		out.Inserted[i] = res.Inserted[j]
		if res.Conflicted != nil {
			out.Conflicted[i] = res.Conflicted[j]
		}
		j++
	}
	return out
}

// eventRow is an events row as sqlx scans it.
type eventRow struct {
	EventID      string    `db:"event_id"`
	Timestamp    time.Time `db:"timestamp"`
	EventType    string    `db:"event_type"`
	Platform     string    `db:"platform"`
	Cloud        string    `db:"cloud"`
	ResourceType string    `db:"resource_type"`
	ResourceID   string    `db:"resource_id"`
	ProjectID    string    `db:"project_id"`
	Source       string    `db:"source"`
	Payload      []byte    `db:"payload"`
}

// selectEvents lists the stored events of one resource, ordered by
// (timestamp, event_id), through q (a transaction or the pool). Each event
// is returned as stored: Source the pipeline that ingested it, Timestamp in
// UTC with microsecond precision, and the payload exactly as Commit encoded
// it (the column is json, which keeps the text), so it re-encodes to the
// same bytes. It uses the (cloud, resource_type, resource_id, timestamp)
// index. Errors: a stored payload that no longer decodes (only possible if
// the table was written by something else).
func selectEvents(ctx context.Context, db querier, k projection.Key) ([]event.Event, error) {
	conds := []string{"cloud = $1", "resource_type = $2", "resource_id = $3"}
	args := []any{k.Cloud, k.ResourceType, k.ResourceID}
	var rows []eventRow
	err := db.SelectContext(ctx, &rows, `
SELECT event_id, timestamp, event_type, platform, cloud, resource_type, resource_id,
       project_id, source, payload::text AS payload
FROM events`+where(conds)+`
ORDER BY timestamp, event_id`, args...)
	if err != nil {
		return nil, interpretError(err)
	}
	out := make([]event.Event, len(rows))
	for i, r := range rows {
		out[i] = event.Event{
			EventID: r.EventID, Timestamp: r.Timestamp.UTC(), EventType: r.EventType,
			Platform: r.Platform, Cloud: r.Cloud, ResourceType: r.ResourceType,
			ResourceID: r.ResourceID, ProjectID: r.ProjectID, Source: event.Source(r.Source),
		}
		if err := out[i].Payload.UnmarshalJSON(r.Payload); err != nil {
			return nil, fmt.Errorf("payload of %q: %w", r.EventID, err)
		}
	}
	return out, nil
}

// SizeNames returns the size-name rows of one (cloud, resourceType)
// (canonical-event.md, Size names), ordered by member then value; an empty
// slice when there are none. It implements [ingest.Store]. Safe for
// concurrent use.
func (s *Ingest) SizeNames(ctx context.Context, cloud, resourceType string) ([]sizenames.Row, error) {
	return s.sizeNames(ctx, cloud, resourceType)
}

// SizeNames returns the size-name rows of one (cloud, resourceType), as
// [Ingest.SizeNames] does. It implements [sizenames.Store].
func (s *SizeNames) SizeNames(ctx context.Context, cloud, resourceType string) ([]sizenames.Row, error) {
	return s.sizeNames(ctx, cloud, resourceType)
}

// sizeNames reads on pgx directly, not through sqlx: the pipeline calls
// it once per (cloud, resource_type) and batch (the performance rules).
func (s *conn) sizeNames(ctx context.Context, cloud, resourceType string) ([]sizenames.Row, error) {
	out := []sizenames.Row{}
	var r sizenames.Row
	err := s.forEachRow(ctx, `
SELECT cloud, resource_type, member, value, name
FROM size_names WHERE cloud = $1 AND resource_type = $2
ORDER BY member, value`, []any{cloud, resourceType}, []any{&r.Cloud, &r.ResourceType, &r.Member, &r.Value, &r.Name}, func() error {
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: size names: %w", interpretError(err))
	}
	return out, nil
}

// forEachRow runs query with args on a connection of the pool (taken
// within the acquire timeout), scanning each row into dest and calling fn
// after each (pgx.ForEachRow).
func (s *conn) forEachRow(ctx context.Context, query string, args, dest []any, fn func() error) error {
	pc, err := s.acquireConn(ctx)
	if err != nil {
		return err
	}
	defer pc.Release()
	rows, err := pc.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	_, err = pgx.ForEachRow(rows, dest, fn)
	return err
}

// ReplaceSizeNames replaces every size-name row of cloud by rows, in one
// transaction (canonical-event.md, Size names: "every run of a cloud whose
// adapter lists names replaces that cloud's rows with the list in one
// transaction"): one DELETE of the cloud's rows, one INSERT … SELECT FROM
// unnest(…). Readers see the old set or the new one, never a mix.
//
// Errors: a row whose Cloud is not cloud, or two rows with one primary key
// (cloud, resource_type, member, value), refuse the whole call and change
// nothing. Safe for concurrent use.
func (s *SizeNames) ReplaceSizeNames(ctx context.Context, cloud string, rows []sizenames.Row) error {
	pc, err := s.acquireConn(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: replace size names of cloud %q: %w", cloud, interpretError(err))
	}
	defer pc.Release()
	err = pgx.BeginFunc(ctx, pc, func(tx pgx.Tx) error { return replaceSizeNames(ctx, tx, cloud, rows) })
	if err != nil {
		return fmt.Errorf("pgstore: replace size names of cloud %q: %w", cloud, interpretError(err))
	}
	return nil
}

// replaceSizeNames is ReplaceSizeNames within tx (also Commit's, for a
// sync run's names).
func replaceSizeNames(ctx context.Context, tx pgx.Tx, cloud string, rows []sizenames.Row) error {
	n := len(rows)
	rtypes, members, values, names := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, r := range rows {
		if r.Cloud != cloud {
			return fmt.Errorf("size names of cloud %q: row %d names cloud %q", cloud, i, r.Cloud)
		}
		rtypes[i], members[i], values[i], names[i] = r.ResourceType, r.Member, r.Value, r.Name
	}
	if _, err := tx.Exec(ctx, `DELETE FROM size_names WHERE cloud = $1`, cloud); err != nil {
		return fmt.Errorf("delete size names: %w", err)
	}
	if n == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `
INSERT INTO size_names (cloud, resource_type, member, value, name)
SELECT $1, u.resource_type, u.member, u.value, u.name
FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) AS u(resource_type, member, value, name)`,
		cloud, rtypes, members, values, names); err != nil {
		return fmt.Errorf("insert size names: %w", err)
	}
	return nil
}

// resourceTypeRow is a resource_types row as sqlx scans it.
type resourceTypeRow struct {
	Platform     string    `db:"platform"`
	ResourceType string    `db:"resource_type"`
	SizeSchema   []byte    `db:"size_schema"`
	Version      int64     `db:"version"`
	UpdatedAt    time.Time `db:"updated_at"`
}

func (r resourceTypeRow) resourceType() ingest.ResourceType {
	return ingest.ResourceType{
		Platform:     r.Platform,
		ResourceType: r.ResourceType,
		SizeSchema:   jsontext.Value(r.SizeSchema),
		Version:      r.Version,
		UpdatedAt:    r.UpdatedAt.UTC(),
	}
}

const resourceTypeColumns = `platform, resource_type, size_schema::text AS size_schema, version, updated_at`

// ResourceType returns the size-schema registry row of (platform,
// resourceType) (canonical-event.md, Size schemas), with SizeSchema as the
// exact bytes that were put. Errors: one wrapping store.ErrNotFound when no
// row exists. Safe for concurrent use.
//
// It reads on pgx directly, not through sqlx: the pipeline calls it once
// per pair and batch (the performance rules).
func (s *Ingest) ResourceType(ctx context.Context, platform, resourceType string) (ingest.ResourceType, error) {
	var (
		r     resourceTypeRow
		found bool
	)
	err := s.forEachRow(ctx, `SELECT `+resourceTypeColumns+`
FROM resource_types WHERE platform = $1 AND resource_type = $2`, []any{platform, resourceType},
		[]any{&r.Platform, &r.ResourceType, &r.SizeSchema, &r.Version, &r.UpdatedAt}, func() error {
			found = true
			return nil
		})
	if err == nil && !found {
		err = pgx.ErrNoRows
	}
	if err != nil {
		return ingest.ResourceType{}, fmt.Errorf("pgstore: resource type %s/%s: %w", platform, resourceType, interpretError(err))
	}
	return r.resourceType(), nil
}

// ResourceTypes returns every registry row, ordered by platform then
// resource_type (the five seeded openstack pairs included). Safe for
// concurrent use.
func (s *Ingest) ResourceTypes(ctx context.Context) ([]ingest.ResourceType, error) {
	var rows []resourceTypeRow
	err := s.db.SelectContext(ctx, &rows, `SELECT `+resourceTypeColumns+`
FROM resource_types ORDER BY platform, resource_type`)
	if err != nil {
		return nil, fmt.Errorf("pgstore: resource types: %w", interpretError(err))
	}
	out := make([]ingest.ResourceType, len(rows))
	for i, r := range rows {
		out[i] = r.resourceType()
	}
	return out, nil
}

// PutResourceType inserts or replaces the registry row of (rt.Platform,
// rt.ResourceType) in one upsert and returns it as stored: Version 1 for a
// new row, the previous Version plus one otherwise; UpdatedAt the store
// clock's time, UTC, microseconds. rt.Version and rt.UpdatedAt are ignored.
// The store does not compile the schema (the registry in package ingest
// does); it refuses only text that is not JSON. Safe for concurrent use: two
// puts of one pair are serialised by the row lock, each adding one.
func (s *Ingest) PutResourceType(ctx context.Context, rt ingest.ResourceType) (ingest.ResourceType, error) {
	var r resourceTypeRow
	err := s.db.GetContext(ctx, &r, `
INSERT INTO resource_types (platform, resource_type, size_schema, version, updated_at)
VALUES ($1, $2, $3::text::json, 1, $4)
ON CONFLICT (platform, resource_type) DO UPDATE
SET size_schema = EXCLUDED.size_schema,
    version = resource_types.version + 1,
    updated_at = EXCLUDED.updated_at
RETURNING `+resourceTypeColumns,
		rt.Platform, rt.ResourceType, string(rt.SizeSchema), utcMicro(s.now()))
	if err != nil {
		return ingest.ResourceType{}, fmt.Errorf("pgstore: put resource type %s/%s: %w", rt.Platform, rt.ResourceType, interpretError(err))
	}
	return r.resourceType(), nil
}

// keyset builds the WHERE clause of a listing ordered by (timeCol, id):
// timeCol in [from, to) where set, strictly after the position where set.
// args holds the arguments already bound; the clause numbers its own after
// them.
func keyset(timeCol string, from, to time.Time, after *ingest.Position, conds []string, args []any) ([]string, []any) {
	if !from.IsZero() {
		args = append(args, utcMicro(from))
		conds = append(conds, fmt.Sprintf("%s >= $%d", timeCol, len(args)))
	}
	if !to.IsZero() {
		args = append(args, utcMicro(to))
		conds = append(conds, fmt.Sprintf("%s < $%d", timeCol, len(args)))
	}
	if after != nil {
		args = append(args, utcMicro(after.At), after.ID)
		conds = append(conds, fmt.Sprintf("(%s, id) > ($%d, $%d)", timeCol, len(args)-1, len(args)))
	}
	return conds, args
}

func where(conds []string) string {
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}

// deadLetterRow is a dead_letters row as sqlx scans it.
type deadLetterRow struct {
	ID         int64     `db:"id"`
	UUID       string    `db:"uuid"`
	Raw        []byte    `db:"raw"`
	RawSize    int       `db:"raw_size"`
	Reason     string    `db:"reason"`
	EventID    string    `db:"event_id"`
	ReceivedAt time.Time `db:"received_at"`
}

// DeadLetters lists dead letters received in [q.From, q.To) (a zero end is
// open), oldest first by (ReceivedAt, ID), strictly after q.After when set,
// at most q.Limit when it is positive (no limit otherwise; ingest.Service
// keeps pages to 1..1000 and asks for one row more) (canonical-event.md,
// Delivery: "What was kept is read back"). Raw holds the bytes exactly as
// stored, nil when the item was over the cap. The listing uses the
// (received_at, id) index: paging is a keyset seek, not an offset. Safe for
// concurrent use.
func (s *Ingest) DeadLetters(ctx context.Context, q ingest.DeadLetterQuery) ([]ingest.DeadLetter, error) {
	query, args := deadLettersQuery(q)
	var rows []deadLetterRow
	err := s.db.SelectContext(ctx, &rows, query, args...)
	if err != nil {
		return nil, fmt.Errorf("pgstore: dead letters: %w", interpretError(err))
	}
	out := make([]ingest.DeadLetter, len(rows))
	for i, r := range rows {
		out[i] = ingest.DeadLetter{
			ID: r.ID, UUID: r.UUID, Raw: r.Raw, RawSize: r.RawSize, Reason: r.Reason,
			EventID: r.EventID, ReceivedAt: r.ReceivedAt.UTC(),
		}
	}
	return out, nil
}

// auditRow is an audit_log row as sqlx scans it.
type auditRow struct {
	ID         int64     `db:"id"`
	At         time.Time `db:"at"`
	Action     string    `db:"action"`
	Credential string    `db:"credential"`
	EventID    string    `db:"event_id"`
	Platform   string    `db:"platform"`
	Cloud      string    `db:"cloud"`
}

// Audit lists audit rows with q.Action (every action when ""), at in
// [q.From, q.To) (a zero end is open), oldest first by (At, ID), strictly
// after q.After when set, at most q.Limit when it is positive (no limit
// otherwise, as for DeadLetters). A listing by action uses the (action, at,
// id) index, any other the (at, id) index (migration 00011). Safe for
// concurrent use.
func (s *Ingest) Audit(ctx context.Context, q ingest.AuditQuery) ([]ingest.AuditEntry, error) {
	query, args := auditQuery(q)
	var rows []auditRow
	err := s.db.SelectContext(ctx, &rows, query, args...)
	if err != nil {
		return nil, fmt.Errorf("pgstore: audit: %w", interpretError(err))
	}
	out := make([]ingest.AuditEntry, len(rows))
	for i, r := range rows {
		out[i] = ingest.AuditEntry{
			ID: r.ID, At: r.At.UTC(), Action: r.Action, Credential: r.Credential,
			EventID: r.EventID, Platform: r.Platform, Cloud: r.Cloud,
		}
	}
	return out, nil
}

// deadLettersQuery is the SELECT of [Ingest.DeadLetters] for q, with its
// arguments.
func deadLettersQuery(q ingest.DeadLetterQuery) (string, []any) {
	conds, args := keyset("received_at", q.From, q.To, q.After, nil, nil)
	limit, args := limitClause(q.Limit, args)
	return `
SELECT id, uuid::text AS uuid, raw, raw_size, reason, event_id, received_at FROM dead_letters` + where(conds) + `
ORDER BY received_at, id` + limit, args
}

// auditQuery is the SELECT of [Ingest.Audit] for q, with its arguments.
func auditQuery(q ingest.AuditQuery) (string, []any) {
	var (
		conds []string
		args  []any
	)
	if q.Action != "" {
		args = append(args, q.Action)
		conds = append(conds, "action = $1")
	}
	conds, args = keyset("at", q.From, q.To, q.After, conds, args)
	limit, args := limitClause(q.Limit, args)
	return `
SELECT id, at, action, credential, event_id, platform, cloud FROM audit_log` + where(conds) + `
ORDER BY at, id` + limit, args
}
