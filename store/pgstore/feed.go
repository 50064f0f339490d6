package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/internal/feed"
)

// The lifecycle feed (migrations 00012 and 00013). Events stored before
// 00012 (tx NULL, Kind Legacy) come first, by (timestamp, event_id "C")
// through idx_events_feed_legacy; every later event by (tx, seq) through
// idx_events_feed, read only below pg_snapshot_xmin(pg_current_snapshot()):
// every transaction with a smaller id has committed or aborted, so no event
// can appear before the point a reader reached, and one written by a
// transaction still open is read once that transaction ends.

// feedRow is an events row as the feed reads it.
type feedRow struct {
	storedEventRow
	TX   sql.NullString `db:"tx"`
	Seq  sql.NullInt64  `db:"seq"`
	Late bool           `db:"late"`
}

const feedColumns = `event_id, timestamp, event_type, platform, cloud, resource_type, resource_id,
       project_id, source, payload::text AS payload, received_at, tx::text AS tx, seq, late`

// belowWatermark is the condition that keeps a read of the current phase to
// rows no transaction can still add to.
const belowWatermark = `tx < pg_snapshot_xmin(pg_current_snapshot())`

// feedPhase is one part of the feed's order.
type feedPhase struct {
	// where selects the phase's rows; order orders them (and its reverse).
	where, order, desc string
	// after is the condition "after position p" with its arguments.
	after func(p feed.Position, arg func(any) string) string
}

var (
	legacyPhase = feedPhase{
		where: `tx IS NULL`,
		order: `timestamp, event_id COLLATE "C"`,
		desc:  `timestamp DESC, event_id COLLATE "C" DESC`,
		after: func(p feed.Position, arg func(any) string) string {
			if p.Kind != feed.Legacy {
				return ""
			}
			return `(timestamp, event_id COLLATE "C") > (` + arg(utcMicro(p.Time)) + `, ` + arg(p.ID) + `)`
		},
	}
	// The order names the columns through their tables: a bare tx would
	// be the output column tx::text, ordering "10" before "9".
	currentPhase = feedPhase{
		where: belowWatermark,
		order: `events.tx, events.seq`,
		desc:  `c.tx DESC, c.seq DESC`,
		after: func(p feed.Position, arg func(any) string) string {
			return `(tx, seq) > (` + arg(strconv.FormatUint(p.TX, 10)) + `::text::xid8, ` + arg(p.Seq) + `::bigint)`
		},
	}
)

// Feed implements [ingest.Store] (see the comment above). A filtered read
// examines at most [ingest.MaxFeedScan] events. A position whose
// transaction id this server has not reached yet is from another database:
// an error wrapping [ingest.ErrFeedPosition].
func (s *Ingest) Feed(ctx context.Context, q ingest.FeedRead) (ingest.FeedBatch, error) {
	if q.Limit <= 0 {
		return s.feedHead(ctx)
	}
	after := q.After
	if after.Kind == feed.Current && after.TX == 0 && after.Seq != 0 {
		// Every Current position of this store has a transaction id but
		// the one before the first transaction (seq 0): this is another
		// store's (memstore counts without transaction ids).
		return ingest.FeedBatch{}, fmt.Errorf("pgstore: feed position %d without a transaction: %w", after.Seq, ingest.ErrFeedPosition)
	}
	var out ingest.FeedBatch
	if after.Kind < feed.Current {
		p, err := s.readPhase(ctx, legacyPhase, after, q.FeedFilter, q.Limit)
		if err != nil || !p.CaughtUp || len(p.Items) == q.Limit {
			p.CaughtUp = false
			return p, err
		}
		out.Items, after = p.Items, feed.Position{Kind: feed.Current}
	}
	p, err := s.readPhase(ctx, currentPhase, after, q.FeedFilter, q.Limit-len(out.Items))
	if err != nil {
		return ingest.FeedBatch{}, err
	}
	if len(p.Items) == 0 && after.TX > 0 {
		if err := s.checkPosition(ctx, after); err != nil {
			return ingest.FeedBatch{}, err
		}
	}
	out.Items = append(out.Items, p.Items...)
	out.Next, out.CaughtUp = p.Next, p.CaughtUp
	return out, nil
}

