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

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/internal/pgcorrelate"
)

var _ correlate.Store = (*Correlate)(nil)

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

// dest is the scan destinations of r, in the order of pgcorrelate.Columns,
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

// Create implements [correlate.Store]. The write of steps 2, 3 or 4, with
// step 5's key binding when there is a key, is one statement
// (pgcorrelate.Write), atomic on its own.
//
// Without an idempotencyKey the statement is pipelined: the creates that
// arrive together are sent on one connection in one write, in one
// implicit transaction (one commit), in the order of the
// (organization, user, correlationKey) they lock, so that two pipelines
// cannot deadlock; each create is answered once that transaction
// committed. When it fails (one statement's error, a failed commit), none
// of them took effect, and each is run again on its own with its own
// result, in the same pipeline shape with a Sync after each statement.
// Each create keeps its own cancellation: one whose ctx ends before it is
// sent is not sent; one whose ctx ends later returns at once, and the
// pipeline is cancelled only when every create in it has given up.
// [DB.PipelineStats] counts the pipelines. While every pipeline that may
// run at once has run for a while (one blocked behind a lock holds all of
// its creates), a create runs alone on a connection of its own instead.
//
// With an idempotencyKey the statement runs in a transaction of its own,
// as two pipelined batches: BEGIN, the key's lock and its lookup; then the
// write and COMMIT, or ROLLBACK when the key replays.
//
// A serialization failure or deadlock (which these statements are not
// expected to cause) is retried a few times. The create path runs on pgx
// directly, on connections of the pool (waiting at most the acquire
// timeout for one), without database/sql or sqlx (their per-statement
// overhead and reflective scans were a fifth of tallyd's CPU per create).
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

// createOnce applies one planned create on one connection of the pool.
func (s *Correlate) createOnce(ctx context.Context, c correlate.Create) (correlate.Event, correlate.Disposition, error) {
	query, args, err := pgcorrelate.Write(c)
	if err != nil {
		return correlate.Event{}, "", err
	}
	if c.IdempotencyKey == "" && !s.pipe.stalled() {
		w, err := s.pipe.write(ctx, pipeLockKey(c.Event), query, args)
		return w.result(err, c)
	}
	pc, err := s.acquireConn(ctx)
	if err != nil {
		return correlate.Event{}, "", fmt.Errorf("acquire: %w", err)
	}
	defer pc.Release()
	if c.IdempotencyKey == "" { // every pipeline stalled: alone
		var w writtenRow
		return w.result(pc.QueryRow(ctx, query, args...).Scan(w.dest()...), c)
	}
	return idempotentCreate(ctx, pc.Conn(), c, query, args)
}

// pipeLockKey is the key whose open event, and open-key index entry, a
// create of e locks: (organization, user, correlationKey), each part
// length-prefixed so that no two triples give one key.
func pipeLockKey(e correlate.Event) string {
	if e.CorrelationKey == "" {
		return ""
	}
	return pgcorrelate.LockKey(e.Organization, e.User, e.CorrelationKey)
}

// endTxTimeout bounds the ROLLBACK that ends an idempotent create's
// transaction after a failure: one round trip on a healthy server.
const endTxTimeout = 2 * time.Second

// idempotentCreate is a create with an idempotencyKey, in one transaction
// of two pipelined round trips on conn.
//
// Step 1. Two creates with one key must have exactly one effect, the other
// waiting and replaying. A transaction-scoped advisory lock on a hash of
// (organization, user, key) serialises them: the second blocks on it until
// the first commits or rolls back, and then the lookup, a statement of its
// own (READ COMMITTED: each statement takes a fresh snapshot), sees the
// binding the first committed, or none if it rolled back. A hash collision
// between two keys only makes them wait for each other. The lock is
// released at commit, after the binding of step 5 is visible.
func idempotentCreate(ctx context.Context, conn *pgx.Conn, c correlate.Create, query string, args []any) (e correlate.Event, d correlate.Disposition, err error) {
	org, user := c.Caller.Organization, c.Caller.User
	defer func() {
		// A failed statement leaves the transaction open (aborted, or
		// never committed): end it, so that the pool keeps the connection.
		// The ROLLBACK runs even when ctx is done (the caller gave up), but
		// within endTxTimeout: a database that does not answer it must not
		// hold the create, and the pool's connection, for as long as TCP
		// keeps the peer. When it fails the connection is closed (the
		// server rolls back when it sees that), and the pool discards it.
		if conn.PgConn().TxStatus() != 'I' && !conn.IsClosed() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endTxTimeout)
			defer cancel()
			if _, err := conn.Exec(rctx, "ROLLBACK"); err != nil && !conn.IsClosed() {
				_ = conn.Close(rctx)
			}
		}
	}()
	var begin pgx.Batch
	begin.Queue("BEGIN")
	begin.Queue(pgcorrelate.LockSQL, pgcorrelate.LockKey(org, user, c.IdempotencyKey))
	var (
		bound correlatedRow
		found bool
	)
	begin.Queue(pgcorrelate.LookupSQL, org, user, c.IdempotencyKey, c.KeyNotBefore).QueryRow(func(row pgx.Row) error {
		switch err := row.Scan(bound.dest()...); {
		case err == nil:
			found = true
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		return nil
	})
	if err := conn.SendBatch(ctx, &begin).Close(); err != nil {
		return correlate.Event{}, "", fmt.Errorf("lock and read idempotency key: %w", err)
	}
	if found {
		if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil { // nothing was written
			return correlate.Event{}, "", fmt.Errorf("end transaction: %w", err)
		}
		e, err := bound.event()
		return e, correlate.Replayed, err
	}
	var commit pgx.Batch
	var w writtenRow
	var werr error
	commit.Queue(query, args...).QueryRow(func(row pgx.Row) error {
		werr = row.Scan(w.dest()...)
		return nil
	})
	commit.Queue("COMMIT")
	if err := conn.SendBatch(ctx, &commit).Close(); err != nil && werr == nil {
		return correlate.Event{}, "", fmt.Errorf("commit: %w", err)
	}
	return w.result(werr, c)
}

