package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/ingest/usage"
	"github.com/tallyhq/tally/internal/feed"
)

var _ usage.Store = (*Ingest)(nil)

// Snapshot implements [usage.Store] over the lifecycle feed's positions
// ([Ingest.Feed]): a position after the head (not yet below the
// watermark, so an event could still appear before it) is refused, so an
// answer as of an accepted position never changes.
func (s *Ingest) Snapshot(ctx context.Context, at *ingest.FeedPosition) (usage.Snapshot, error) {
	head, err := s.feedHead(ctx)
	if err != nil {
		return usage.Snapshot{}, err
	}
	p := head.Next
	if at != nil {
		if feed.Compare(*at, head.Next) > 0 {
			return usage.Snapshot{}, fmt.Errorf("pgstore: feed position %+v after the head %+v: %w", *at, head.Next, ingest.ErrFeedPosition)
		}
		p = *at
	}
	out := usage.Snapshot{Position: p}
	var args []any
	arg := func(v any) string { args = append(args, v); return "$" + strconv.Itoa(len(args)) }
	var queries []string
	switch p.Kind {
	case feed.Current:
		queries = append(queries, `SELECT received_at FROM events WHERE tx IS NOT NULL AND (tx, seq) <= (`+
			arg(strconv.FormatUint(p.TX, 10))+`::text::xid8, `+arg(p.Seq)+`::bigint) ORDER BY tx DESC, seq DESC LIMIT 1`,
			`SELECT received_at FROM events WHERE tx IS NULL ORDER BY timestamp DESC, event_id COLLATE "C" DESC LIMIT 1`)
	case feed.Legacy:
		queries = append(queries, `SELECT received_at FROM events WHERE tx IS NULL AND (timestamp, event_id COLLATE "C") <= (`+
			arg(utcMicro(p.Time))+`, `+arg(p.ID)+`) ORDER BY timestamp DESC, event_id COLLATE "C" DESC LIMIT 1`)
	}
	for i, q := range queries {
		var t time.Time
		qargs := args
		if i > 0 {
			qargs = nil
		}
		err := s.db.GetContext(ctx, &t, q, qargs...)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return usage.Snapshot{}, fmt.Errorf("pgstore: resolve a feed position: %w", interpretError(err))
		}
		out.At = t.UTC()
		break
	}
	return out, nil
}

// asOfCond is the condition "stored at or before p in feed order".
func asOfCond(p feed.Position, arg func(any) string) string {
	switch p.Kind {
	case feed.Current:
		return `(tx IS NULL OR (tx, seq) <= (` + arg(strconv.FormatUint(p.TX, 10)) + `::text::xid8, ` + arg(p.Seq) + `::bigint))`
	case feed.Legacy:
		return `(tx IS NULL AND (timestamp, event_id COLLATE "C") <= (` + arg(utcMicro(p.Time)) + `, ` + arg(p.ID) + `))`
	}
	return `false`
}

// historiesChunk is how many resources one statement of
// [Ingest.Histories] reads.
const historiesChunk = 1000

// Histories implements [usage.Store]. A query that selects resources by
// their key only (no project or platform: usage over a cloud, the common
// case) reads the events in key order, scanChunk rows a statement
// (historiesScan). One with a project or platform filter, which
// selects a resource by any of its events, reads in chunks of
// historiesChunk resources, each one statement that lists the chunk's keys
// (through idx_events_project for a project) and reads their events by a
// lookup in idx_events_resource each. Either way the rows are read one at
// a time, at most scanAhead histories held ahead of fn (the key-order
// scan decodes on a goroutine of its own); a statement stays short, so
// no statement timeout ends a large query; the as-of bound makes every
// chunk read the same stored set.
func (s *Ingest) Histories(ctx context.Context, q usage.HistoryQuery, fn func(usage.History) error) error {
	if q.ProjectID == "" && q.Platform == "" {
		return s.historiesScan(ctx, q, fn)
	}
	return s.historiesByResource(ctx, q, fn)
}

// historiesByResource is Histories in chunks of historiesChunk resources.
func (s *Ingest) historiesByResource(ctx context.Context, q usage.HistoryQuery, fn func(usage.History) error) error {
	n := 0
	for {
		chunk := historiesChunk
		if q.Limit > 0 {
			chunk = min(chunk, q.Limit-n)
		}
		got, last, err := s.historiesChunk(ctx, q, chunk, fn)
		n += got
		if err != nil || got < chunk || q.Limit > 0 && n >= q.Limit {
			return err
		}
		q.After = &last
	}
}

