package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/internal/page"
)

// storedEventRow is an events row with its received_at, as sqlx scans it.
type storedEventRow struct {
	eventRow
	ReceivedAt time.Time `db:"received_at"`
}

// Events lists stored events (ingest.Store), ordered by (timestamp,
// event_id), event_id compared byte by byte (COLLATE "C", as the in-memory
// store compares), each with its received_at. Every filter combination
// reads an index in that order and stops at the limit, with no sort of the
// matching rows (migration 00011, TestEventListingPlans): project_id or
// event_type leads its own index, a resource filter uses (cloud,
// resource_type, resource_id, timestamp), anything else (time, then
// event_id "C"). Safe for concurrent use.
func (s *Ingest) Events(ctx context.Context, q ingest.EventQuery) ([]ingest.StoredEvent, error) {
	query, args := eventsQuery(q)
	// Rows are read one at a time, so a page stops at the byte budget
	// (page.ByteBudget) without holding the rows past it.
	rows, err := s.db.QueryxContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list events: %w", interpretError(err))
	}
	defer rows.Close()
	var (
		out    []ingest.StoredEvent
		budget = page.NewByteBudget(q.MaxBytes)
	)
	for rows.Next() {
		var r storedEventRow
		if err := rows.StructScan(&r); err != nil {
			return nil, fmt.Errorf("pgstore: list events: %w", interpretError(err))
		}
		e := ingest.StoredEvent{ReceivedAt: r.ReceivedAt.UTC(), Event: event.Event{
			EventID: r.EventID, Timestamp: r.Timestamp.UTC(), EventType: r.EventType,
			Platform: r.Platform, Cloud: r.Cloud, ResourceType: r.ResourceType,
			ResourceID: r.ResourceID, ProjectID: r.ProjectID, Source: event.Source(r.Source),
		}}
		if err := e.Event.Payload.UnmarshalJSON(r.Payload); err != nil {
			return nil, fmt.Errorf("pgstore: list events: payload of %q: %w", r.EventID, err)
		}
		out = append(out, e)
		if budget.Add(ingest.StoredEventBytes(e)) {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: list events: %w", interpretError(err))
	}
	return out, nil
}

// eventsQuery is the SELECT of [Ingest.Events] for q, with its arguments.
func eventsQuery(q ingest.EventQuery) (string, []any) {
	var (
		conds []string
		args  []any
	)
	arg := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	for _, f := range []struct{ col, v string }{
		{"cloud", q.Cloud}, {"platform", q.Platform}, {"project_id", q.ProjectID},
		{"resource_type", q.ResourceType}, {"resource_id", q.ResourceID},
		{"event_type", q.EventType}, {"source", string(q.Source)},
	} {
		if f.v != "" {
			conds = append(conds, f.col+" = "+arg(f.v))
		}
	}
	if !q.From.IsZero() {
		conds = append(conds, "timestamp >= "+arg(utcMicro(q.From)))
	}
	if !q.To.IsZero() {
		conds = append(conds, "timestamp < "+arg(utcMicro(q.To)))
	}
	if q.After != nil {
		at, id := arg(utcMicro(q.After.Timestamp)), arg(q.After.EventID)
		// A row comparison, not the equivalent OR, so the index scan starts
		// at the cursor instead of filtering every row before it; the
		// timestamp bound lets an index that has timestamp but not event_id
		// "C" (idx_events_resource) start there too.
		conds = append(conds, "timestamp >= "+at, "(timestamp, event_id COLLATE \"C\") > ("+at+", "+id+")")
	}
	query := `
SELECT event_id, timestamp, event_type, platform, cloud, resource_type, resource_id,
       project_id, source, payload::text AS payload, received_at
FROM events` + where(conds) + `
ORDER BY timestamp, event_id COLLATE "C"`
	if q.Limit > 0 {
		query += " LIMIT " + arg(q.Limit)
	}
	return query, args
}
