// Package pgstore is the PostgreSQL implementation of tally's Store
// interfaces.
//
// A [DB] wraps a pgx v5 connection pool and hands out one store per area
// of the library, all on that pool. The two hot write paths (Ingest.Commit
// and Correlate.Create) and Projection.Rebuild run on pgx directly;
// the reads and the rarer writes go through sqlx over database/sql (pgx's
// stdlib adapter) on the same pool:
//
//	db, err := pgstore.Open(ctx, url, pgstore.Options{})
//	…
//	defer db.Close()
//	if _, err := db.Migrate(ctx); err != nil { … }
//	ingestSvc, err := ingest.New(db.Ingest(), ingest.Options{})
//	projSvc, err := projection.New(db.Projection(), ingestSvc)
//	correlateSvc, err := correlate.New(db.Correlate(), correlate.Options{})
//	err = sizenames.ReplaceCloud(ctx, db.SizeNames(), cloud, rows)
//
// [DB.Ingest] returns the [Ingest] store (ingest.Store), [DB.Projection]
// the [Projection] store (projection.Store), [DB.Correlate] the
// [Correlate] store (correlate.Store) and [DB.SizeNames] the [SizeNames]
// store (sizenames.Store). The schema is created and upgraded
// by goose migrations embedded in the binary ([DB.Migrate]); [Open] does not
// apply them, so an operator decides when a schema changes (tallyd applies
// them on start, and `tallyd migrate` applies them alone).
//
// Every write that the pure packages describe as one unit runs in one
// transaction (one unexported function per path: pgx's BeginFunc or
// Commit's own on pgx): it commits when the work returns nil
// and rolls back on an error or a panic. Driver errors
// are translated in one place (interpretError) so that pgx types never
// leak to callers, and no driver type is part of the API (apart from the
// *pgxpool.Pool that [New] accepts).
//
// # Migrations
//
// The embedded migrations form one sequence, 00001, 00002, … with no gaps
// and no numbers reserved by area: goose refuses a database that has applied
// a later version than a new file's (missing, out-of-order migration), so a
// new migration always takes the next number. TestMigrationsAreOneSequence
// fails otherwise. Released schema versions are listed in the upgrade test
// (releasedVersions in migrate_test.go), which upgrades a database from each
// of them to the current version.
//
// # Ingestion tables
//
// Migrations 00001-00006 hold lifecycle ingestion (canonical-event.md,
// sections Rules, Size schemas, Size names, Delivery):
//
//   - events: one row per (event_id, timestamp), the primary key and the
//     duplicate rule; an index on (cloud, resource_type, resource_id,
//     timestamp), which histories and listings read (migration 00009
//     dropped the two no query read). payload is of type
//     json (not jsonb), which keeps the exact text: numbers such as
//     12345678901234567890 or 0.1, member order and unknown members read back
//     as they were written. category and received_at are the store's.
//   - dead_letters: refused items (id identity, raw bytea exactly as the item
//     arrived, NUL and invalid UTF-8 included, NULL beyond the ingest cap;
//     raw_size, reason, event_id, received_at); listed by (received_at, id).
//   - audit_log: id identity, at, action, credential, event_id, platform,
//     cloud; listed by (action, at, id).
//   - resource_types: the size-schema registry, primary key (platform,
//     resource_type); size_schema is json so a schema reads back as the exact
//     bytes put; version grows by one per put. Seeded with the five openstack
//     schemas of internal/seed.ResourceTypes.
//   - size_names: primary key (cloud, resource_type, member, value) and name.
//
// [Ingest.Commit] writes a batch in one pgx transaction with a fixed number
// of set-based statements, never one round trip per event: a duplicate
// probe on a sample of the batch's keys (the full probe when the sample
// finds a stored event, or from the start when the store's previous batch
// met one), one binary COPY of the new events, the projection's merge
// (below), and INSERT … SELECT FROM unnest(…) for dead letters and audit
// rows. Events are copied sorted by (event_id, timestamp), so concurrent
// overlapping batches wait for each other's keys in one order and do not
// deadlock. A COPY that fails on the primary key (a stored event the
// sample missed, or one a concurrent batch stored meanwhile) redoes the
// batch with the full probe; one that fails so after the full probe redoes
// it with INSERT … ON CONFLICT DO NOTHING RETURNING, which cannot (see
// commitBatch in write.go).
//
// # The projection
//
// Migration 00008 holds current_resources, one row per (cloud,
// resource_type, resource_id), kept by Commit in the same transaction as
// the events (write.go): the events it newly stored are folded in Go, per
// resource and from the empty row (projection.Apply in projection.Compare order),
// into one delta row each, and one INSERT … ON CONFLICT DO UPDATE merges
// the deltas in key order, its CASE rules combining each delta with the
// stored row, guarded by stored.last_event_at < the delta's oldest event.
// Only the rows the guard refuses (about 1 % of a batch; the statement has
// locked them) are read back: applied incrementally when their new events
// still sort after the row, else (a late event) the resource's history is
// re-read from events, which the transaction sees with its own inserts,
// and replayed. No advisory lock: the upsert's row locks, taken in key
// order, serialise batches on one resource without deadlocks, and the later
// batch's guard sees the earlier one's committed row.
// [Projection.Rebuild] row-locks its keys in the same order (inserting a
// placeholder for a key without a row) before reading their events.
// Besides its primary key, current_resources has one index, on project_id:
// migration 00010 dropped the two that held state, so that an update which
// changes neither the key nor project_id can be HOT (a listing filtered by
// a rare state alone then reads the table in key order).
//
// # Correlated events
//
// Migration 00007 holds correlated_events and their idempotency keys; see
// the comments in store/pgstore/correlate.go for how one open event per
// (organization, user, correlationKey) and one effect per idempotency key are
// enforced by the database.
//
// # TimescaleDB
//
// When the timescaledb extension is installed in the database before the
// migrations run, migration 00001 turns the events table into a hypertable
// partitioned on timestamp (the primary key holds the partition column, as
// timescaledb requires); nothing else changes. Installing the extension later
// does not convert an existing table. Without the extension events stays a
// plain table: plain PostgreSQL 15 or later is enough. The hypertable branch
// is not exercised by the test suite, whose server has no timescaledb.
package pgstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"

	"github.com/tallyhq/tally/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// DB is a handle on one PostgreSQL database (one schema): a pgx v5 pool and
