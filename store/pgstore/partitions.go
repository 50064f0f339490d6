package pgstore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
)

// Partitions of events (migration 00015, docs/operations.md, Partitions):
// one per UTC month, named events_YYYY_MM, bounds [YYYY-MM-01 00:00:00+00,
// the next month's start), plus events_legacy (from MINVALUE) on a database
// converted from the unpartitioned layout. There is never a DEFAULT
// partition. A partition is made as a plain table LIKE events, then
// attached: ATTACH PARTITION takes SHARE UPDATE EXCLUSIVE on events, which
// ingestion's inserts and every read do not wait for (CREATE TABLE …
// PARTITION OF would take ACCESS EXCLUSIVE). Makers of partitions are
// serialised across replicas by a transaction-level advisory lock on the
// schema, and bounded by partitionLockTimeout.

// DefaultPartitionsAhead is how many months after the current UTC month
// [DB.KeepPartitionsAhead] keeps partitions for when given 0, as the
// migration does: 3.
const DefaultPartitionsAhead = 3

// partitionLockTimeout bounds each lock wait of a partition's creation
// (the advisory lock, then events' SHARE UPDATE EXCLUSIVE): past it the
// creation fails with lock_timeout (store.ErrUnavailable) instead of
// queueing ingestion behind it.
const partitionLockTimeout = 2 * time.Second

// MaxPartitionsPerBatch is the most partitions one batch makes on demand
// (two years of months): the DDL of a batch is bounded (1000 partitions
// made in one transaction took 18 s and ran out of the server's lock
// table). A batch whose events need more is refused whole with
// ingest.ErrTooManyMonths; [DB.MakePartitions] makes any span first.
const MaxPartitionsPerBatch = 24

// partitionLockKey is the SQL expression of the advisory lock key that
// serialises the makers and droppers of partitions of one schema.
const partitionLockKey = `hashtextextended('tally partitions ' || coalesce(current_schema(), ''), 0)`

// Partition is one partition of events.
type Partition struct {
	// Name is the table's name: events_YYYY_MM or events_legacy.
	Name string
	// From is the inclusive lower bound, a UTC month start; zero for
	// MINVALUE (events_legacy), and for events_0001_01, whose start is
	// Go's zero time.
	From time.Time
	// To is the exclusive upper bound, a UTC month start.
	To time.Time
	// unbounded is true for a lower bound of MINVALUE: From's zero alone
	// cannot say it, since January of year 1 starts at the zero time, and
	// a partition of that month does not hold December of year 0.
	unbounded bool
}

// holds reports whether t falls within p.
func (p Partition) holds(t time.Time) bool {
	return (p.unbounded || !t.Before(p.From)) && t.Before(p.To)
}

