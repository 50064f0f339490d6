package pgstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/internal/page"
)

var _ projection.Store = (*Projection)(nil)

func splitKeys(keys []projection.Key) (clouds, types, ids []string) {
	clouds = make([]string, len(keys))
	types = make([]string, len(keys))
	ids = make([]string, len(keys))
	for i, k := range keys {
		clouds[i], types[i], ids[i] = k.Cloud, k.ResourceType, k.ResourceID
	}
	return clouds, types, ids
}

// resourceRow is a current_resources row as sqlx scans it.
type resourceRow struct {
	Cloud         string         `db:"cloud"`
	ResourceType  string         `db:"resource_type"`
	ResourceID    string         `db:"resource_id"`
	Platform      string         `db:"platform"`
	ProjectID     string         `db:"project_id"`
	State         string         `db:"state"`
	Size          sql.NullString `db:"size"`
	CreatedAt     sql.NullTime   `db:"created_at"`
	DeletedAt     sql.NullTime   `db:"deleted_at"`
	FirstEventAt  time.Time      `db:"first_event_at"`
	LastEventAt   time.Time      `db:"last_event_at"`
	LastEventType string         `db:"last_event_type"`
	LastEventID   string         `db:"last_event_id"`
}

const resourceColumns = `cloud, resource_type, resource_id, platform, project_id, state, size::text AS size,
created_at, deleted_at, first_event_at, last_event_at, last_event_type, last_event_id`

func nullTime(t sql.NullTime) *time.Time {
	if !t.Valid {
		return nil
	}
	u := t.Time.UTC()
	return &u
}

func (r *resourceRow) resource() projection.Resource {
	out := projection.Resource{
		Key:      projection.Key{Cloud: r.Cloud, ResourceType: r.ResourceType, ResourceID: r.ResourceID},
		Platform: r.Platform, ProjectID: r.ProjectID, State: r.State,
		CreatedAt: nullTime(r.CreatedAt), DeletedAt: nullTime(r.DeletedAt),
		FirstEventAt: r.FirstEventAt.UTC(), LastEventAt: r.LastEventAt.UTC(),
		LastEventType: r.LastEventType, LastEventID: r.LastEventID,
	}
	if r.Size.Valid {
		out.Size = jsontext.Value(r.Size.String)
	}
	return out
}

// history returns every stored event of one resource, in fold order
// (projection.Compare), reading through q (the ingest transaction, which sees
// its own inserts).
func history(ctx context.Context, q querier, k projection.Key) ([]event.Event, error) {
	out, err := selectEvents(ctx, q, k)
	if err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	slices.SortStableFunc(out, func(a, b event.Event) int { return projection.Compare(&a, &b) })
	return out, nil
}

// List implements [projection.Store].
func (s *Projection) List(ctx context.Context, q projection.Query) ([]projection.Resource, error) {
	query, args := resourcesQuery(q)
	// Rows are read one at a time, so a page stops at the byte budget
	// (page.ByteBudget) without holding the rows past it.
	rows, err := s.db.QueryxContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list resources: %w", interpretError(err))
	}
	defer rows.Close()
	var (
		out    []projection.Resource
		budget = page.NewByteBudget(q.MaxBytes)
	)
	for rows.Next() {
		var r resourceRow
		if err := rows.StructScan(&r); err != nil {
			return nil, fmt.Errorf("pgstore: list resources: %w", interpretError(err))
		}
		out = append(out, r.resource())
		if budget.Add(out[len(out)-1].Bytes()) {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: list resources: %w", interpretError(err))
	}
	return out, nil
}

