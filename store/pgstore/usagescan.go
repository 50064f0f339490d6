package pgstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/ingest/usage"
	"github.com/tallyhq/tally/internal/feed"
)

// scanChunk is how many event rows one statement of
// historiesScan reads (a variable for the tests of its chunk
// boundaries).
var scanChunk = 10_000

// historiesScan reads the histories q selects when it selects resources by
// key only: the events in key and timestamp order (idx_events_resource of
// each partition, merged), at most scanChunk a statement, each key's
// checkpoint a row of its own before its events (scanQuery). Each statement reads everything from one snapshot: a retention
// run between two statements leaves each chunk consistent (its events and
// their checkpoint, or the events it dropped before it dropped them). A
// chunk that fills up holds its last key back for the next statement,
// which starts after the last key emitted; a key with scanChunk events or
// more (alone in its chunk) is read on its own without a row bound.
func (s *Ingest) historiesScan(ctx context.Context, q usage.HistoryQuery, fn func(usage.History) error) error {
	// The statements and the decoding of their rows run on a goroutine of
	// their own, ahead of fn by at most scanAhead histories: the database's
	// work on the next chunk and the decoding overlap with fn's fold.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Histories go across in batches: a hand-over per history made the
	// two goroutines wake each other for every resource.
	ch := make(chan []usage.History, scanAhead/scanBatch)
	var readErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		var batch []usage.History
		send := func() error {
			select {
			case ch <- batch:
				batch = nil
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		readErr = s.scanHistories(ctx, q, func(h usage.History) error {
			if batch = append(batch, h); len(batch) == scanBatch {
				return send()
			}
			return nil
		})
		if readErr == nil && len(batch) > 0 {
			readErr = send()
		}
	}()
	for batch := range ch {
		for _, h := range batch {
			if err := fn(h); err != nil {
				cancel()
				for range ch { // the reader stops at its next send
				}
				<-done
				return err
			}
		}
	}
	<-done
	return readErr
}

// scanAhead is about how many histories the reader of historiesScan
// decodes ahead of the fold, handed over scanBatch at a time.
const (
	scanAhead = 256
	scanBatch = 64
)

// scanHistories is historiesScan's reader: the statements in turn, each
// history passed to fn in key order.
func (s *Ingest) scanHistories(ctx context.Context, q usage.HistoryQuery, fn func(usage.History) error) error {
	emitted := 0
	for {
		st := scanState{fn: fn, limit: q.Limit, emitted: emitted}
		err := s.scanOnce(ctx, q, &st)
		emitted = st.emitted
		if err != nil || st.done {
			return err
		}
		switch {
		case st.rows < scanChunk: // the end
			return st.flush()
		case st.lastEmitted == nil: // one key filled the chunk
			one := q
			one.Cloud, one.ResourceType, one.ResourceID, one.After, one.Limit = st.cur.Key.Cloud, st.cur.Key.ResourceType, st.cur.Key.ResourceID, nil, 1
			if _, _, err := s.historiesChunk(ctx, one, 1, fn); err != nil {
				return err
			}
			emitted++
			k := st.cur.Key
			q.After = &k
		default: // the chunk's last key is read again, whole
			k := *st.lastEmitted
			q.After = &k
		}
		if q.Limit > 0 && emitted >= q.Limit {
			return nil
		}
	}
}

// scanState is one statement's progress through its rows.
type scanState struct {
	fn          func(usage.History) error
	limit       int
	emitted     int
	rows        int // event rows read
	cur         usage.History
	has         bool
	lastEmitted *projection.Key
	block       []event.Event // the events of the histories, see add
	selected    bool          // the history being read is selected
	done        bool          // the limit is reached
}

// add appends a zero event to the history being read, in st's block of
// events, and returns it for the decoder to fill in place (an event is
// large: copying it through a return and an append cost as much as
// decoding its columns). The histories of a statement share a few large
// allocations instead of growing a slice each (each history's slice is
// capped at its own length, so no append reaches its neighbour's events).
func (st *scanState) add() *event.Event {
	n := len(st.cur.Events)
	if len(st.block) == cap(st.block) {
		block := make([]event.Event, 0, max(scanBlock, 2*(n+1)))
		st.block = append(block, st.cur.Events...) // the history so far moves along
	}
	st.block = st.block[:len(st.block)+1]
	st.cur.Events = st.block[len(st.block)-n-1 : len(st.block) : len(st.block)]
	return &st.cur.Events[n]
}

// scanBlock is how many events one allocation of scanState.add holds.
const scanBlock = 1024

// flush emits the history being read.
func (st *scanState) flush() error {
	if !st.has || st.done {
		return nil
	}
	st.has = false
	if !st.selected {
		return nil // a checkpoint the bounds do not select
	}
	if !eventsSorted(st.cur.Events) { // they come in timestamp order: the ties may need it
		slices.SortFunc(st.cur.Events, func(a, b event.Event) int { return projection.Compare(&a, &b) })
	}
	if err := st.fn(st.cur); err != nil {
		return err
	}
	st.emitted++
	k := st.cur.Key
	st.lastEmitted = &k
	if st.limit > 0 && st.emitted >= st.limit {
		st.done = true
	}
	return nil
}

// eventsSorted reports whether es is in projection.Compare order, without
// copying each event into the comparison as slices.IsSortedFunc would.
func eventsSorted(es []event.Event) bool {
	for i := 1; i < len(es); i++ {
		if projection.Compare(&es[i], &es[i-1]) < 0 {
			return false
		}
	}
	return true
}

// scanOnce runs one statement of historiesScan.
func (s *Ingest) scanOnce(ctx context.Context, q usage.HistoryQuery, st *scanState) error {
	pc, err := s.acquireConn(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: read histories: acquire: %w", interpretError(err))
	}
	defer pc.Release()
	// One snapshot for both statements: whether a checkpoint lies ahead,
	// then the chunk.
	tx, err := pc.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return fmt.Errorf("pgstore: read histories: %w", interpretError(err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // read only: nothing to commit
	// The planner estimates a row comparison by its first column alone
	// ("cloud > $1": nothing, when one cloud holds every resource), so it
	// would sort the whole rest of the table for the chunk instead of
	// merging the partitions' index scans and stopping at the limit. The
	// chunk's plan is the index's order; without a sort to choose, the
	// inflated cost must not make it compile the statement (JIT: seconds).
	if _, err := tx.Conn().PgConn().Exec(ctx, "SET LOCAL enable_sort = off; SET LOCAL jit = off").ReadAll(); err != nil {
		return fmt.Errorf("pgstore: read histories: %w", interpretError(err))
	}
	var checkpoints bool
	cq, cargs := scanCheckpointsQuery(q)
	if err := tx.QueryRow(ctx, cq, cargs...).Scan(&checkpoints); err != nil {
		return fmt.Errorf("pgstore: read histories: %w", interpretError(err))
	}
	query, args := scanEventsQuery(q)
	if checkpoints {
		query, args = scanQuery(q)
	}
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("pgstore: read histories: %w", interpretError(err))
	}
	defer rows.Close()
	var (
		k    projection.Key
		kind int32
		cp   resourceRow
		cpAt time.Time
	)
	dec, err := newScanDecoder(rows)
	if err != nil {
		return err
	}
	for rows.Next() {
		raw := rows.RawValues()
		if err := dec.head(raw, &k, &kind); err != nil {
			return err
		}
		if kind == scanCheckpoint {
			cp = resourceRow{Cloud: k.Cloud, ResourceType: k.ResourceType, ResourceID: k.ResourceID}
			if err := rows.Scan(nil, nil, nil, nil, &cpAt, &cp.Platform, &cp.ProjectID, &cp.State, &cp.Size,
				&cp.CreatedAt, &cp.DeletedAt, &cp.FirstEventAt, &cp.LastEventAt, &cp.LastEventType, &cp.LastEventID,
				nil, nil, nil, nil, nil, nil, nil); err != nil {
				return fmt.Errorf("pgstore: read histories: %w", interpretError(err))
			}
		}
		if kind == scanEvent {
			st.rows++
		}
		if st.done {
			continue
		}
		if !st.has || k != st.cur.Key {
			if err := st.flush(); err != nil {
				return err
			}
			if st.done {
				continue
			}
			st.cur, st.has, st.selected = usage.History{Key: k}, true, false
		}
		if kind == scanCheckpoint {
			res := cp.resource()
			st.cur.Start, st.cur.StartAt = &res, cpAt.UTC()
			// A checkpoint selects its resource by itself (no event left)
			// when the bounds would keep an event at its instant.
			st.selected = st.selected || q.AsOf.Kind != feed.Start && (q.Before.IsZero() || st.cur.StartAt.Before(utcMicro(q.Before)))
			continue
		}
		st.selected = true // an event the bounds keep selects its resource
		t, err := dec.timestamp(raw[dec.cols.timestamp])
		if err != nil {
			return err
		}
		if st.cur.Start != nil && t.Before(st.cur.StartAt) {
			continue // an event the checkpoint holds (a retention run stopped before its drop)
		}
		if err := dec.event(raw, k, t, st.add()); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgstore: read histories: %w", interpretError(err))
	}
	// The last key is still held: scanHistories flushes it at the end, or
	// reads it again with the next statement when the chunk filled up.
	return nil
}

// scanDecoder decodes the rows of scanQuery and of scanEventsQuery from
// their raw values: an event row (almost every row) costs its event's id,
// its payload and the few distinct strings of the other columns, which it
// keeps once (interned), not one allocation per column and row as Scan
// makes.
type scanDecoder struct {
	cols     *scanColumns
	kind     pgtype.ScanPlan // nil for scanEventsQuery's rows, all events
	ts       pgtype.ScanPlan
	tsBinary bool // the timestamp column comes in binary format
	intern   map[string]string
	last     [4]string // the last string of each interned event column, see col
}

// scanColumns says where the columns scanDecoder reads are in a row.
type scanColumns struct {
	n, kind                                                  int // kind < 0: every row is an event
	eventID, timestamp, eventType, platform, project, source int
	payload                                                  int
}

// The rows of scanQuery (a checkpoint's columns, then an event's) and of
// scanEventsQuery (an event's alone); the key comes first in both.
var (
	scanWide   = scanColumns{n: 22, kind: 3, eventID: 15, timestamp: 16, eventType: 17, platform: 18, project: 19, source: 20, payload: 21}
	scanNarrow = scanColumns{n: 10, kind: -1, eventID: 3, timestamp: 4, eventType: 5, platform: 6, project: 7, source: 8, payload: 9}
)

// Columns of the key, first in every row.
const colCloud, colType, colID = 0, 1, 2

func newScanDecoder(rows pgx.Rows) (*scanDecoder, error) {
	m, fields := rows.Conn().TypeMap(), rows.FieldDescriptions()
	var cols *scanColumns
	switch len(fields) {
	case scanWide.n:
		cols = &scanWide
	case scanNarrow.n:
		cols = &scanNarrow
	default:
		return nil, fmt.Errorf("pgstore: read histories: %d columns, want %d or %d", len(fields), scanWide.n, scanNarrow.n)
	}
	d := &scanDecoder{cols: cols, intern: map[string]string{}}
	if cols.kind >= 0 {
		var kind int32
		d.kind = m.PlanScan(fields[cols.kind].DataTypeOID, fields[cols.kind].Format, &kind)
	}
	var ts pgtype.Timestamptz
	f := fields[cols.timestamp]
	d.ts = m.PlanScan(f.DataTypeOID, f.Format, &ts)
	d.tsBinary = f.DataTypeOID == pgtype.TimestamptzOID && f.Format == pgtype.BinaryFormatCode
	return d, nil
}

// head decodes a row's key (keeping *k's strings when they are the same)
// and kind.
func (d *scanDecoder) head(raw [][]byte, k *projection.Key, kind *int32) error {
	if len(raw) != d.cols.n || raw[colCloud] == nil || raw[colType] == nil || raw[colID] == nil {
		return fmt.Errorf("pgstore: read histories: a row without its key")
	}
	if string(raw[colCloud]) != k.Cloud {
		k.Cloud = d.str(raw[colCloud])
	}
	if string(raw[colType]) != k.ResourceType {
		k.ResourceType = d.str(raw[colType])
	}
	if string(raw[colID]) != k.ResourceID {
		k.ResourceID = string(raw[colID])
	}
	if d.kind == nil {
		*kind = scanEvent
		return nil
	}
	if err := d.kind.Scan(raw[d.cols.kind], kind); err != nil {
		return fmt.Errorf("pgstore: read histories: kind: %w", err)
	}
	return nil
}

// str is b as a string, one allocation per distinct value (at most 4096
// kept).
func (d *scanDecoder) str(b []byte) string {
	if s, ok := d.intern[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(d.intern) < 4096 {
		d.intern[s] = s
	}
	return s
}

// event decodes the rest of an event row of key k whose timestamp is t
// into *e, a zero Event.
func (d *scanDecoder) event(raw [][]byte, k projection.Key, t time.Time, e *event.Event) error {
	c := d.cols
	e.EventID, e.Timestamp = string(raw[c.eventID]), t
	e.EventType, e.Platform = d.col(0, raw[c.eventType]), d.col(1, raw[c.platform])
	e.Cloud, e.ResourceType, e.ResourceID = k.Cloud, k.ResourceType, k.ResourceID
	e.ProjectID, e.Source = d.col(2, raw[c.project]), event.Source(d.col(3, raw[c.source]))
	// The raw values are the connection's buffer until the next row;
	// UnmarshalJSON keeps copies of what it keeps, never raw itself.
	if err := e.Payload.UnmarshalJSON(raw[c.payload]); err != nil {
		return fmt.Errorf("pgstore: read histories: payload of %q: %w", e.EventID, err)
	}
	return nil
}

// col is str of the event column i (of the four interned): the string of
// the row before when b is the same (the common case: a resource's events
// share their platform, project and source), else str's.
func (d *scanDecoder) col(i int, b []byte) string {
	if string(b) == d.last[i] {
		return d.last[i]
	}
	d.last[i] = d.str(b)
	return d.last[i]
}

// timestamp decodes an event's timestamp (UTC): a binary timestamptz
// directly (microseconds since 2000-01-01), anything else, and the
// infinities, through pgx's plan.
func (d *scanDecoder) timestamp(b []byte) (time.Time, error) {
	if d.tsBinary && len(b) == 8 {
		us := int64(binary.BigEndian.Uint64(b))
		if us != math.MaxInt64 && us != math.MinInt64 && us < math.MaxInt64-pgEpochMicros {
			return time.UnixMicro(us + pgEpochMicros).UTC(), nil
		}
	}
	var ts pgtype.Timestamptz
	if err := d.ts.Scan(b, &ts); err != nil || !ts.Valid {
		return time.Time{}, fmt.Errorf("pgstore: read histories: timestamp: %v", err)
	}
	return ts.Time.UTC(), nil
}

// The kinds of row of scanQuery: a key's checkpoint comes before its
// events.
const (
	scanCheckpoint = 0
	scanEvent      = 1
)

// scanQuery is one statement of historiesScan: at most scanChunk events
// after q.After in key and timestamp order (the bounds: as of q.AsOf,
// before q.Before, q's key filters), and the checkpoints of the keys
// after q.After and before the chunk's last key (every one after q.After
// when the chunk is the last), in key order, each key's checkpoint first,
// then its events in timestamp order. Whether a checkpoint of a key with
// no event in the chunk selects its resource is for the reader to judge
// (scanOnce), so that no row is joined with another.
func scanQuery(q usage.HistoryQuery) (string, []any) {
	sel, cpSel, args, arg := scanConds(q)
	n := arg(scanChunk)
	cpSel = append(cpSel, `((SELECT count(*) FROM ev) < `+n+` OR (cloud, resource_type, resource_id) < (SELECT cloud, resource_type, resource_id FROM last))`)
	return `
WITH ev AS MATERIALIZED (
  SELECT cloud, resource_type, resource_id, event_id, timestamp, event_type, platform, project_id, source, payload FROM events` + where(sel) + `
  ORDER BY cloud, resource_type, resource_id, timestamp LIMIT ` + n + `),
last AS (SELECT cloud, resource_type, resource_id FROM ev ORDER BY cloud DESC, resource_type DESC, resource_id DESC LIMIT 1)
SELECT cloud, resource_type, resource_id, ` + strconv.Itoa(scanCheckpoint) + `, at, platform, project_id, state, size::text, created_at, deleted_at,
       first_event_at, last_event_at, last_event_type, last_event_id,
       NULL, NULL::timestamptz, NULL, NULL, NULL, NULL, NULL
FROM resource_checkpoints` + where(cpSel) + `
UNION ALL
SELECT cloud, resource_type, resource_id, ` + strconv.Itoa(scanEvent) + `, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       event_id, timestamp, event_type, platform, project_id, source, payload::text
FROM ev
ORDER BY 1, 2, 3, 4, 17`, *args
}

// scanEventsQuery is scanQuery when no checkpoint lies after q.After
// (scanCheckpointsQuery, in the same snapshot): the same event rows in the
// same order, read straight off the partitions' merged index scans, with
// no materialized chunk and no sort (which cost the backend about half
// its time per row), and only the columns of an event (scanNarrow): no
// kind and no checkpoint's empty columns to send and decode.
func scanEventsQuery(q usage.HistoryQuery) (string, []any) {
	sel, _, args, arg := scanConds(q)
	n := arg(scanChunk)
	return `
SELECT cloud, resource_type, resource_id, event_id, timestamp, event_type, platform, project_id, source, payload::text
FROM events` + where(sel) + `
ORDER BY cloud, resource_type, resource_id, timestamp LIMIT ` + n, *args
}

// scanCheckpointsQuery asks whether a checkpoint lies after q.After among
// the keys q's filters select.
func scanCheckpointsQuery(q usage.HistoryQuery) (string, []any) {
	var args []any
	arg := func(v any) string { args = append(args, v); return "$" + strconv.Itoa(len(args)) }
	var cpSel []string
	for _, f := range []struct{ col, v string }{{"cloud", q.Cloud}, {"resource_type", q.ResourceType}, {"resource_id", q.ResourceID}} {
		if f.v != "" {
			cpSel = append(cpSel, f.col+" = "+arg(f.v))
		}
	}
	if q.After != nil {
		cpSel = append(cpSel, afterCond(q, arg))
	}
	return `SELECT EXISTS (SELECT 1 FROM resource_checkpoints` + where(cpSel) + `)`, args
}

// scanConds returns the conditions of scanQuery's events (sel) and
// checkpoints (cpSel), their arguments, and the function adding one.
func scanConds(q usage.HistoryQuery) (sel, cpSel []string, args *[]any, arg func(any) string) {
	args = new([]any)
	arg = func(v any) string { *args = append(*args, v); return "$" + strconv.Itoa(len(*args)) }
	sel = []string{asOfCond(q.AsOf, arg)}
	if !q.Before.IsZero() {
		sel = append(sel, "timestamp < "+arg(utcMicro(q.Before)))
	}
	for _, f := range []struct{ col, v string }{{"cloud", q.Cloud}, {"resource_type", q.ResourceType}, {"resource_id", q.ResourceID}} {
		if f.v != "" {
			cond := f.col + " = " + arg(f.v)
			sel = append(sel, cond)
			cpSel = append(cpSel, cond)
		}
	}
	if q.After != nil {
		after := afterCond(q, arg)
		sel = append(sel, after)
		cpSel = append(cpSel, after)
	}
	return sel, cpSel, args, arg
}

// afterCond is the condition "key after q.After" of q's statements. When
// q's filters fix the key's leading columns to q.After's (a query for one
// cloud, or one cloud and type), it compares the other columns only: a
// btree scan starts at an equality on its first column when it has one,
// and checks a row comparison that includes that column on every entry
// from there, so "(cloud, resource_type, resource_id) > …" beside
// "cloud = …" read the cloud's index from its start at every statement
// (a cost quadratic in the cloud's events). Beside the equalities the
// shorter comparison selects the same keys, and the scan starts at it.
func afterCond(q usage.HistoryQuery, arg func(any) string) string {
	a := q.After
	switch {
	case q.Cloud != "" && a.Cloud == q.Cloud && q.ResourceType != "" && a.ResourceType == q.ResourceType:
		return "resource_id > " + arg(a.ResourceID) + "::text"
	case q.Cloud != "" && a.Cloud == q.Cloud:
		return "(resource_type, resource_id) > (" + arg(a.ResourceType) + "::text, " + arg(a.ResourceID) + "::text)"
	}
	return "(cloud, resource_type, resource_id) > (" + arg(a.Cloud) + "::text, " + arg(a.ResourceType) + "::text, " + arg(a.ResourceID) + "::text)"
}