// the store of each area of the library, which share it. It is safe for
// concurrent use by many goroutines, and several DB values (in one process
// or many) may share one database: every guarantee the pure packages ask
// for is enforced by the database, not by the process.
type DB struct {
	conn       *conn
	ownsPool   bool
	ingest     Ingest
	projection Projection
	correlate  Correlate
	sizeNames  SizeNames
	reconcile  Reconcile
	wakeups    wakeups
	leader     leader
}

// conn is what every area store of one DB shares.
type conn struct {
	pool    *pgxpool.Pool
	probe   *pgxpool.Pool // Ping's own one-connection pool; nil: Ping uses pool
	db      *sqlx.DB      // on pool, through boundedConnector
	now     func() time.Time
	acquire time.Duration // the acquire timeout; 0: none (see acquireConn)

	// duplicatesSeen: the last batch's probe found stored events, so the
	// next batch starts with the full probe (see commitBatch).
	duplicatesSeen atomic.Bool

	// partitions is what this DB knows of events' partitions.
	partitions partitionCache

	// standby: CheckReplicaOf found this database in recovery.
	standby atomic.Bool
}

// Ingest is the store of lifecycle ingestion: it implements ingest.Store
// on the tables events, dead_letters, audit_log, resource_types,
// size_names and current_resources (which Commit keeps). Get it from
// [DB.Ingest]; the zero value is not usable. Safe for concurrent use.
type Ingest struct{ *conn }

// Projection is the store of the projection of current resources: it
// implements projection.Store on current_resources and events. Get it from
// [DB.Projection]; the zero value is not usable. Safe for concurrent use.
type Projection struct{ *conn }

// Correlate is the store of event correlation: it implements
// correlate.Store on the correlated events and their idempotency keys. Get
// it from [DB.Correlate]; the zero value is not usable. Safe for
// concurrent use.
type Correlate struct {
	*conn
	pipe *createPipe // the creates without an idempotencyKey
}