// writtenRow is what a pgcorrelate.Write statement returns: the row written and the
// disposition's code.
type writtenRow struct {
	correlatedRow
	disposition int // 0 created, 1 incremented, 2 resolved
}

func (w *writtenRow) dest() []any { return append(w.correlatedRow.dest(), &w.disposition) }

// result is the create's answer once the write statement scanned into w
// with err: no row at all is a resolution with nothing to close whose
// insert was refused (c.InsertRefused).
func (w *writtenRow) result(err error, c correlate.Create) (correlate.Event, correlate.Disposition, error) {
	switch {
	case errors.Is(err, pgx.ErrNoRows) && c.InsertRefused != nil:
		return correlate.Event{}, "", c.InsertRefused
	case err != nil:
		return correlate.Event{}, "", fmt.Errorf("write event: %w", err)
	}
	e, err := w.event()
	return e, [...]correlate.Disposition{correlate.Created, correlate.Incremented, correlate.Resolved}[w.disposition], err
}

const scopeWhere = `organization = $1 AND user_id = $2 AND deleted_at IS NULL`

// Get implements [correlate.Store].
func (s *Correlate) Get(ctx context.Context, scope correlate.Caller, id string) (correlate.Event, error) {
	var row correlatedRow
	err := s.db.GetContext(ctx, &row, `SELECT `+pgcorrelate.Columns+` FROM correlated_events WHERE `+scopeWhere+` AND id = $3`,
		scope.Organization, scope.User, id)
	if err != nil {
		return correlate.Event{}, interpretError(fmt.Errorf("pgstore: get event %s: %w", id, err))
	}
	return row.event()
}

// countsQuery is the one GROUP BY that Counts runs.
func countsQuery(scope correlate.Caller, q correlate.Query, by correlate.CountKey) (string, []any) {
	cond, args := listWhere(scope, q)
	if len(q.Status) > 0 {
		args = append(args, stringsOf(q.Status))
		cond += fmt.Sprintf(" AND status = ANY($%d::text[])", len(args))
	}
	key := "user_id"
	if by == correlate.CountByCategory {
		key = "category"
	}
	return fmt.Sprintf(`SELECT %[1]s AS key, severity, status, count(*) AS n
		FROM correlated_events WHERE %[2]s GROUP BY %[1]s, severity, status
		ORDER BY %[1]s COLLATE "C", severity COLLATE "C", status COLLATE "C"`, key, cond), args
}

// listWhere is the condition (with its arguments, $1 on) that selects the
// events of scope that match every filter of q but Status: List and
// Counts share it.
func listWhere(scope correlate.Caller, q correlate.Query) (string, []any) {
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
	return strings.Join(where, " AND "), args
}

// Counts implements [correlate.Store]: one GROUP BY over the rows the
// listing's index (organization, user_id, created_at) bounds.
func (s *Correlate) Counts(ctx context.Context, scope correlate.Caller, q correlate.Query, by correlate.CountKey) ([]correlate.Count, error) {
	query, args := countsQuery(scope, q, by)
	var rows []struct {
		Key      string `db:"key"`
		Severity string `db:"severity"`
		Status   string `db:"status"`
		N        int64  `db:"n"`
	}
	if err := s.db.SelectContext(ctx, &rows, query, args...); err != nil {
		return nil, interpretError(fmt.Errorf("pgstore: count events: %w", err))
	}
	out := make([]correlate.Count, 0, len(rows))
	for _, r := range rows {
		out = append(out, correlate.Count{Key: r.Key, Severity: correlate.Severity(r.Severity), Status: correlate.Status(r.Status), N: r.N})
	}
	return out, nil
}