// historyRow is one row of historiesQuery: a selected key, its
// checkpoint's columns (all NULL without one) and one event (all NULL for
// a key known only from its checkpoint).
type historyRow struct {
	Cloud        string         `db:"k_cloud"`
	ResourceType string         `db:"k_resource_type"`
	ResourceID   string         `db:"k_resource_id"`
	CheckpointAt sql.NullTime   `db:"cp_at"`
	CPPlatform   sql.NullString `db:"cp_platform"`
	CPProjectID  sql.NullString `db:"cp_project_id"`
	CPState      sql.NullString `db:"cp_state"`
	CPSize       sql.NullString `db:"cp_size"`
	CPCreatedAt  sql.NullTime   `db:"cp_created_at"`
	CPDeletedAt  sql.NullTime   `db:"cp_deleted_at"`
	CPFirstAt    sql.NullTime   `db:"cp_first_event_at"`
	CPLastAt     sql.NullTime   `db:"cp_last_event_at"`
	CPLastType   sql.NullString `db:"cp_last_event_type"`
	CPLastID     sql.NullString `db:"cp_last_event_id"`
	EventID      sql.NullString `db:"event_id"`
	Timestamp    sql.NullTime   `db:"timestamp"`
	EventType    sql.NullString `db:"event_type"`
	Platform     sql.NullString `db:"platform"`
	ProjectID    sql.NullString `db:"project_id"`
	Source       sql.NullString `db:"source"`
	Payload      []byte         `db:"payload"`
}

// start returns the checkpoint of r's key, if it has one.
func (r *historyRow) start() (*projection.Resource, time.Time) {
	if !r.CheckpointAt.Valid {
		return nil, time.Time{}
	}
	cp := resourceRow{
		Cloud: r.Cloud, ResourceType: r.ResourceType, ResourceID: r.ResourceID, Platform: r.CPPlatform.String,
		ProjectID: r.CPProjectID.String, State: r.CPState.String, Size: r.CPSize, CreatedAt: r.CPCreatedAt, DeletedAt: r.CPDeletedAt,
		FirstEventAt: r.CPFirstAt.Time, LastEventAt: r.CPLastAt.Time, LastEventType: r.CPLastType.String, LastEventID: r.CPLastID.String,
	}
	res := cp.resource()
	return &res, r.CheckpointAt.Time.UTC()
}

// historiesChunk reads the histories of at most chunk resources after
// q.After; it returns how many it read and the last key.
func (s *Ingest) historiesChunk(ctx context.Context, q usage.HistoryQuery, chunk int, fn func(usage.History) error) (int, projection.Key, error) {
	query, args := historiesQuery(q, chunk)
	rows, err := s.db.QueryxContext(ctx, query, args...)
	if err != nil {
		return 0, projection.Key{}, fmt.Errorf("pgstore: read histories: %w", interpretError(err))
	}
	defer rows.Close()
	var (
		cur  usage.History
		has  bool
		n    int
		emit = func() error {
			slices.SortFunc(cur.Events, func(a, b event.Event) int { return projection.Compare(&a, &b) })
			n++
			return fn(cur)
		}
	)
	for rows.Next() {
		var r historyRow
		if err := rows.StructScan(&r); err != nil {
			return n, cur.Key, fmt.Errorf("pgstore: read histories: %w", interpretError(err))
		}
		k := projection.Key{Cloud: r.Cloud, ResourceType: r.ResourceType, ResourceID: r.ResourceID}
		if !has || k != cur.Key {
			if has {
				if err := emit(); err != nil {
					return n, cur.Key, err
				}
			}
			cur, has = usage.History{Key: k}, true
			cur.Start, cur.StartAt = r.start()
		}
		if !r.EventID.Valid {
			continue // a key known only from its checkpoint
		}
		e := event.Event{
			EventID: r.EventID.String, Timestamp: r.Timestamp.Time.UTC(), EventType: r.EventType.String, Platform: r.Platform.String,
			Cloud: r.Cloud, ResourceType: r.ResourceType, ResourceID: r.ResourceID, ProjectID: r.ProjectID.String, Source: event.Source(r.Source.String),
		}
		if err := e.Payload.UnmarshalJSON(r.Payload); err != nil {
			return n, cur.Key, fmt.Errorf("pgstore: read histories: payload of %q: %w", e.EventID, err)
		}
		cur.Events = append(cur.Events, e)
	}
	if err := rows.Err(); err != nil {
		return n, cur.Key, fmt.Errorf("pgstore: read histories: %w", interpretError(err))
	}
	if has {
		return n, cur.Key, emit()
	}
	return n, cur.Key, nil
}