// readPhase reads at most limit events of one phase after after. Unfiltered,
// it is one index range scan that stops at limit. Filtered, it first finds
// the end of the next MaxFeedScan events of the phase, then reads the
// selected ones up to there, so that a rare filter costs a bounded scan and
// still moves Next on.
func (s *Ingest) readPhase(ctx context.Context, ph feedPhase, after feed.Position, f ingest.FeedFilter, limit int) (ingest.FeedBatch, error) {
	var args []any
	arg := func(v any) string { args = append(args, v); return "$" + strconv.Itoa(len(args)) }
	conds := []string{ph.where}
	if c := ph.after(after, arg); c != "" {
		conds = append(conds, c)
	}
	filtered := f != (ingest.FeedFilter{})
	out := ingest.FeedBatch{Next: after}
	scanned := 0
	if filtered {
		end, n, err := s.scanEnd(ctx, ph, conds, args)
		if err != nil {
			return out, err
		}
		if n == 0 {
			out.CaughtUp = true
			return out, nil
		}
		out.Next, scanned = end, n
		bound := ph.after(end, arg) // rows after end, negated below
		conds = append(conds, "NOT "+bound)
		conds = append(conds, feedFilters(f, arg)...)
	}
	query := `SELECT ` + feedColumns + ` FROM events` + where(conds) + ` ORDER BY ` + ph.order + ` LIMIT ` + arg(limit)
	var rows []feedRow
	if err := s.db.SelectContext(ctx, &rows, query, args...); err != nil {
		return ingest.FeedBatch{}, fmt.Errorf("pgstore: read the feed: %w", interpretError(err))
	}
	for i := range rows {
		it, err := rows[i].item()
		if err != nil {
			return ingest.FeedBatch{}, err
		}
		out.Items = append(out.Items, it)
	}
	switch {
	case len(out.Items) == limit:
		out.Next, out.CaughtUp = out.Items[len(out.Items)-1].Position, false
	case filtered:
		out.CaughtUp = scanned < ingest.MaxFeedScan
	default:
		if len(out.Items) > 0 {
			out.Next = out.Items[len(out.Items)-1].Position
		}
		out.CaughtUp = true
	}
	return out, nil
}

// scanEnd returns the position of the last of the next MaxFeedScan rows of
// ph that conds select, and how many there are.
func (s *Ingest) scanEnd(ctx context.Context, ph feedPhase, conds []string, args []any) (feed.Position, int, error) {
	query := `SELECT event_id, timestamp, tx::text AS tx, seq, n FROM (
    SELECT event_id, timestamp, tx, seq, count(*) OVER () AS n FROM (
        SELECT event_id, timestamp, tx, seq FROM events` + where(conds) + ` ORDER BY ` + ph.order + ` LIMIT ` + strconv.Itoa(ingest.MaxFeedScan) + `
    ) w
) c ORDER BY ` + ph.desc + ` LIMIT 1`
	var r struct {
		EventID   string         `db:"event_id"`
		Timestamp sql.NullTime   `db:"timestamp"`
		TX        sql.NullString `db:"tx"`
		Seq       sql.NullInt64  `db:"seq"`
		N         int            `db:"n"`
	}
	err := s.db.GetContext(ctx, &r, query, args...)
	if errors.Is(err, sql.ErrNoRows) {
		return feed.Position{}, 0, nil
	}
	if err != nil {
		return feed.Position{}, 0, fmt.Errorf("pgstore: read the feed: %w", interpretError(err))
	}
	p, err := eventPosition(r.TX, r.Seq, r.Timestamp.Time, r.EventID)
	return p, r.N, err
}

func feedFilters(f ingest.FeedFilter, arg func(any) string) []string {
	var conds []string
	for _, c := range [...]struct{ col, v string }{
		{"cloud", f.Cloud}, {"platform", f.Platform}, {"resource_type", f.ResourceType},
		{"project_id", f.ProjectID}, {"event_type", f.EventType},
	} {
		if c.v != "" {
			conds = append(conds, c.col+" = "+arg(c.v))
		}
	}
	return conds
}

// headQuery reads the position of the last readable event (events.tx, not
// the text output column tx, orders).
const headQuery = `SELECT tx::text AS tx, seq FROM events WHERE ` + belowWatermark + ` ORDER BY events.tx DESC, events.seq DESC LIMIT 1`