// List implements [correlate.Store].
func (s *Correlate) List(ctx context.Context, scope correlate.Caller, q correlate.Query) (correlate.Listing, error) {
	cond, args := listWhere(scope, q)
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
	n := len(args)
	// Rows are read one at a time, so the page stops at q.MaxBytes without
	// holding the rows past it.
	rows, err := s.db.QueryxContext(ctx, fmt.Sprintf(`SELECT %s FROM correlated_events WHERE %s AND %s
		ORDER BY %screated_at %s, id %s LIMIT $%d OFFSET $%d`, pgcorrelate.Columns, cond, statusCond, sortBy, dir, dir, n+1, n+2),
		append(args, q.PageSize, int64(q.Page)*int64(q.PageSize))...)
	if err != nil {
		return correlate.Listing{}, interpretError(fmt.Errorf("pgstore: list events: %w", err))
	}
	defer rows.Close()
	total := 0
	for rows.Next() {
		var r correlatedRow
		if err := rows.StructScan(&r); err != nil {
			return correlate.Listing{}, interpretError(fmt.Errorf("pgstore: list events: %w", err))
		}
		e, err := r.event()
		if err != nil {
			return correlate.Listing{}, err
		}
		l.Events = append(l.Events, e)
		if total += correlate.EventBytes(e); q.MaxBytes > 0 && total > q.MaxBytes {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return correlate.Listing{}, interpretError(fmt.Errorf("pgstore: list events: %w", err))
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
	err := s.db.GetContext(ctx, &row, `WITH u AS (UPDATE correlated_events
		SET status = $4, updated_at = GREATEST(updated_at, $5::timestamptz)
		WHERE `+scopeWhere+` AND id = $3 RETURNING `+pgcorrelate.Columns+`)`+logged("status")+`
		SELECT `+pgcorrelate.Columns+` FROM u`,
		scope.Organization, scope.User, id, string(status), at)
	if err != nil {
		return correlate.Event{}, interpretError(fmt.Errorf("pgstore: set event status %s: %w", id, err))
	}
	return row.event()
}

// logged is the common table expression that writes one change row of
// kind per row of u (the rows an UPDATE … RETURNING Columns changed), in
// the statement's transaction.
func logged(kind string) string {
	return `, logged AS (INSERT INTO correlated_event_changes (` + pgcorrelate.ChangeColumns + `)
		SELECT ` + pgcorrelate.ChangeValues(`'`+kind+`'`, "u") + ` FROM u ORDER BY u.id)`
}

// Delete implements [correlate.Store]. The deleted row leaves the
// partial unique index, so it no longer counts as the open event of its key.
func (s *Correlate) Delete(ctx context.Context, scope correlate.Caller, id string, at time.Time) (correlate.Event, error) {
	var row correlatedRow
	err := s.db.GetContext(ctx, &row, `WITH u AS (UPDATE correlated_events
		SET deleted_at = $4, updated_at = GREATEST(updated_at, $4::timestamptz)
		WHERE `+scopeWhere+` AND id = $3 RETURNING `+pgcorrelate.Columns+`)`+logged("deleted")+`
		SELECT `+pgcorrelate.Columns+` FROM u`,
		scope.Organization, scope.User, id, at)
	if err != nil {
		return correlate.Event{}, interpretError(fmt.Errorf("pgstore: delete event %s: %w", id, err))
	}
	return row.event()
}

// lockedInKeyOrder is the common table expression l of SetStatuses and
// DeleteMany: it locks the scope's live events among the ids $3 in the
// order of their correlationKey (byte order, as pipelined creates sort
// their lock keys; see createPipe), before the UPDATE changes them. A
// pipeline of creates locks the open events of many keys in one
// transaction, in that order; an UPDATE that locked them in the order of
// its scan could hold one that the pipeline waits for while waiting for
// one the pipeline holds, a deadlock that PostgreSQL breaks after
// deadlock_timeout by aborting one of them (SQLSTATE 40P01). FOR NO KEY
// UPDATE is the lock the UPDATE takes anyway: it does not block the
// foreign-key checks of idempotency keys being bound.
const lockedInKeyOrder = `l AS MATERIALIZED (SELECT id FROM correlated_events
		WHERE ` + scopeWhere + ` AND id = ANY($3::uuid[])
		ORDER BY correlation_key COLLATE "C" NULLS FIRST, id FOR NO KEY UPDATE)`

// SetStatuses implements [correlate.Store] in one statement.
func (s *Correlate) SetStatuses(ctx context.Context, scope correlate.Caller, ids []string, status correlate.Status, at time.Time) ([]string, error) {
	var got []string
	err := s.db.SelectContext(ctx, &got, `WITH `+lockedInKeyOrder+`, u AS (UPDATE correlated_events
		SET status = $4, updated_at = GREATEST(updated_at, $5::timestamptz)
		WHERE `+scopeWhere+` AND id IN (SELECT id FROM l) RETURNING `+pgcorrelate.Columns+`)`+logged("status")+`
		SELECT id::text FROM u`,
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
	err := s.db.SelectContext(ctx, &got, `WITH `+lockedInKeyOrder+`, u AS (UPDATE correlated_events
		SET deleted_at = $4, updated_at = GREATEST(updated_at, $4::timestamptz)
		WHERE `+scopeWhere+` AND id IN (SELECT id FROM l) RETURNING `+pgcorrelate.Columns+`)`+logged("deleted")+`
		SELECT id::text FROM u`,
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
