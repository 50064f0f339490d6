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

// Histories implements [usage.Store]: one query ordered by the events
// index by resource (idx_events_resource), read row by row, one history
// held at a time. A project or platform selects the resources through a
// semi-join on the events that name it (idx_events_project).
func (s *Ingest) Histories(ctx context.Context, q usage.HistoryQuery, fn func(usage.History) error) error {
	query, args := historiesQuery(q)
	rows, err := s.db.QueryxContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("pgstore: read histories: %w", interpretError(err))
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
			return fmt.Errorf("pgstore: read histories: %w", interpretError(err))
		}
		k := projection.Key{Cloud: r.Cloud, ResourceType: r.ResourceType, ResourceID: r.ResourceID}
		if len(cur.Events) > 0 && k != cur.Key {
			if err := emit(); err != nil {
				return err
			}
			if q.Limit > 0 && n >= q.Limit {
				return nil
			}
			cur = usage.History{}
		}
		cur.Key = k
		e := event.Event{
			EventID: r.EventID, Timestamp: r.Timestamp.UTC(), EventType: r.EventType, Platform: r.Platform, Cloud: r.Cloud,
			ResourceType: r.ResourceType, ResourceID: r.ResourceID, ProjectID: r.ProjectID, Source: event.Source(r.Source),
		}
		if err := e.Payload.UnmarshalJSON(r.Payload); err != nil {
			return fmt.Errorf("pgstore: read histories: payload of %q: %w", r.EventID, err)
		}
		cur.Events = append(cur.Events, e)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgstore: read histories: %w", interpretError(err))
	}
	if len(cur.Events) > 0 {
		return emit()
	}
	return nil
}

// historiesQuery is the SELECT of [Ingest.Histories] for q.
func historiesQuery(q usage.HistoryQuery) (string, []any) {
	var args []any
	arg := func(v any) string { args = append(args, v); return "$" + strconv.Itoa(len(args)) }
	bounds := []string{asOfCond(q.AsOf, arg)}
	if !q.Before.IsZero() {
		bounds = append(bounds, "timestamp < "+arg(utcMicro(q.Before)))
	}
	conds := append([]string(nil), bounds...)
	for _, f := range []struct{ col, v string }{{"cloud", q.Cloud}, {"resource_type", q.ResourceType}, {"resource_id", q.ResourceID}} {
		if f.v != "" {
			conds = append(conds, f.col+" = "+arg(f.v))
		}
	}
	if q.After != nil {
		conds = append(conds, "(cloud, resource_type, resource_id) > ("+arg(q.After.Cloud)+", "+arg(q.After.ResourceType)+", "+arg(q.After.ResourceID)+")")
	}
	if q.ProjectID != "" || q.Platform != "" {
		sel := append([]string(nil), bounds...)
		if q.ProjectID != "" {
			sel = append(sel, "project_id = "+arg(q.ProjectID))
		}
		if q.Platform != "" {
			sel = append(sel, "platform = "+arg(q.Platform))
		}
		conds = append(conds, "(cloud, resource_type, resource_id) IN (SELECT cloud, resource_type, resource_id FROM events"+where(sel)+")")
	}
	if q.Limit > 0 {
		// The first Limit keys, so that the read stops there.
		keys := `SELECT DISTINCT cloud, resource_type, resource_id FROM events` + where(conds) +
			` ORDER BY cloud, resource_type, resource_id LIMIT ` + arg(q.Limit)
		conds = append(conds, "(cloud, resource_type, resource_id) IN ("+keys+")")
	}
	return `
SELECT event_id, timestamp, event_type, platform, cloud, resource_type, resource_id,
       project_id, source, payload::text AS payload
FROM events` + where(conds) + `
ORDER BY cloud, resource_type, resource_id, timestamp`, args
}