// historiesQuery is the SELECT of one chunk of [Ingest.Histories]: the
// first chunk keys q selects, in key order, from the events (through
// idx_events_resource, or idx_events_project for a project) and from the
// checkpoints retention wrote (a resource whose early events it dropped;
// its checkpoint's platform and project select it as an event's would),
// then each key's checkpoint and its events from the checkpoint's at on by
// a lateral lookup in idx_events_resource, so that a chunk costs its own
// resources' events, never a scan of the table. One statement reads both,
// so a retention run between two statements cannot lose the events it
// drops and the checkpoint it writes for them.
func historiesQuery(q usage.HistoryQuery, chunk int) (string, []any) {
	var args []any
	arg := func(v any) string { args = append(args, v); return "$" + strconv.Itoa(len(args)) }
	bounds := []string{asOfCond(q.AsOf, arg)}
	var cpSel []string
	if q.AsOf.Kind == feed.Start {
		cpSel = append(cpSel, "false") // before every event, before every checkpoint
	}
	if !q.Before.IsZero() {
		before := arg(utcMicro(q.Before))
		bounds = append(bounds, "timestamp < "+before)
		cpSel = append(cpSel, "at < "+before)
	}
	sel := append([]string(nil), bounds...)
	for _, f := range []struct{ col, v string }{
		{"cloud", q.Cloud}, {"resource_type", q.ResourceType}, {"resource_id", q.ResourceID},
		{"project_id", q.ProjectID}, {"platform", q.Platform},
	} {
		if f.v != "" {
			cond := f.col + " = " + arg(f.v)
			sel = append(sel, cond)
			cpSel = append(cpSel, cond)
		}
	}
	if q.After != nil {
		cond := afterCond(q, arg) // the cloud's index from the key on, not from its start
		sel = append(sel, cond)
		cpSel = append(cpSel, cond)
	}
	limit := arg(chunk)
	each := append([]string{"e.cloud = k.cloud", "e.resource_type = k.resource_type", "e.resource_id = k.resource_id",
		"(c.at IS NULL OR e.timestamp >= c.at)"}, bounds...)
	return `
SELECT k.cloud AS k_cloud, k.resource_type AS k_resource_type, k.resource_id AS k_resource_id,
       c.at AS cp_at, c.platform AS cp_platform, c.project_id AS cp_project_id, c.state AS cp_state, c.size::text AS cp_size,
       c.created_at AS cp_created_at, c.deleted_at AS cp_deleted_at, c.first_event_at AS cp_first_event_at,
       c.last_event_at AS cp_last_event_at, c.last_event_type AS cp_last_event_type, c.last_event_id AS cp_last_event_id,
       e.event_id, e.timestamp, e.event_type, e.platform, e.project_id, e.source, e.payload::text AS payload
FROM (SELECT cloud, resource_type, resource_id FROM (
        (SELECT DISTINCT cloud, resource_type, resource_id FROM events` + where(sel) + `
         ORDER BY cloud, resource_type, resource_id LIMIT ` + limit + `)
        UNION
        (SELECT cloud, resource_type, resource_id FROM resource_checkpoints` + where(cpSel) + `
         ORDER BY cloud, resource_type, resource_id LIMIT ` + limit + `)
      ) u ORDER BY cloud, resource_type, resource_id LIMIT ` + limit + `) k
LEFT JOIN resource_checkpoints c ON c.cloud = k.cloud AND c.resource_type = k.resource_type AND c.resource_id = k.resource_id
LEFT JOIN LATERAL (SELECT * FROM events e` + where(each) + `) e ON true
ORDER BY k.cloud, k.resource_type, k.resource_id, e.timestamp`, args
}

// Checkpoint implements [usage.Store]: k's row of resource_checkpoints.
func (s *Ingest) Checkpoint(ctx context.Context, k projection.Key) (*projection.Resource, time.Time, error) {
	var r struct {
		resourceRow
		At time.Time `db:"at"`
	}
	err := s.db.GetContext(ctx, &r, `SELECT `+resourceColumns+`, at FROM resource_checkpoints
WHERE cloud = $1 AND resource_type = $2 AND resource_id = $3`, k.Cloud, k.ResourceType, k.ResourceID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, time.Time{}, nil
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("pgstore: read a checkpoint: %w", interpretError(err))
	}
	res := r.resource()
	return &res, r.At.UTC(), nil
}
