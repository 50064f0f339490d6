package pgstore

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/correlate"
)

// feedHeadSQL is the last readable change: below the oldest running
// transaction, so that every change before it is committed.
const feedHeadSQL = `SELECT tx::text, seq FROM correlated_event_changes
	WHERE tx < pg_snapshot_xmin(pg_current_snapshot()) ORDER BY tx DESC, seq DESC LIMIT 1`

// Feed implements [correlate.Store] in one statement, so that what it
// scanned and what it returns come from one snapshot: at most
// correlate.MaxFeedScan changes after q.After below the oldest running
// transaction (pg_snapshot_xmin), of which the ones q.Filter selects, up to
// q.Limit; and a first row with the last position scanned, how many were,
// and whether q.After's transaction is at or past pg_snapshot_xmax (a
// position of another database: refused).
func (s *Correlate) Feed(ctx context.Context, q correlate.FeedRead) (correlate.FeedBatch, error) {
	if q.Limit <= 0 {
		var tx string
		var seq int64
		switch err := s.db.QueryRowContext(ctx, feedHeadSQL).Scan(&tx, &seq); {
		case err == sql.ErrNoRows:
			return correlate.FeedBatch{CaughtUp: true}, nil
		case err != nil:
			return correlate.FeedBatch{}, interpretError(fmt.Errorf("pgstore: read feed head: %w", err))
		}
		p, err := position(tx, seq)
		return correlate.FeedBatch{Next: p, CaughtUp: true}, err
	}
	if q.After.TX == 0 && q.After.Seq != 0 {
		// Every position of this store but the start has a transaction id:
		// this is another store's (memstore counts without them).
		return correlate.FeedBatch{}, fmt.Errorf("pgstore: read feed after seq %d without a transaction: %w", q.After.Seq, correlate.ErrCursor)
	}
	cond, args := feedWhere(q.Filter, []any{strconv.FormatUint(q.After.TX, 10), q.After.Seq, correlate.MaxFeedScan, q.Limit})
	rows, err := s.db.QueryContext(ctx, `WITH snap AS (SELECT pg_current_snapshot() AS s),
		scanned AS (SELECT * FROM correlated_event_changes
			WHERE (tx, seq) > ($1::text::xid8, $2::bigint) AND tx < (SELECT pg_snapshot_xmin(s) FROM snap)
			ORDER BY tx, seq LIMIT $3),
		hit AS (SELECT * FROM scanned WHERE `+cond+` ORDER BY tx, seq LIMIT $4)
		SELECT 0 AS part, l.tx::text, l.seq, (SELECT count(*) FROM scanned),
			$1::text::xid8 >= (SELECT pg_snapshot_xmax(s) FROM snap), NULL::text, NULL::text
			FROM (SELECT 1) one LEFT JOIN LATERAL (SELECT tx, seq FROM scanned ORDER BY tx DESC, seq DESC LIMIT 1) l ON true
		UNION ALL
		SELECT 1, tx::text, seq, 0, false, kind, snapshot::text FROM hit`, args...)
	if err != nil {
		return correlate.FeedBatch{}, interpretError(fmt.Errorf("pgstore: read feed: %w", err))
	}
	defer rows.Close()
	var (
		b       = correlate.FeedBatch{Next: q.After}
		scanned int64
		foreign bool
	)
	for rows.Next() {
		var (
			part       int
			tx, kind   sql.NullString
			seq        sql.NullInt64
			n          int64
			past       bool
			snapshotJS sql.NullString
		)
		if err := rows.Scan(&part, &tx, &seq, &n, &past, &kind, &snapshotJS); err != nil {
			return correlate.FeedBatch{}, interpretError(fmt.Errorf("pgstore: read feed: %w", err))
		}
		if part == 0 {
			scanned, foreign = n, past
			if tx.Valid {
				if b.Next, err = position(tx.String, seq.Int64); err != nil {
					return correlate.FeedBatch{}, err
				}
			}
			continue
		}
		p, err := position(tx.String, seq.Int64)
		if err != nil {
			return correlate.FeedBatch{}, err
		}
		e, err := snapshotEvent([]byte(snapshotJS.String))
		if err != nil {
			return correlate.FeedBatch{}, err
		}
		b.Changes = append(b.Changes, correlate.Change{Position: p, Kind: correlate.ChangeKind(kind.String), Event: e})
	}
	if err := rows.Err(); err != nil {
		return correlate.FeedBatch{}, interpretError(fmt.Errorf("pgstore: read feed: %w", err))
	}
	if foreign {
		return correlate.FeedBatch{}, fmt.Errorf("pgstore: read feed after (%d, %d), a transaction this database has not started: %w",
			q.After.TX, q.After.Seq, correlate.ErrCursor)
	}
	slices.SortFunc(b.Changes, func(x, y correlate.Change) int {
		return cmp.Or(cmp.Compare(x.Position.TX, y.Position.TX), cmp.Compare(x.Position.Seq, y.Position.Seq))
	})
	b.CaughtUp = scanned < correlate.MaxFeedScan
	if len(b.Changes) == q.Limit {
		// Full: the next read starts after the last change returned.
		last := b.Changes[len(b.Changes)-1].Position
		b.CaughtUp = b.CaughtUp && last == b.Next
		b.Next = last
	}
	return b, nil
}

