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

// Histories implements [usage.Store]: the resources in chunks of
// historiesChunk, each one statement that lists the chunk's keys (through
// idx_events_resource, or idx_events_project for a project) and reads
// their events ordered by the events index by resource, row by row, one
// history held at a time. A statement stays short, so no statement
// timeout ends a large query; the as-of bound makes every chunk read the
// same stored set.
func (s *Ingest) Histories(ctx context.Context, q usage.HistoryQuery, fn func(usage.History) error) error {
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
		n    int
		emit = func() error {
			slices.SortFunc(cur.Events, func(a, b event.Event) int { return projection.Compare(&a, &b) })
			n++
			return fn(cur)
		}
	)
	for rows.Next() {
		var r eventRow
		if err := rows.StructScan(&r); err != nil {
			return n, cur.Key, fmt.Errorf("pgstore: read histories: %w", interpretError(err))
		}
		k := projection.Key{Cloud: r.Cloud, ResourceType: r.ResourceType, ResourceID: r.ResourceID}
		if len(cur.Events) > 0 && k != cur.Key {
			if err := emit(); err != nil {
				return n, cur.Key, err
			}
			cur = usage.History{}
		}
		cur.Key = k
		e := event.Event{
			EventID: r.EventID, Timestamp: r.Timestamp.UTC(), EventType: r.EventType, Platform: r.Platform, Cloud: r.Cloud,
			ResourceType: r.ResourceType, ResourceID: r.ResourceID, ProjectID: r.ProjectID, Source: event.Source(r.Source),
		}
		if err := e.Payload.UnmarshalJSON(r.Payload); err != nil {
			return n, cur.Key, fmt.Errorf("pgstore: read histories: payload of %q: %w", r.EventID, err)
		}
		cur.Events = append(cur.Events, e)
	}
	if err := rows.Err(); err != nil {
		return n, cur.Key, fmt.Errorf("pgstore: read histories: %w", interpretError(err))
	}
	if len(cur.Events) > 0 {
		return n, cur.Key, emit()
	}
	return n, cur.Key, nil
}

// historiesQuery is the SELECT of one chunk of [Ingest.Histories]: the
// first chunk keys q selects (in key order through idx_events_resource, or
// through idx_events_project for a project), then each key's events by a
// lateral lookup in idx_events_resource, so that a chunk costs its own
// resources' events, never a scan of the table.
func historiesQuery(q usage.HistoryQuery, chunk int) (string, []any) {
	var args []any
	arg := func(v any) string { args = append(args, v); return "$" + strconv.Itoa(len(args)) }
	bounds := []string{"true"}
	if !q.Latest {
		bounds[0] = asOfCond(q.AsOf, arg)
	}
	if !q.Before.IsZero() {
		bounds = append(bounds, "timestamp < "+arg(utcMicro(q.Before)))
	}
	sel := append([]string(nil), bounds...)
	for _, f := range []struct{ col, v string }{
		{"cloud", q.Cloud}, {"resource_type", q.ResourceType}, {"resource_id", q.ResourceID},
		{"project_id", q.ProjectID}, {"platform", q.Platform},
	} {
		if f.v != "" {
			sel = append(sel, f.col+" = "+arg(f.v))
		}
	}
	if q.After != nil {
		sel = append(sel, "(cloud, resource_type, resource_id) > ("+arg(q.After.Cloud)+", "+arg(q.After.ResourceType)+", "+arg(q.After.ResourceID)+")")
	}
	each := append([]string{"e.cloud = k.cloud", "e.resource_type = k.resource_type", "e.resource_id = k.resource_id"}, bounds...)
	return `
SELECT e.event_id, e.timestamp, e.event_type, e.platform, e.cloud, e.resource_type, e.resource_id,
       e.project_id, e.source, e.payload::text AS payload
FROM (SELECT DISTINCT cloud, resource_type, resource_id FROM events` + where(sel) + `
      ORDER BY cloud, resource_type, resource_id LIMIT ` + arg(chunk) + `) k
CROSS JOIN LATERAL (SELECT * FROM events e` + where(each) + `) e
ORDER BY k.cloud, k.resource_type, k.resource_id, e.timestamp`, args
}