// SizeNames is the store of the size-name table: it implements
// sizenames.Store (the rows [Ingest] resolves). Get it from
// [DB.SizeNames]; the zero value is not usable. Safe for concurrent use.
type SizeNames struct{ *conn }

// Options configures a [DB]. The zero value is valid.
type Options struct {
	// Now is the clock for the times the store stamps itself (received_at
	// of a dead letter, at of an audit row, when the caller left them
	// zero). Nil means time.Now. Times are stored in UTC with microsecond
	// precision.
	Now func() time.Time
	// MaxConns is the most connections the pool [Open] makes may hold,
	// shared by every store of the DB. Zero means the URL's
	// pool_max_conns, else [DefaultMaxConns]. Negative is an error.
	MaxConns int32
	// ConnectTimeout bounds making one connection, so that Open against
	// an address that never answers fails with an error instead of
	// hanging. Zero means the URL's connect_timeout, else
	// [DefaultConnectTimeout]. Negative is an error.
	ConnectTimeout time.Duration
	// StatementTimeout is PostgreSQL's statement_timeout on each
	// connection: a statement that runs or waits (on a lock) longer is
	// cancelled by the server and its transaction rolled back; the store
	// returns store.ErrUnavailable. Zero means the URL's
	// statement_timeout parameter, else [DefaultStatementTimeout];
	// negative means none. Migrations are exempt (see [DB.Migrate]).
	StatementTimeout time.Duration
	// IdleInTransactionTimeout is PostgreSQL's
	// idle_in_transaction_session_timeout on each connection: a session
	// idle inside an open transaction for longer (its process stopped or
	// hung mid-transaction) is ended by the server, which rolls the
	// transaction back and releases its locks, so other writers proceed.
	// PostgreSQL keeps milliseconds. Zero means the URL's
	// idle_in_transaction_session_timeout parameter, else
	// [DefaultIdleInTransactionTimeout]; negative means none.
	IdleInTransactionTimeout time.Duration
	// AcquireTimeout bounds how long a store call waits for a connection
	// of the pool when every connection is in use (the operations rules, Timeouts):
	// past it the call fails with store.ErrUnavailable, having sent no
	// statement, so nothing of it is written. The statement timeout only
	// starts once a connection is held; without this bound a request
	// queued behind connections stuck on a lock would wait for as long as
	// the queue ahead of it. It applies to every call of every store of
	// the DB, on [Open]'s pool and on [New]'s alike, not to [DB.Ping]
	// (which has its own connection). Zero means [DefaultAcquireTimeout];
	// negative means none (the call waits as long as its ctx allows).
	AcquireTimeout time.Duration
	// ApplicationName is PostgreSQL's application_name on every connection
	// [Open] makes (the pool's, the readiness probe's, the leader's and the
	// feed listener's), so that pg_stat_activity names the program. The
	// URL's own application_name (or PGAPPNAME) wins; empty means none
	// unless the URL sets one.
	ApplicationName string
}

// Open connects to the database at url (a PostgreSQL connection URL or
// key=value string as pgx accepts it; a search_path parameter selects the
// schema), checks that it answers, and returns a DB that owns the pool it
// made ([DB.Close] closes it). The pool follows opts over the URL's own
// parameters (MaxConns, ConnectTimeout, StatementTimeout,
// IdleInTransactionTimeout), sets TCP keepalives on every connection
// (idle 30 s, interval 10 s, 3 probes), bounds the wait
// for one of its connections (AcquireTimeout), checks each connection as it
// is taken from the pool (a non-blocking peek at its socket, and a ping after
// a second idle: a connection broken by a PostgreSQL restart is replaced
// before any statement is sent), and [DB.Ping]
// gets a one-connection pool of its own. It does not apply migrations: call
// [DB.Migrate] for that. Errors: an unparsable URL, a negative option, or an
// unreachable server (store.ErrUnavailable, within the connect timeout).
func Open(ctx context.Context, url string, opts Options) (*DB, error) {
	cfg, err := poolConfig(url, opts)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		if unavailable(err) {
			return nil, fmt.Errorf("pgstore: connect to %s: %w (%w)", cfg.ConnConfig.Host, err, store.ErrUnavailable)
		}
		return nil, fmt.Errorf("pgstore: connect to %s: %w", cfg.ConnConfig.Host, err)
	}
	probe, err := pgxpool.NewWithConfig(ctx, probeConfig(cfg))
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgstore: connect: %w", err)
	}
	db, err := New(pool, Options{Now: opts.Now, AcquireTimeout: opts.AcquireTimeout}) // the pool options are in cfg
	if err != nil {
		pool.Close()
		probe.Close()
		return nil, err
	}
	db.ownsPool = true
	db.conn.probe = probe
	return db, nil
}

