package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tallyhq/tally/correlate"
)

var _ correlate.Store = (*Correlate)(nil)

// correlatedColumns are the columns of correlated_events, in the order of the
// INSERT parameters $1 to $27 (see insertArgs).
const correlatedColumns = `id, organization, user_id, owner, system_id, acted_upon, operation_id,
	category, action, severity, status, description, metadata, extra,
	created_at, updated_at, deleted_at, correlation_key, occurrence_count,
	first_seen_at, last_seen_at, resolved_at, source, type, specversion, trace_id, parent_id`

const insertValues = `($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13::json, $14::json,
	$15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27)`

// openPredicate is the predicate of the partial unique index
// correlated_events_open_key (migration 00007): the rows that count as the
// open event of their (organization, user_id, correlation_key). ON CONFLICT
// names it verbatim so that PostgreSQL infers that index.
const openPredicate = `resolved_at IS NULL AND deleted_at IS NULL AND user_id <> '' AND correlation_key IS NOT NULL`

// correlatedRow is one row of correlated_events as sqlx scans it.
type correlatedRow struct {
	ID              string         `db:"id"`
	Organization    string         `db:"organization"`
	UserID          string         `db:"user_id"`
	Owner           string         `db:"owner"`
	SystemID        string         `db:"system_id"`
	ActedUpon       string         `db:"acted_upon"`
	OperationID     string         `db:"operation_id"`
	Category        string         `db:"category"`
	Action          string         `db:"action"`
	Severity        string         `db:"severity"`
	Status          string         `db:"status"`
	Description     string         `db:"description"`
	Metadata        sql.NullString `db:"metadata"`
	Extra           sql.NullString `db:"extra"`
	CreatedAt       time.Time      `db:"created_at"`
	UpdatedAt       time.Time      `db:"updated_at"`
	DeletedAt       sql.NullTime   `db:"deleted_at"`
	CorrelationKey  sql.NullString `db:"correlation_key"`
	OccurrenceCount sql.NullInt64  `db:"occurrence_count"`
	FirstSeenAt     sql.NullTime   `db:"first_seen_at"`
	LastSeenAt      sql.NullTime   `db:"last_seen_at"`
	ResolvedAt      sql.NullTime   `db:"resolved_at"`
	Source          sql.NullString `db:"source"`
	Type            sql.NullString `db:"type"`
	Specversion     sql.NullString `db:"specversion"`
	TraceID         sql.NullString `db:"trace_id"`
	ParentID        sql.NullString `db:"parent_id"`
}

// upsertRow is a correlatedRow with the upsert's (xmax = 0): true when the row
// was inserted, false when an existing row was updated.
type upsertRow struct {
	correlatedRow
	Inserted bool `db:"inserted"`
}

// dest is the scan destinations of r, in the order of correlatedColumns,
// for the create path's pgx scans (no reflection).
func (r *correlatedRow) dest() []any {
	return []any{&r.ID, &r.Organization, &r.UserID, &r.Owner, &r.SystemID, &r.ActedUpon, &r.OperationID,
		&r.Category, &r.Action, &r.Severity, &r.Status, &r.Description, &r.Metadata, &r.Extra,
		&r.CreatedAt, &r.UpdatedAt, &r.DeletedAt, &r.CorrelationKey, &r.OccurrenceCount,
		&r.FirstSeenAt, &r.LastSeenAt, &r.ResolvedAt, &r.Source, &r.Type, &r.Specversion, &r.TraceID, &r.ParentID}
}