// monthOf is the start of t's UTC month.
func monthOf(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// partitionName is the name of the partition of the month starting at m.
func partitionName(m time.Time) string {
	return fmt.Sprintf("events_%04d_%02d", m.Year(), int(m.Month()))
}

// boundLiteral is m as a partition bound: an explicit UTC offset, so that
// the bound does not depend on the session's TimeZone.
// A year before 1 (an event stamped 0001-01-01 with a positive offset is
// in December of year 0 in UTC) is written as PostgreSQL's BC year: Go's
// year 0 is 1 BC.
func boundLiteral(m time.Time) string {
	m = m.UTC()
	if y := m.Year(); y < 1 {
		return fmt.Sprintf("%04d", 1-y) + m.Format("-01-02 15:04:05") + "+00 BC"
	}
	return m.Format("2006-01-02 15:04:05") + "+00"
}

// partitionCache is what a DB knows of events' partitions: read once, then
// again after it made one or an insert found none.
type partitionCache struct {
	mu          sync.Mutex
	loaded      bool
	partitioned bool // events is a partitioned table
	parts       []Partition
	horizon     time.Time // events_horizon's; zero: none
}

// covers reports, for the loaded cache, whether every month of months has
// a partition (always true of an unpartitioned events table).
func (pc *partitionCache) covers(months []time.Time) bool {
	return len(pc.missing(months)) == 0
}

// missing is, for the loaded cache, the months of months (in their order)
// that no partition holds (none of an unpartitioned events table).
func (pc *partitionCache) missing(months []time.Time) []time.Time {
	if !pc.partitioned {
		return nil
	}
	var out []time.Time
	for _, m := range months {
		if !slices.ContainsFunc(pc.parts, func(p Partition) bool { return p.holds(m) }) {
			out = append(out, m)
		}
	}
	return out
}

// eventMonths is the sorted set of the UTC months of evs' timestamps.
func eventMonths(evs []event.Event) []time.Time {
	var months []time.Time
	for i := range evs {
		m := monthOf(evs[i].Timestamp)
		if j, found := slices.BinarySearchFunc(months, m, time.Time.Compare); !found {
			months = slices.Insert(months, j, m)
		}
	}
	return months
}

// ensureMonths makes sure every month of months has a partition, making
// the missing ones. With refresh, it reads the partitions again first (an
// insert found none where the cache had one: dropped by retention, or made
// by another replica's migration).
func (c *conn) ensureMonths(ctx context.Context, months []time.Time, refresh bool) error {
	pc := &c.partitions
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if !pc.loaded || refresh {
		if err := c.loadPartitions(ctx); err != nil {
			return err
		}
	}
	missing := pc.missing(months)
	if len(missing) == 0 {
		return nil
	}
	if len(missing) > MaxPartitionsPerBatch {
		past := missing[MaxPartitionsPerBatch]
		return fmt.Errorf("%w: /timestamp: the events fall in %d months without a partition (%s to %s), one batch makes at most %d (the %d-th is %s): send them in batches of fewer months, or make the partitions first (pgstore.DB.MakePartitions)",
			ingest.ErrTooManyMonths, len(missing), missing[0].Format("2006-01"), missing[len(missing)-1].Format("2006-01"),
			MaxPartitionsPerBatch, MaxPartitionsPerBatch+1, past.Format("2006-01"))
	}
	if _, err := c.makePartitions(ctx, missing); err != nil {
		return err
	}
	return c.loadPartitions(ctx)
}

// loadPartitions reads events' layout and partitions into c.partitions
// (whose mu the caller holds).
func (c *conn) loadPartitions(ctx context.Context) error {
	pc := &c.partitions
	var (
		kind       string
		hasHorizon bool
		horizon    time.Time
	)
	if err := c.pool.QueryRow(ctx, `SELECT coalesce((SELECT relkind::text FROM pg_class WHERE oid = to_regclass('events')), ''),
       to_regclass('events_horizon') IS NOT NULL`).Scan(&kind, &hasHorizon); err != nil {
		return fmt.Errorf("partitions of events: %w", err)
	}
	if hasHorizon {
		err := c.pool.QueryRow(ctx, `SELECT horizon FROM events_horizon`).Scan(&horizon)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("retention horizon: %w", err)
		}
	}
	parts, err := listPartitions(ctx, c.pool)
	if err != nil {
		return err
	}
	pc.loaded, pc.partitioned, pc.parts, pc.horizon = true, kind == "p", parts, horizon.UTC()
	return nil
}

// cachedHorizon is the retention horizon as last read (loading the cache
// first when it is not), or, with refresh, as the database holds it now.
func (c *conn) cachedHorizon(ctx context.Context, refresh bool) (time.Time, error) {
	pc := &c.partitions
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if !pc.loaded || refresh {
		if err := c.loadPartitions(ctx); err != nil {
			return time.Time{}, err
		}
	}
	return pc.horizon, nil
}