// feedHead is the position of the last readable event (Kind Current; (0,
// 0) when no event has a transaction id yet, which every legacy event
// precedes).
func (s *Ingest) feedHead(ctx context.Context) (ingest.FeedBatch, error) {
	var r struct {
		TX  string `db:"tx"`
		Seq int64  `db:"seq"`
	}
	err := s.db.GetContext(ctx, &r, headQuery)
	if errors.Is(err, sql.ErrNoRows) {
		return ingest.FeedBatch{Next: feed.Position{Kind: feed.Current}, CaughtUp: true}, nil
	}
	if err != nil {
		return ingest.FeedBatch{}, fmt.Errorf("pgstore: read the feed's head: %w", interpretError(err))
	}
	tx, err := strconv.ParseUint(r.TX, 10, 64)
	if err != nil {
		return ingest.FeedBatch{}, fmt.Errorf("pgstore: read the feed's head: tx %q: %w", r.TX, err)
	}
	return ingest.FeedBatch{Next: feed.Position{Kind: feed.Current, TX: tx, Seq: r.Seq}, CaughtUp: true}, nil
}

// checkPosition refuses a position whose transaction id is not below this
// server's next one (pg_snapshot_xmax): no event of this database has it.
func (s *Ingest) checkPosition(ctx context.Context, p feed.Position) error {
	var ok bool
	err := s.db.GetContext(ctx, &ok, `SELECT $1::text::xid8 < pg_snapshot_xmax(pg_current_snapshot())`, strconv.FormatUint(p.TX, 10))
	if err != nil {
		return fmt.Errorf("pgstore: check a feed position: %w", interpretError(err))
	}
	if !ok {
		return fmt.Errorf("pgstore: feed position of transaction %d, which this database has not reached: %w", p.TX, ingest.ErrFeedPosition)
	}
	return nil
}

// eventPosition is the feed position of an events row: Legacy (timestamp, event_id)
// when it has no transaction id, else Current (tx, seq).
func eventPosition(tx sql.NullString, seq sql.NullInt64, ts time.Time, id string) (feed.Position, error) {
	if !tx.Valid {
		return feed.Position{Kind: feed.Legacy, Time: ts.UTC(), ID: id}, nil
	}
	x, err := strconv.ParseUint(tx.String, 10, 64)
	if err != nil || !seq.Valid {
		return feed.Position{}, fmt.Errorf("pgstore: read the feed: event %q has tx %q, seq %v", id, tx.String, seq)
	}
	return feed.Position{Kind: feed.Current, TX: x, Seq: seq.Int64}, nil
}

func (r *feedRow) item() (ingest.FeedEvent, error) {
	e := ingest.FeedEvent{Late: r.Late, StoredEvent: ingest.StoredEvent{ReceivedAt: r.ReceivedAt.UTC(), Event: event.Event{
		EventID: r.EventID, Timestamp: r.Timestamp.UTC(), EventType: r.EventType,
		Platform: r.Platform, Cloud: r.Cloud, ResourceType: r.ResourceType,
		ResourceID: r.ResourceID, ProjectID: r.ProjectID, Source: event.Source(r.Source),
	}}}
	if err := e.Event.Payload.UnmarshalJSON(r.Payload); err != nil {
		return e, fmt.Errorf("pgstore: read the feed: payload of %q: %w", r.EventID, err)
	}
	p, err := eventPosition(r.TX, r.Seq, r.Timestamp, r.EventID)
	e.Position = p
	return e, err
}

// FeedLag is how long the oldest transaction that holds a transaction id
// (a writing one) has been open: the change feeds read only below it, so
// an event committed since is readable no sooner than that transaction
// ends (docs/operations.md, Change feeds). 0 when none is open. Without
// the pg_read_all_stats role, PostgreSQL shows only the transactions of
// tally's own database user.
func (db *DB) FeedLag(ctx context.Context) (time.Duration, error) {
	var secs float64
	err := db.conn.pool.QueryRow(ctx, `SELECT COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - min(xact_start)), 0)::float8
FROM pg_stat_activity WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid()`).Scan(&secs)
	if err != nil {
		return 0, fmt.Errorf("pgstore: feed lag: %w", interpretError(err))
	}
	return time.Duration(secs * float64(time.Second)), nil
}