func (r correlatedRow) event() (correlate.Event, error) {
	e := correlate.Event{
		ID: r.ID, Organization: r.Organization, User: r.UserID,
		Owner: r.Owner, SystemID: r.SystemID, ActedUpon: r.ActedUpon, OperationID: r.OperationID,
		Category: r.Category, Action: r.Action, Severity: correlate.Severity(r.Severity),
		Status: correlate.Status(r.Status), Description: r.Description,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), DeletedAt: nullTime(r.DeletedAt),
		CorrelationKey: r.CorrelationKey.String,
		FirstSeenAt:    nullTime(r.FirstSeenAt), LastSeenAt: nullTime(r.LastSeenAt), ResolvedAt: nullTime(r.ResolvedAt),
		Source: r.Source.String, Type: r.Type.String, Specversion: r.Specversion.String,
		TraceID: r.TraceID.String, ParentID: r.ParentID.String,
	}
	if r.Metadata.Valid {
		e.Metadata = []byte(r.Metadata.String)
	}
	if r.OccurrenceCount.Valid {
		n := r.OccurrenceCount.Int64
		e.OccurrenceCount = &n
	}
	if r.Extra.Valid {
		extra, err := correlate.DecodeExtra([]byte(r.Extra.String))
		if err != nil {
			return correlate.Event{}, fmt.Errorf("pgstore: decode extra of event %s: %w", r.ID, err)
		}
		e.Extra = extra
	}
	return e, nil
}

// orNull is nil (NULL) for "", else s.
func orNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func insertArgs(e correlate.Event) ([]any, error) {
	var metadata, extra any
	if e.Metadata != nil {
		metadata = string(e.Metadata)
	}
	if len(e.Extra) > 0 {
		b, err := correlate.EncodeExtra(e.Extra)
		if err != nil {
			return nil, fmt.Errorf("pgstore: encode extra: %w", err)
		}
		extra = string(b)
	}
	return []any{
		e.ID, e.Organization, e.User, e.Owner, e.SystemID, e.ActedUpon, e.OperationID,
		e.Category, e.Action, string(e.Severity), string(e.Status), e.Description, metadata, extra,
		e.CreatedAt, e.UpdatedAt, e.DeletedAt, orNull(e.CorrelationKey), e.OccurrenceCount,
		e.FirstSeenAt, e.LastSeenAt, e.ResolvedAt, orNull(e.Source), orNull(e.Type),
		orNull(e.Specversion), orNull(e.TraceID), orNull(e.ParentID),
	}, nil
}

// Create implements [correlate.Store]: the whole create is one
// transaction (or, without an idempotencyKey and for steps 2 and 3, one
// statement). A serialization failure or deadlock (which the statements
// below are not expected to cause) is retried a few times. Like
// Ingest.Commit, the create path runs on pgx directly, on one connection of
// the pool (waiting at most the acquire timeout for it), without
// database/sql or sqlx (issue 14: their per-statement overhead and
// reflective scans were a fifth of tallyd's CPU per create).
func (s *Correlate) Create(ctx context.Context, c correlate.Create) (correlate.Event, correlate.Disposition, error) {
	for attempt := 1; ; attempt++ {
		e, d, err := s.createOnce(ctx, c)
		err = interpretError(err)
		if errors.Is(err, errSerialization) && attempt < 4 {
			continue
		}
		if err != nil {
			return correlate.Event{}, "", fmt.Errorf("pgstore: create event: %w", err)
		}
		return e, d, nil
	}
}

// createOnce applies one planned create on one connection of the pool: as
// one statement when that is atomic on its own, else in a transaction.
func (s *Correlate) createOnce(ctx context.Context, c correlate.Create) (e correlate.Event, d correlate.Disposition, err error) {
	pc, err := s.acquireConn(ctx)
	if err != nil {
		return correlate.Event{}, "", fmt.Errorf("acquire: %w", err)
	}
	defer pc.Release()
	if c.IdempotencyKey == "" && c.Step != correlate.StepResolution {
		// One statement, atomic on its own: no transaction round trips.
		return createIn(ctx, pc, c)
	}
	err = pgx.BeginFunc(ctx, pc, func(tx pgx.Tx) error {
		var err error
		e, d, err = createIn(ctx, tx, c)
		return err
	})
	return e, d, err
}