// feedWhere is the SQL condition of f over correlated_event_changes, its
// arguments appended to args.
func feedWhere(f correlate.FeedFilter, args []any) (string, []any) {
	where := []string{"TRUE"}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", fmt.Sprintf("$%d", len(args))))
	}
	if f.Scope.Organization != "" {
		add("organization = ?", f.Scope.Organization)
		if !f.Scope.AllUsers {
			add("user_id = ?", f.Scope.User)
		}
	}
	if len(f.Category) > 0 {
		add("category = ANY(?::text[])", f.Category)
	}
	if len(f.Action) > 0 {
		add("action = ANY(?::text[])", f.Action)
	}
	if len(f.Severity) > 0 {
		add("severity = ANY(?::text[])", stringsOf(f.Severity))
	}
	if len(f.Status) > 0 {
		add("status = ANY(?::text[])", stringsOf(f.Status))
	}
	if f.Resolved != nil {
		add("resolved = ?::boolean", *f.Resolved)
	}
	if f.CorrelationKey != "" {
		add("correlation_key = ?", f.CorrelationKey)
	}
	if f.Search != "" {
		esc := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(f.Search)
		add(`description ILIKE ? ESCAPE '\'`, "%"+esc+"%")
	}
	return strings.Join(where, " AND "), args
}

// position is a change's position from its tx as text and its seq.
func position(tx string, seq int64) (correlate.FeedPosition, error) {
	n, err := strconv.ParseUint(tx, 10, 64)
	if err != nil {
		return correlate.FeedPosition{}, fmt.Errorf("pgstore: read feed: transaction id %q: %w", tx, err)
	}
	return correlate.FeedPosition{TX: n, Seq: seq}, nil
}

// snapshotRow is a change's snapshot: the json_build_object of its
// correlated_events row (pgcorrelate.ChangeValues), members named as the
// columns, metadata and extra embedded as stored.
type snapshotRow struct {
	ID              string         `json:"id"`
	Organization    string         `json:"organization"`
	UserID          string         `json:"user_id"`
	Owner           string         `json:"owner"`
	SystemID        string         `json:"system_id"`
	ActedUpon       string         `json:"acted_upon"`
	OperationID     string         `json:"operation_id"`
	Category        string         `json:"category"`
	Action          string         `json:"action"`
	Severity        string         `json:"severity"`
	Status          string         `json:"status"`
	Description     string         `json:"description"`
	Metadata        jsontext.Value `json:"metadata"`
	Extra           jsontext.Value `json:"extra"`
	CreatedAt       time.Time      `json:"created_at"`
	UpdatedAt       time.Time      `json:"updated_at"`
	DeletedAt       *time.Time     `json:"deleted_at"`
	CorrelationKey  *string        `json:"correlation_key"`
	OccurrenceCount *int64         `json:"occurrence_count"`
	FirstSeenAt     *time.Time     `json:"first_seen_at"`
	LastSeenAt      *time.Time     `json:"last_seen_at"`
	ResolvedAt      *time.Time     `json:"resolved_at"`
	Source          *string        `json:"source"`
	Type            *string        `json:"type"`
	Specversion     *string        `json:"specversion"`
	TraceID         *string        `json:"trace_id"`
	ParentID        *string        `json:"parent_id"`
}

// snapshotEvent decodes a change's snapshot as the event it holds, through
// the row decoding every read of correlated_events uses.
func snapshotEvent(b []byte) (correlate.Event, error) {
	var s snapshotRow
	if err := json.Unmarshal(b, &s); err != nil {
		return correlate.Event{}, fmt.Errorf("pgstore: decode change snapshot: %w", err)
	}
	str := func(p *string) sql.NullString {
		if p == nil {
			return sql.NullString{}
		}
		return sql.NullString{String: *p, Valid: true}
	}
	tm := func(p *time.Time) sql.NullTime {
		if p == nil {
			return sql.NullTime{}
		}
		return sql.NullTime{Time: *p, Valid: true}
	}
	raw := func(v jsontext.Value) sql.NullString {
		if len(v) == 0 || string(v) == "null" {
			return sql.NullString{}
		}
		return sql.NullString{String: string(v), Valid: true}
	}
	r := correlatedRow{
		ID: s.ID, Organization: s.Organization, UserID: s.UserID, Owner: s.Owner, SystemID: s.SystemID,
		ActedUpon: s.ActedUpon, OperationID: s.OperationID, Category: s.Category, Action: s.Action,
		Severity: s.Severity, Status: s.Status, Description: s.Description,
		Metadata: raw(s.Metadata), Extra: raw(s.Extra),
		CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt, DeletedAt: tm(s.DeletedAt),
		CorrelationKey: str(s.CorrelationKey), FirstSeenAt: tm(s.FirstSeenAt), LastSeenAt: tm(s.LastSeenAt),
		ResolvedAt: tm(s.ResolvedAt), Source: str(s.Source), Type: str(s.Type), Specversion: str(s.Specversion),
		TraceID: str(s.TraceID), ParentID: str(s.ParentID),
	}
	if s.OccurrenceCount != nil {
		r.OccurrenceCount = sql.NullInt64{Int64: *s.OccurrenceCount, Valid: true}
	}
	return r.event()
}