// Count implements [projection.Store]: the rows by (platform, cloud,
// resource_type, state), in that order, byte by byte; one GROUP BY.
func (s *Projection) Count(ctx context.Context) ([]projection.Count, error) {
	var rows []struct {
		Platform     string `db:"platform"`
		Cloud        string `db:"cloud"`
		ResourceType string `db:"resource_type"`
		State        string `db:"state"`
		Count        int64  `db:"count"`
	}
	err := s.db.SelectContext(ctx, &rows, `SELECT platform, cloud, resource_type, state, count(*) AS count
FROM current_resources
GROUP BY platform, cloud, resource_type, state
ORDER BY platform COLLATE "C", cloud COLLATE "C", resource_type COLLATE "C", state COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("pgstore: count resources: %w", interpretError(err))
	}
	out := make([]projection.Count, len(rows))
	for i, r := range rows {
		out[i] = projection.Count{Platform: r.Platform, Cloud: r.Cloud, ResourceType: r.ResourceType, State: r.State, N: r.Count}
	}
	return out, nil
}

// Get implements [projection.Store]; the error wraps store.ErrNotFound
// when there is no such row.
func (s *Projection) Get(ctx context.Context, k projection.Key) (projection.Resource, error) {
	var row resourceRow
	err := s.db.GetContext(ctx, &row, `SELECT `+resourceColumns+` FROM current_resources
WHERE cloud = $1 AND resource_type = $2 AND resource_id = $3`, k.Cloud, k.ResourceType, k.ResourceID)
	if err != nil {
		return projection.Resource{}, fmt.Errorf("pgstore: get resource: %w", interpretError(err))
	}
	return row.resource(), nil
}

// History implements [projection.Store]: the stored events of one
// resource in fold order.
func (s *Projection) History(ctx context.Context, k projection.Key) ([]event.Event, error) {
	h, err := history(ctx, s.db, k)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", interpretError(err))
	}
	return h, nil
}

// Rebuild implements [projection.Store], q.BatchSize resources per
// transaction. Each transaction
// row-locks its resources in key order before reading their events, as a
// Commit's upsert does, so a rebuild may run beside live ingestion.
func (s *Projection) Rebuild(ctx context.Context, q projection.RebuildQuery, progress func(done int)) (int, error) {
	size := q.BatchSize
	if size <= 0 {
		size = 500
	}
	done := 0
	var after *projection.Key
	for {
		keys, err := s.rebuildKeys(ctx, q, after, size)
		if err != nil {
			return done, err
		}
		if len(keys) == 0 {
			return done, nil
		}
		err = rebuildBatch(ctx, s.conn, keys)
		if err != nil {
			return done, fmt.Errorf("pgstore: rebuild resources: %w", err)
		}
		done += len(keys)
		if progress != nil {
			progress(done)
		}
		last := keys[len(keys)-1]
		after = &last
	}
}

// rebuildKeys lists the next keys after after (at most limit, in key
// order) that have stored events or a checkpoint (a resource whose every
// event retention dropped keeps its row through its checkpoint).
func (s *Projection) rebuildKeys(ctx context.Context, q projection.RebuildQuery, after *projection.Key, limit int) ([]projection.Key, error) {
	var rows []struct {
		Cloud        string `db:"cloud"`
		ResourceType string `db:"resource_type"`
		ResourceID   string `db:"resource_id"`
	}
	afterC, afterT, afterI := "", "", ""
	hasAfter := after != nil
	if hasAfter {
		afterC, afterT, afterI = after.Cloud, after.ResourceType, after.ResourceID
	}
	err := s.db.SelectContext(ctx, &rows, `
SELECT cloud, resource_type, resource_id FROM (
    (SELECT DISTINCT cloud, resource_type, resource_id FROM events
     WHERE ($1 = '' OR cloud = $1) AND ($2 = '' OR resource_type = $2)
       AND (NOT $3 OR (cloud, resource_type, resource_id) > ($4, $5, $6))
     ORDER BY cloud, resource_type, resource_id LIMIT $7)
    UNION
    (SELECT cloud, resource_type, resource_id FROM resource_checkpoints
     WHERE ($1 = '' OR cloud = $1) AND ($2 = '' OR resource_type = $2)
       AND (NOT $3 OR (cloud, resource_type, resource_id) > ($4, $5, $6))
     ORDER BY cloud, resource_type, resource_id LIMIT $7)
) k
ORDER BY cloud, resource_type, resource_id
LIMIT $7`, q.Cloud, q.ResourceType, hasAfter, afterC, afterT, afterI, limit)
	if err != nil {
		return nil, fmt.Errorf("pgstore: rebuild resources: list keys: %w", interpretError(err))
	}
	keys := make([]projection.Key, len(rows))
	for i, r := range rows {
		keys[i] = projection.Key{Cloud: r.Cloud, ResourceType: r.ResourceType, ResourceID: r.ResourceID}
	}
	return keys, nil
}

// resourcesQuery is the SELECT of [Projection.List] for q, with its
// arguments.
func resourcesQuery(q projection.Query) (string, []any) {
	var (
		where []string
		args  []any
	)
	arg := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	for _, f := range []struct{ col, v string }{
		{"cloud", q.Cloud}, {"platform", q.Platform}, {"resource_type", q.ResourceType},
		{"project_id", q.ProjectID}, {"state", q.State},
	} {
		if f.v != "" {
			where = append(where, f.col+" = "+arg(f.v))
		}
	}
	switch q.Status {
	case projection.StatusActive:
		where = append(where, "state <> "+arg(projection.StateDeleted))
	case projection.StatusDeleted:
		where = append(where, "state = "+arg(projection.StateDeleted))
	}
	if !q.AliveAt.IsZero() {
		at := arg(q.AliveAt)
		where = append(where, "COALESCE(created_at, first_event_at) <= "+at+" AND (deleted_at IS NULL OR deleted_at > "+at+")")
	}
	if q.After != nil {
		where = append(where, "(cloud, resource_type, resource_id) > ("+arg(q.After.Cloud)+", "+arg(q.After.ResourceType)+", "+arg(q.After.ResourceID)+")")
	}
	query := `SELECT ` + resourceColumns + ` FROM current_resources`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY cloud, resource_type, resource_id LIMIT " + arg(max(q.Limit, 1))
	return query, args
}