// createQuerier is what createIn runs its statements on: a pooled
// connection or a transaction on one.
type createQuerier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// createIn applies one planned create through q: the connection when it is
// one statement, else a transaction (see Correlate.createOnce).
func createIn(ctx context.Context, q createQuerier, c correlate.Create) (correlate.Event, correlate.Disposition, error) {
	org, user := c.Caller.Organization, c.Caller.User
	if c.IdempotencyKey != "" {
		// Step 1. Two creates with one key must have exactly one effect,
		// the other waiting and replaying. A transaction-scoped advisory
		// lock on a hash of (organization, user, key) serialises them: the
		// second blocks here until the first commits or rolls back, and
		// then (READ COMMITTED: each statement takes a fresh snapshot) sees
		// the binding the first committed, or none if it rolled back. A
		// hash collision between two keys only makes them wait for each
		// other. The lock is released at commit, after the binding of
		// step 5 is visible.
		lock := fmt.Sprintf("tally.correlate.idempotency:%d:%s:%d:%s:%s", len(org), org, len(user), user, c.IdempotencyKey)
		if _, err := q.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, lock); err != nil {
			return correlate.Event{}, "", fmt.Errorf("lock idempotency key: %w", err)
		}
		var row correlatedRow
		err := q.QueryRow(ctx, `SELECT `+prefixed("e.", correlatedColumns)+`
			FROM correlated_event_idempotency_keys k JOIN correlated_events e ON e.id = k.event_id
			WHERE k.organization = $1 AND k.user_id = $2 AND k.key = $3 AND k.bound_at >= $4`,
			org, user, c.IdempotencyKey, c.KeyNotBefore).Scan(row.dest()...)
		switch {
		case err == nil:
			e, err := row.event()
			return e, correlate.Replayed, err
		case !errors.Is(err, pgx.ErrNoRows):
			return correlate.Event{}, "", fmt.Errorf("read idempotency key: %w", err)
		}
	}

	args, err := insertArgs(c.Event)
	if err != nil {
		return correlate.Event{}, "", err
	}
	var (
		row  correlatedRow
		disp = correlate.Created
	)
	switch c.Step {
	case correlate.StepRecord:
		err = q.QueryRow(ctx, `INSERT INTO correlated_events (`+correlatedColumns+`) VALUES `+insertValues+` RETURNING `+correlatedColumns, args...).Scan(row.dest()...)
	case correlate.StepOccurrence:
		// Step 3 in one statement: insert the opening event, or, when the
		// partial unique index already holds an open event of the key,
		// count the occurrence on it. PostgreSQL makes INSERT … ON CONFLICT
		// DO UPDATE atomic under concurrency: of 64 simultaneous first
		// occurrences one inserts and 63 update, each update waiting for
		// the row lock of the previous, so none is lost. When the open
		// event is resolved meanwhile, the conflict disappears and the
		// insert opens a new event instead. The count saturates at the
		// bigint maximum instead of failing with 22003.
		var up upsertRow
		err = q.QueryRow(ctx, `INSERT INTO correlated_events AS e (`+correlatedColumns+`) VALUES `+insertValues+`
			ON CONFLICT (organization, user_id, correlation_key) WHERE `+openPredicate+`
			DO UPDATE SET
				occurrence_count = CASE WHEN e.occurrence_count > 9223372036854775807 - $28::bigint
					THEN 9223372036854775807 ELSE e.occurrence_count + $28::bigint END,
				last_seen_at = GREATEST(e.last_seen_at, $29::timestamptz),
				updated_at = GREATEST(e.updated_at, $30::timestamptz)
			RETURNING `+correlatedColumns+`, (xmax = 0) AS inserted`,
			append(args, c.Count, c.LastSeenAt, c.Now)...).Scan(append(up.dest(), &up.Inserted)...)
		row = up.correlatedRow
		if err == nil && !up.Inserted {
			disp = correlate.Incremented
		}
	case correlate.StepResolution:
		// Step 4: close the open event when there is one. The UPDATE takes
		// its row lock, so a concurrent occurrence either is counted before
		// (and the resolution sees its count) or waits and, finding the
		// event closed, opens a new one.
		err = q.QueryRow(ctx, `UPDATE correlated_events SET
				resolved_at = $4,
				severity = COALESCE($5, severity),
				description = COALESCE($6, description),
				last_seen_at = GREATEST(last_seen_at, $7::timestamptz),
				updated_at = GREATEST(updated_at, $8::timestamptz)
			WHERE organization = $1 AND user_id = $2 AND correlation_key = $3 AND `+openPredicate+`
			RETURNING `+correlatedColumns,
			org, user, c.Event.CorrelationKey, c.ResolvedAt, orNull(string(c.Severity)), c.Description, c.LastSeenAt, c.Now).Scan(row.dest()...)
		switch {
		case err == nil:
			disp = correlate.Resolved
		case errors.Is(err, pgx.ErrNoRows) && c.InsertRefused != nil:
			return correlate.Event{}, "", c.InsertRefused // nothing to close, and the insert contradicts itself
		case errors.Is(err, pgx.ErrNoRows):
			err = q.QueryRow(ctx, `INSERT INTO correlated_events (`+correlatedColumns+`) VALUES `+insertValues+` RETURNING `+correlatedColumns, args...).Scan(row.dest()...)
		}
	default:
		return correlate.Event{}, "", fmt.Errorf("unknown step %d", c.Step)
	}
	if err != nil {
		return correlate.Event{}, "", fmt.Errorf("write event: %w", err)
	}

	if c.IdempotencyKey != "" {
		// Step 5, in the same transaction as the effect. A binding older
		// than the retention is replaced.
		if _, err := q.Exec(ctx, `INSERT INTO correlated_event_idempotency_keys
				(organization, user_id, key, event_id, bound_at) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (organization, user_id, key) DO UPDATE
				SET event_id = EXCLUDED.event_id, bound_at = EXCLUDED.bound_at`,
			org, user, c.IdempotencyKey, row.ID, c.Now); err != nil {
			return correlate.Event{}, "", fmt.Errorf("bind idempotency key: %w", err)
		}
	}
	e, err := row.event()
	return e, disp, err
}