// New returns a DB on an existing pool, which the caller keeps owning and
// configuring: [DB.Close] leaves it open. Of opts only Now and AcquireTimeout
// apply; MaxConns, ConnectTimeout and StatementTimeout configure the pool
// [Open] makes, so New refuses them rather than ignore them (set them on the
// caller's pool). It
// does not apply migrations (see [DB.Migrate]). Errors (joined): a nil pool,
// a pool option set.
func New(pool *pgxpool.Pool, opts Options) (*DB, error) {
	var errs []error
	if pool == nil {
		errs = append(errs, errors.New("pgstore: a pool is required"))
	}
	if opts.MaxConns != 0 || opts.ConnectTimeout != 0 || opts.StatementTimeout != 0 || opts.IdleInTransactionTimeout != 0 || opts.ApplicationName != "" {
		errs = append(errs, errors.New("pgstore: MaxConns, ConnectTimeout, StatementTimeout, IdleInTransactionTimeout and ApplicationName configure the pool Open makes; New takes a configured pool"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	c := &conn{pool: pool, now: opts.Now, acquire: acquireTimeout(opts.AcquireTimeout)}
	if c.now == nil {
		c.now = time.Now
	}
	c.db = sqlx.NewDb(c.openDB(), "pgx")
	return &DB{conn: c, ingest: Ingest{c}, projection: Projection{c}, correlate: Correlate{c, newCreatePipe(c)}, sizeNames: SizeNames{c}, reconcile: Reconcile{c, newSyncTurns(c.pool.Config().MaxConns)}}, nil
}

// Ingest returns the ingestion store of db. Every call returns the same
// store.
func (db *DB) Ingest() *Ingest { return &db.ingest }

// Projection returns the projection store of db. Every call returns the
// same store.
func (db *DB) Projection() *Projection { return &db.projection }

// Correlate returns the correlation store of db. Every call returns the
// same store.
func (db *DB) Correlate() *Correlate { return &db.correlate }

// SizeNames returns the size-name store of db. Every call returns the same
// store.
func (db *DB) SizeNames() *SizeNames { return &db.sizeNames }

// Reconcile returns the store of reconciliation runs (reconcile.Store).
func (db *DB) Reconcile() *Reconcile { return &db.reconcile }

// Close releases db: its database/sql handle, and the pool when [Open] made
// it. The stores of db must not be used afterwards.
func (db *DB) Close() {
	db.wakeups.stop()
	db.closeLeader()
	_ = db.conn.db.Close()
	if db.ownsPool {
		db.conn.pool.Close()
	}
	if db.conn.probe != nil {
		db.conn.probe.Close()
	}
}

// PoolStats returns the statistics of db's pool and, on a DB made by
// [Open], of the readiness probe's own pool (nil on [New]'s), read now;
// tallyd exports them as tally_db_pool_* (docs/operations.md, Metrics).
func (db *DB) PoolStats() (pool, probe *pgxpool.Stat) {
	if db.conn.probe != nil {
		probe = db.conn.probe.Stat()
	}
	return db.conn.pool.Stat(), probe
}

// PoolConfig describes the pool [Open] made, for a start-up log line: its
// size and the timeouts in force (the options over the URL's parameters).
type PoolConfig struct {
	MaxConns, MinConns                                int32
	ConnectTimeout, StatementTimeout, IdleInTxTimeout time.Duration
	AcquireTimeout                                    time.Duration // 0: none
	MaxConnLifetime, MaxConnIdleTime                  time.Duration
	ApplicationName                                   string
}

// PoolConfig returns the configuration of db's pool.
func (db *DB) PoolConfig() PoolConfig {
	cfg := db.conn.pool.Config()
	ms := func(name string) time.Duration {
		v, err := strconv.ParseInt(cfg.ConnConfig.RuntimeParams[name], 10, 64)
		if err != nil {
			return 0
		}
		return time.Duration(v) * time.Millisecond
	}
	return PoolConfig{
		MaxConns: cfg.MaxConns, MinConns: cfg.MinConns,
		ConnectTimeout:   cfg.ConnConfig.ConnectTimeout,
		StatementTimeout: ms("statement_timeout"), IdleInTxTimeout: ms("idle_in_transaction_session_timeout"),
		AcquireTimeout:  db.conn.acquire,
		MaxConnLifetime: cfg.MaxConnLifetime, MaxConnIdleTime: cfg.MaxConnIdleTime,
		ApplicationName: cfg.ConnConfig.RuntimeParams["application_name"],
	}
}

// Ping reports whether the database answers; tallyd's /readyz calls it.
// On a DB made by [Open] it runs on a pool of its own with one connection,
// so it never waits behind request traffic for the main pool (the operations rules,
// Readiness), nor is it subject to the acquire timeout: an error means the
// server did not answer within 2 s (or ctx), not that the pool was busy. On a DB made by [New] it uses the
// caller's pool. A database that answers but is read-only (SHOW
// transaction_read_only is on) is not ready either. Errors wrap
// store.ErrUnavailable.
func (db *DB) Ping(ctx context.Context) error {
	p := db.conn.pool
	if db.conn.probe != nil {
		p = db.conn.probe
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, probeTimeout)
		defer cancel()
	}
	// A database that answers but is read-only (a primary demoted by a
	// failover, a standby) cannot take a write: not ready.
	var readOnly string
	if err := p.QueryRow(ctx, `SHOW transaction_read_only`).Scan(&readOnly); err != nil {
		return errors.Join(store.ErrUnavailable, fmt.Errorf("pgstore: ping: %w", err))
	}
	if readOnly == "on" {
		return errors.Join(store.ErrUnavailable, errors.New("pgstore: ping: the database is read-only (transaction_read_only is on: a standby, or a primary after failover); writes would fail"))
	}
	return nil
}

// Migrate applies every pending embedded migration to db's database, in the
// schema its search_path names (which must exist: Migrate creates tables,
// not schemas), and returns the versions it applied (in order; empty when
// the schema was current). It is safe to run against a database that is
// already current, and concurrently with other Migrate calls, in this
// process or others: a session-level advisory lock on the schema serialises
// them, so one applies what is pending and the others, once it is done,
// find nothing to apply (they wait for it as long as ctx allows). The
// migrations run on one connection of db's pool, without its statement
// timeout (a migration may take longer than a request); taking that
// connection is bounded by the acquire timeout like any other call. A
// database that records a migration newer than the newest embedded one is
// refused with [ErrSchemaNewer], naming both versions, and nothing is
// applied (tallyd then refuses to start).
func (db *DB) Migrate(ctx context.Context) ([]int64, error) {
	p, err := goose.NewProvider(goose.DialectPostgres, db.conn.db.DB, mustSub(migrations, "migrations"), goose.WithSessionLocker(migrationLock{}))
	if err != nil {
		return nil, fmt.Errorf("pgstore: migrations: %w", err)
	}
	if err := db.checkSchema(ctx); err != nil {
		return nil, err
	}
	if err := checkNotNewer(ctx, p); err != nil {
		return nil, err
	}
	results, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: migrate: %w", err)
	}
	applied := make([]int64, 0, len(results))
	for _, r := range results {
		applied = append(applied, r.Source.Version)
	}
	return applied, nil
}

// MigrateTo is [DB.Migrate] up to version only (inclusive): the versions
// it applied, none when the schema is at version or past it. It serves the
// tests that start from an older layout (the unpartitioned events table of
// version 14, say) and an operator who upgrades one step at a time.
// Errors: as Migrate's.
func (db *DB) MigrateTo(ctx context.Context, version int64) ([]int64, error) {
	p, err := goose.NewProvider(goose.DialectPostgres, db.conn.db.DB, mustSub(migrations, "migrations"), goose.WithSessionLocker(migrationLock{}))
	if err != nil {
		return nil, fmt.Errorf("pgstore: migrations: %w", err)
	}
	if err := checkNotNewer(ctx, p); err != nil {
		return nil, err
	}
	results, err := p.UpTo(ctx, version)
	if err != nil {
		return nil, fmt.Errorf("pgstore: migrate: %w", err)
	}
	applied := make([]int64, 0, len(results))
	for _, r := range results {
		applied = append(applied, r.Source.Version)
	}
	return applied, nil
}

// InvalidIndexes returns the names of the indexes of db's schema that
// PostgreSQL marks invalid (pg_index.indisvalid false) and that no
// CREATE INDEX is building now (pg_stat_progress_create_index), sorted.
// Such an index is what a CREATE INDEX CONCURRENTLY leaves when it fails
// midway (cancelled, its backend terminated, the server restarted); the
// migration's IF NOT EXISTS then keeps it, so the version is recorded as
// applied while the queries it serves read without it. Drop each with DROP
// INDEX CONCURRENTLY and create it again as its migration says
// (docs/operations.md); tallyd warns at start while one exists.
func (db *DB) InvalidIndexes(ctx context.Context) ([]string, error) {
	var names []string
	err := db.conn.db.SelectContext(ctx, &names, `SELECT c.relname::text
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND NOT i.indisvalid
  AND NOT EXISTS (SELECT 1 FROM pg_stat_progress_create_index p WHERE p.index_relid = i.indexrelid)
ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("pgstore: invalid indexes: %w", interpretError(err))
	}
	return names, nil
}

// ErrNotMigrated is returned (wrapped) by [DB.CheckMigrated] when the
// schema lacks migrations this binary embeds. Test for
// it with errors.Is.
var ErrNotMigrated = errors.New("pgstore: database not migrated")

// CheckMigrated reports whether db's schema exists and has every embedded
// migration applied, in one sentence that says what to do: `schema "x"
// does not exist` (the URL's search_path names a schema nobody created),
// or `database not migrated (version 0, want 15): run tallyd migrate`. The
// commands that read a migrated schema (tallyd projection rebuild, tallyd
// retention) call it first, rather than fail on a missing table. Errors:
// [ErrNotMigrated], [ErrSchemaNewer], a missing schema, or the database's.
func (db *DB) CheckMigrated(ctx context.Context) error {
	if err := db.checkSchema(ctx); err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db.conn.db.DB, mustSub(migrations, "migrations"))
	if err != nil {
		return fmt.Errorf("pgstore: migrations: %w", err)
	}
	if err := checkNotNewer(ctx, p); err != nil {
		return err
	}
	var exists bool
	if err := db.conn.db.GetContext(ctx, &exists, `SELECT to_regclass('goose_db_version') IS NOT NULL`); err != nil {
		return fmt.Errorf("pgstore: read the schema version: %w", interpretError(err))
	}
	var have int64
	if exists {
		if have, err = p.GetDBVersion(ctx); err != nil {
			return fmt.Errorf("pgstore: read the schema version: %w", interpretError(err))
		}
	}
	srcs := p.ListSources()
	if want := srcs[len(srcs)-1].Version; have < want {
		return fmt.Errorf("%w (version %d, want %d): run tallyd migrate (or start tallyd, which migrates)", ErrNotMigrated, have, want)
	}
	return nil
}

// checkSchema refuses a search_path that names no existing schema, naming
// it: PostgreSQL itself would say "relation does not exist" at the first
// query, or "no schema has been selected to create in".
func (db *DB) checkSchema(ctx context.Context) error {
	var row struct {
		Current *string `db:"current"`
		Path    string  `db:"path"`
	}
	if err := db.conn.db.GetContext(ctx, &row, `SELECT current_schema() AS current, current_setting('search_path') AS path`); err != nil {
		return fmt.Errorf("pgstore: read the schema: %w", interpretError(err))
	}
	if row.Current == nil {
		return fmt.Errorf("pgstore: schema %s does not exist (search_path is %s): create it (CREATE SCHEMA), or fix the URL's search_path", quoteSchema(row.Path), row.Path)
	}
	return nil
}

// quoteSchema is the first schema of a search_path, in double quotes.
func quoteSchema(path string) string {
	first, _, _ := strings.Cut(path, ",")
	return `"` + strings.Trim(strings.TrimSpace(first), `"`) + `"`
}

// ErrSchemaNewer is returned (wrapped) by [DB.Migrate] when the database
// records a migration version higher than the newest this binary embeds: a
// newer release migrated it, and this one could misread or corrupt what that
// schema holds. Test for it with errors.Is.
var ErrSchemaNewer = errors.New("pgstore: the database schema is newer than this binary")

// checkNotNewer refuses a database whose recorded migration version is
// higher than the newest embedded one, naming both versions.
// newestMigration is the version of the newest embedded migration (the
// number its file name starts with).
func newestMigration() int64 {
	entries, err := fs.ReadDir(mustSub(migrations, "migrations"), ".")
	if err != nil {
		panic(err)
	}
	var newest int64
	for _, e := range entries {
		digits, _, _ := strings.Cut(e.Name(), "_")
		if v, err := strconv.ParseInt(digits, 10, 64); err == nil && v > newest {
			newest = v
		}
	}
	return newest
}

func checkNotNewer(ctx context.Context, p *goose.Provider) error {
	srcs := p.ListSources()
	if len(srcs) == 0 {
		return nil
	}
	newest := srcs[len(srcs)-1].Version
	have, err := p.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: migrate: read the schema version: %w", interpretError(err))
	}
	if have > newest {
		return fmt.Errorf("%w: the database is at migration %05d, this binary knows migrations up to %05d; run a tallyd release at least as new as the one that migrated it", ErrSchemaNewer, have, newest)
	}
	return nil
}

// querier is satisfied by both *sqlx.DB and *sqlx.Tx, so query helpers run
// inside or outside a transaction alike.
type querier interface {
	sqlx.ExtContext
	GetContext(ctx context.Context, dest any, query string, args ...any) error
	SelectContext(ctx context.Context, dest any, query string, args ...any) error
}

var (
	_ querier = (*sqlx.DB)(nil)
	_ querier = (*sqlx.Tx)(nil)
)

// Errors interpretError maps driver errors to. They are wrapped, so callers
// test with errors.Is.
var (
	// errUniqueViolation is SQLSTATE 23505.
	errUniqueViolation = errors.New("pgstore: unique violation")
	// errSerialization is SQLSTATE 40001 or 40P01 (deadlock detected).
	errSerialization = errors.New("pgstore: serialization failure")
)

// interpretError translates driver errors in one place: no rows becomes
// store.ErrNotFound, SQLSTATE 23505 errUniqueViolation, 40001 and 40P01
// errSerialization and store.ErrUnavailable (transient: a retry can
// succeed; on a standby 40001 is also a query cancelled by a conflict
// with recovery), and an unreachable or unanswering database
// store.ErrUnavailable (see unavailable). Any other error is returned
// unchanged.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) || errors.Is(err, pgx.ErrNoRows) {
		return errors.Join(store.ErrNotFound, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "23505":
			return errors.Join(errUniqueViolation, err)
		case "40001", "40P01":
			return errors.Join(errSerialization, store.ErrUnavailable, err)
		}
	}
	if unavailable(err) {
		return errors.Join(store.ErrUnavailable, err)
	}
	return err
}

// unavailable reports whether err says the database could not be reached
// or did not answer in time, rather than that the statement was wrong:
//   - SQLSTATE class 08 (connection exception), 25006 (read-only SQL
//     transaction: a primary demoted by a failover, or a standby), class 53
//     (insufficient resources: 53100 disk full, 53200 out of memory, 53300
//     too many connections, 53400 configuration limit exceeded), 57014 (statement cancelled: statement_timeout),
//     55P03 (lock_timeout), 57P01-57P03 (server shutting down, crashed,
//     starting up);
//   - a connection that could not be made or broke (pgconn's connect
//     errors, network errors, EOF, a closed connection, pgconn's
//     safe-to-retry and timeout classes, database/sql's bad connection).
func unavailable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"),
			pgErr.Code == "25006", strings.HasPrefix(pgErr.Code, "53"), pgErr.Code == "57014", pgErr.Code == "55P03",
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03":
			return true
		}
		return false
	}
	var (
		connectErr *pgconn.ConnectError
		netErr     net.Error
	)
	return errors.As(err, &connectErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		pgconn.SafeToRetry(err) || pgconn.Timeout(err)
}