// queryer runs a query on a pool, a connection or a transaction.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// listPartitions lists events' partitions through q, by From (MINVALUE
// first); none when events is not partitioned. It reads the catalog only:
// pg_get_expr without the partition's oid opens no relation, so a lock
// on events held elsewhere does not hold it up.
func listPartitions(ctx context.Context, q queryer) ([]Partition, error) {
	rows, err := q.Query(ctx, `SELECT c.relname::text, pg_get_expr(c.relpartbound, 0)
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = to_regclass('events')`)
	if err != nil {
		return nil, fmt.Errorf("partitions of events: %w", err)
	}
	var (
		parts      []Partition
		name, expr string
	)
	if _, err := pgx.ForEachRow(rows, []any{&name, &expr}, func() error {
		p, err := parsePartition(name, expr)
		if err != nil {
			return err
		}
		parts = append(parts, p)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("partitions of events: %w", err)
	}
	slices.SortFunc(parts, func(a, b Partition) int { return a.From.Compare(b.From) })
	return parts, nil
}

// boundExpr matches pg_get_expr of a range partition's bound on one
// timestamptz column: each bound MINVALUE or a quoted literal in the
// session's TimeZone.
var boundExpr = regexp.MustCompile(`^FOR VALUES FROM \((MINVALUE|'[^']+')\) TO \((MAXVALUE|'[^']+')\)$`)

// parsePartition reads a partition's bounds from their pg_get_expr text.
func parsePartition(name, expr string) (Partition, error) {
	m := boundExpr.FindStringSubmatch(expr)
	if m == nil {
		return Partition{}, fmt.Errorf("partition %s of events: bound %q is not a range of timestamps (a DEFAULT partition is never made by tally: detach it)", name, expr)
	}
	p := Partition{Name: name, unbounded: m[1] == "MINVALUE"}
	var err error
	if !p.unbounded {
		if p.From, err = parseBound(m[1]); err != nil {
			return Partition{}, fmt.Errorf("partition %s of events: %w", name, err)
		}
	}
	if m[2] == "MAXVALUE" {
		p.To = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	} else if p.To, err = parseBound(m[2]); err != nil {
		return Partition{}, fmt.Errorf("partition %s of events: %w", name, err)
	}
	return p, nil
}

// boundLiteralExpr is a timestamptz literal as PostgreSQL prints it: a
// year of four or more digits, an offset of hours with optional minutes
// and seconds (local mean time before 1883 in some zones), BC for years
// before 1.
var boundLiteralExpr = regexp.MustCompile(`^'(\d{4,})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.\d+)?([+-])(\d\d)(?::(\d\d))?(?::(\d\d))?( BC)?'$`)

// parseBound parses a quoted timestamptz literal as PostgreSQL prints it.
// (time.Parse takes no year past 9999, which December 9999's upper bound
// is.)
func parseBound(lit string) (time.Time, error) {
	m := boundLiteralExpr.FindStringSubmatch(lit)
	if m == nil {
		return time.Time{}, fmt.Errorf("bound %s is not a timestamp with an offset", lit)
	}
	n := make([]int, 10)
	for i, s := range m[1:11] {
		if s != "" && s != "+" && s != "-" {
			n[i], _ = strconv.Atoi(s)
		}
	}
	year := n[0]
	if m[11] != "" { // PostgreSQL's year n BC is Go's year 1-n
		year = 1 - year
	}
	offset := n[7]*3600 + n[8]*60 + n[9]
	if m[7] == "-" {
		offset = -offset
	}
	t := time.Date(year, time.Month(n[1]), n[2], n[3], n[4], n[5], 0, time.UTC)
	return t.Add(-time.Duration(offset) * time.Second), nil
}

// makePartitions makes, in one transaction under the partitions' advisory
// lock, the partition of every month of months that no partition holds
// once the lock is taken (another replica may have made it meanwhile), and
// returns their names. Every lock wait is bounded by partitionLockTimeout.
func (c *conn) makePartitions(ctx context.Context, months []time.Time) (made []string, err error) {
	pc, err := c.acquireConn(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire: %w", err)
	}
	defer pc.Release()
	tx, err := pc.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if _, err := tx.Exec(ctx, fmt.Sprintf(`SET LOCAL lock_timeout = %d`, partitionLockTimeout.Milliseconds())); err != nil {
		return nil, fmt.Errorf("make partitions: %w", err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+partitionLockKey+`)`); err != nil {
		return nil, fmt.Errorf("make partitions: advisory lock: %w", err)
	}
	parts, err := listPartitions(ctx, tx)
	if err != nil {
		return nil, err
	}
	var horizon *time.Time
	if err := tx.QueryRow(ctx, `SELECT max(horizon) FROM events_horizon`).Scan(&horizon); err != nil {
		return nil, fmt.Errorf("make partitions: retention horizon: %w", err)
	}
	for _, m := range months {
		// never a month retention dropped: its events are refused
		if horizon != nil && m.Before(*horizon) || slices.ContainsFunc(parts, func(p Partition) bool { return p.holds(m) }) {
			continue
		}
		if err := makePartition(ctx, tx, m); err != nil {
			return nil, err
		}
		made = append(made, partitionName(m))
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("make partitions: commit: %w", err)
	}
	return made, nil
}

// makePartition makes the partition of the month starting at m in tx: a
// plain table LIKE events, attached (see the top of this file).
func makePartition(ctx context.Context, tx pgx.Tx, m time.Time) error {
	name := pgx.Identifier{partitionName(m)}.Sanitize()
	if _, err := tx.Exec(ctx, `CREATE TABLE `+name+` (LIKE events INCLUDING DEFAULTS)`); err != nil {
		return fmt.Errorf("make partition %s: %w", name, err)
	}
	attach := fmt.Sprintf(`ALTER TABLE events ATTACH PARTITION %s FOR VALUES FROM ('%s') TO ('%s')`,
		name, boundLiteral(m), boundLiteral(m.AddDate(0, 1, 0)))
	if _, err := tx.Exec(ctx, attach); err != nil {
		return fmt.Errorf("make partition %s: %w", name, err)
	}
	return nil
}

// retiredConstraint is the CHECK (false) that retention adds to a
// partition before the horizon, so that no row lands in it while its
// resources' checkpoints are written and it is detached.
const retiredConstraint = "events_retired"

// noPartition reports whether err is PostgreSQL's refusal of a row that no
// partition of events holds (SQLSTATE 23514, "no partition of relation"),
// or that a partition retention retired refuses (23514 on
// retiredConstraint): the partitions or the horizon changed since the
// cache was read.
func noPartition(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23514" &&
		(strings.HasPrefix(pgErr.Message, "no partition of relation") || pgErr.ConstraintName == retiredConstraint)
}

// EventPartitions lists the partitions of events, ordered by From
// (events_legacy first); none when events is not partitioned (a database
// migrated by timescaledb's branch of 00001). Errors: the database's.
func (db *DB) EventPartitions(ctx context.Context) ([]Partition, error) {
	parts, err := listPartitions(ctx, db.conn.pool)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", interpretError(err))
	}
	return parts, nil
}

// KeepPartitionsAhead makes the partitions of the current UTC month (by
// the DB's clock, Options.Now) and of the ahead months after it that no
// partition holds; ahead 0 means [DefaultPartitionsAhead]. It returns the
// names of the partitions it made (none when all exist, or when events is
// not partitioned). Safe to run from every replica at once: the makers
// are serialised and each month is made once. tallyd runs it at start and
// hourly. Errors: a negative ahead; the database's, a lock wait past 2 s
// included (store.ErrUnavailable).
func (db *DB) KeepPartitionsAhead(ctx context.Context, ahead int) ([]string, error) {
	if ahead < 0 {
		return nil, fmt.Errorf("pgstore: keep partitions ahead: %d months is negative", ahead)
	}
	if ahead == 0 {
		ahead = DefaultPartitionsAhead
	}
	c := db.conn
	now := monthOf(c.now())
	months := make([]time.Time, 0, ahead+1)
	for i := range ahead + 1 {
		months = append(months, now.AddDate(0, i, 0))
	}
	pc := &c.partitions
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if err := c.loadPartitions(ctx); err != nil {
		return nil, fmt.Errorf("pgstore: keep partitions ahead: %w", interpretError(err))
	}
	if pc.covers(months) {
		return nil, nil
	}
	made, err := c.makePartitions(ctx, months)
	if err != nil {
		return nil, fmt.Errorf("pgstore: keep partitions ahead: %w", interpretError(err))
	}
	if err := c.loadPartitions(ctx); err != nil {
		return made, fmt.Errorf("pgstore: keep partitions ahead: %w", interpretError(err))
	}
	return made, nil
}

// MakePartitions makes the partitions of every UTC month from from's to
// to's (inclusive) that no partition holds, as KeepPartitionsAhead does,
// and returns the names of those it made: before a bulk load that writes
// to events directly (COPY, INSERT), which makes no partition on demand,
// unlike Ingest.Commit. A month before the retention horizon is never
// made. Any span: the partitions are made [MaxPartitionsPerBatch] per
// transaction, and those made before an error are returned with it.
// Errors: to before from; the database's (store.ErrUnavailable past a 2 s
// lock wait).
func (db *DB) MakePartitions(ctx context.Context, from, to time.Time) ([]string, error) {
	if to.Before(from) {
		return nil, fmt.Errorf("pgstore: make partitions: %v is before %v", to, from)
	}
	var months []time.Time
	for m := monthOf(from); !m.After(to); m = m.AddDate(0, 1, 0) {
		months = append(months, m)
	}
	c := db.conn
	pc := &c.partitions
	pc.mu.Lock()
	defer pc.mu.Unlock()
	var made []string
	for chunk := range slices.Chunk(months, MaxPartitionsPerBatch) {
		m, err := c.makePartitions(ctx, chunk)
		made = append(made, m...)
		if err != nil {
			return made, fmt.Errorf("pgstore: make partitions: %w", interpretError(err))
		}
	}
	if err := c.loadPartitions(ctx); err != nil {
		return made, fmt.Errorf("pgstore: make partitions: %w", interpretError(err))
	}
	return made, nil
}