// prefixed qualifies every column of a column list with prefix.
func prefixed(prefix, columns string) string {
	parts := strings.Split(columns, ",")
	for i, p := range parts {
		parts[i] = prefix + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}

const scopeWhere = `organization = $1 AND user_id = $2 AND deleted_at IS NULL`

// Get implements [correlate.Store].
func (s *Correlate) Get(ctx context.Context, scope correlate.Caller, id string) (correlate.Event, error) {
	var row correlatedRow
	err := s.db.GetContext(ctx, &row, `SELECT `+correlatedColumns+` FROM correlated_events WHERE `+scopeWhere+` AND id = $3`,
		scope.Organization, scope.User, id)
	if err != nil {
		return correlate.Event{}, interpretError(fmt.Errorf("pgstore: get event %s: %w", id, err))
	}
	return row.event()
}

// List implements [correlate.Store].
func (s *Correlate) List(ctx context.Context, scope correlate.Caller, q correlate.Query) (correlate.Listing, error) {
	where := []string{scopeWhere}
	args := []any{scope.Organization, scope.User}
	if scope.AllUsers {
		// Every user of the organization: a reader's view.
		where = []string{`organization = $1 AND deleted_at IS NULL`}
		args = args[:1]
	}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", fmt.Sprintf("$%d", len(args))))
	}
	if len(q.Category) > 0 {
		add("category = ANY(?::text[])", q.Category)
	}
	if len(q.Action) > 0 {
		add("action = ANY(?::text[])", q.Action)
	}
	if len(q.Severity) > 0 {
		add("severity = ANY(?::text[])", stringsOf(q.Severity))
	}
	if q.Resolved != nil {
		if *q.Resolved {
			where = append(where, "resolved_at IS NOT NULL")
		} else {
			where = append(where, "resolved_at IS NULL")
		}
	}
	if q.CorrelationKey != "" {
		add("correlation_key = ?", q.CorrelationKey)
	}
	if q.Search != "" {
		esc := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(q.Search)
		add(`description ILIKE ? ESCAPE '\'`, "%"+esc+"%")
	}
	cond := strings.Join(where, " AND ")
	// One pass for the counts: Read ignores the status filter
	// (correlate.Listing), the per-severity counts (and so Total) apply it.
	statusCond := "TRUE"
	if len(q.Status) > 0 {
		args = append(args, stringsOf(q.Status))
		statusCond = fmt.Sprintf("status = ANY($%d::text[])", len(args))
	}
	var counts []struct {
		Severity string `db:"severity"`
		N        int64  `db:"n"`
		Read     int64  `db:"read"`
	}
	if err := s.db.SelectContext(ctx, &counts, fmt.Sprintf(`SELECT severity,
		count(*) FILTER (WHERE %s) AS n, count(*) FILTER (WHERE status = 'read') AS read
		FROM correlated_events WHERE %s GROUP BY severity`, statusCond, cond), args...); err != nil {
		return correlate.Listing{}, interpretError(fmt.Errorf("pgstore: count events: %w", err))
	}
	var l correlate.Listing
	bySeverity := map[correlate.Severity]int64{}
	for _, c := range counts {
		l.Total += c.N
		l.Read += c.Read
		bySeverity[correlate.Severity(c.Severity)] = c.N
	}
	for _, sv := range correlate.Severities() {
		if n := bySeverity[sv]; n > 0 {
			l.BySeverity = append(l.BySeverity, correlate.SeverityCount{Severity: sv, Count: n})
		}
	}
	dir := "DESC"
	if q.Order == correlate.OrderAsc {
		dir = "ASC"
	}
	sortBy := ""
	if col, ok := sortColumns[q.Sort]; ok {
		sortBy = col + " " + dir + ", "
	}
	var rows []correlatedRow
	n := len(args)
	err := s.db.SelectContext(ctx, &rows, fmt.Sprintf(`SELECT %s FROM correlated_events WHERE %s AND %s
		ORDER BY %screated_at %s, id %s LIMIT $%d OFFSET $%d`, correlatedColumns, cond, statusCond, sortBy, dir, dir, n+1, n+2),
		append(args, q.PageSize, int64(q.Page)*int64(q.PageSize))...)
	if err != nil {
		return correlate.Listing{}, interpretError(fmt.Errorf("pgstore: list events: %w", err))
	}
	l.Events = make([]correlate.Event, 0, len(rows))
	for _, r := range rows {
		e, err := r.event()
		if err != nil {
			return correlate.Listing{}, err
		}
		l.Events = append(l.Events, e)
	}
	return l, nil
}

// sortColumns maps each correlate.SortField but createdAt (the tie-break
// itself) to its ORDER BY expression; text in the "C" collation, byte by
// byte, as the in-memory store compares.
var sortColumns = map[correlate.SortField]string{
	correlate.SortUpdatedAt:   "updated_at",
	correlate.SortOwner:       `owner COLLATE "C"`,
	correlate.SortSystemID:    `system_id COLLATE "C"`,
	correlate.SortCategory:    `category COLLATE "C"`,
	correlate.SortAction:      `action COLLATE "C"`,
	correlate.SortSeverity:    `severity COLLATE "C"`,
	correlate.SortStatus:      `status COLLATE "C"`,
	correlate.SortDescription: `description COLLATE "C"`,
}

func stringsOf[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// SetStatus implements [correlate.Store].
func (s *Correlate) SetStatus(ctx context.Context, scope correlate.Caller, id string, status correlate.Status, at time.Time) (correlate.Event, error) {
	var row correlatedRow
	err := s.db.GetContext(ctx, &row, `UPDATE correlated_events
		SET status = $4, updated_at = GREATEST(updated_at, $5::timestamptz)
		WHERE `+scopeWhere+` AND id = $3 RETURNING `+correlatedColumns,
		scope.Organization, scope.User, id, string(status), at)
	if err != nil {
		return correlate.Event{}, interpretError(fmt.Errorf("pgstore: set event status %s: %w", id, err))
	}
	return row.event()
}

// Delete implements [correlate.Store]. The deleted row leaves the
// partial unique index, so it no longer counts as the open event of its key.
func (s *Correlate) Delete(ctx context.Context, scope correlate.Caller, id string, at time.Time) (correlate.Event, error) {
	var row correlatedRow
	err := s.db.GetContext(ctx, &row, `UPDATE correlated_events
		SET deleted_at = $4, updated_at = GREATEST(updated_at, $4::timestamptz)
		WHERE `+scopeWhere+` AND id = $3 RETURNING `+correlatedColumns,
		scope.Organization, scope.User, id, at)
	if err != nil {
		return correlate.Event{}, interpretError(fmt.Errorf("pgstore: delete event %s: %w", id, err))
	}
	return row.event()
}

// SetStatuses implements [correlate.Store] in one statement.
func (s *Correlate) SetStatuses(ctx context.Context, scope correlate.Caller, ids []string, status correlate.Status, at time.Time) ([]string, error) {
	var got []string
	err := s.db.SelectContext(ctx, &got, `UPDATE correlated_events
		SET status = $4, updated_at = GREATEST(updated_at, $5::timestamptz)
		WHERE `+scopeWhere+` AND id = ANY($3::uuid[]) RETURNING id::text`,
		scope.Organization, scope.User, ids, string(status), at)
	if err != nil {
		return nil, interpretError(fmt.Errorf("pgstore: set event statuses: %w", err))
	}
	return inOrder(ids, got), nil
}

// DeleteMany implements [correlate.Store] in one statement; the deleted
// rows leave the partial unique index, as Delete's does.
func (s *Correlate) DeleteMany(ctx context.Context, scope correlate.Caller, ids []string, at time.Time) ([]string, error) {
	var got []string
	err := s.db.SelectContext(ctx, &got, `UPDATE correlated_events
		SET deleted_at = $4, updated_at = GREATEST(updated_at, $4::timestamptz)
		WHERE `+scopeWhere+` AND id = ANY($3::uuid[]) RETURNING id::text`,
		scope.Organization, scope.User, ids, at)
	if err != nil {
		return nil, interpretError(fmt.Errorf("pgstore: delete events: %w", err))
	}
	return inOrder(ids, got), nil
}

// inOrder returns the ids of want that are in got, in the order of want.
func inOrder(want, got []string) []string {
	var out []string
	for _, id := range want {
		if slices.Contains(got, id) {
			out = append(out, id)
		}
	}
	return out
}

// Types implements [correlate.Store].
func (s *Correlate) Types(ctx context.Context, scope correlate.Caller) ([]correlate.EventType, error) {
	cond, args := scopeWhere, []any{scope.Organization, scope.User}
	if scope.AllUsers {
		cond, args = `organization = $1 AND deleted_at IS NULL`, args[:1]
	}
	var rows []struct {
		Category string `db:"category"`
		Action   string `db:"action"`
	}
	if err := s.db.SelectContext(ctx, &rows, `SELECT category, action FROM (SELECT DISTINCT category, action FROM correlated_events
		WHERE `+cond+`) t ORDER BY category COLLATE "C", action COLLATE "C"`, args...); err != nil {
		return nil, interpretError(fmt.Errorf("pgstore: event types: %w", err))
	}
	out := make([]correlate.EventType, 0, len(rows))
	for _, r := range rows {
		out = append(out, correlate.EventType{Category: r.Category, Action: r.Action})
	}
	return out, nil
}

// PurgeIdempotencyKeys implements [correlate.Store].
func (s *Correlate) PurgeIdempotencyKeys(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM correlated_event_idempotency_keys WHERE bound_at < $1`, before)
	if err != nil {
		return 0, interpretError(fmt.Errorf("pgstore: delete idempotency keys: %w", err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("pgstore: delete idempotency keys: %w", err)
	}
	return n, nil
}
