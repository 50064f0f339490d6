// Package pgtest gives each test its own PostgreSQL schema, migrated and
// dropped on cleanup.
//
// The server comes from TEST_DATABASE_URL. Without it a test that asks for a
// schema is skipped with a message, unless CI is set, in which case it fails:
// CI must never pass with the PostgreSQL suite skipped. The first skip in a
// test binary also prints one line naming the package's directory, on the
// terminal when there is one, so that `go test ./...` shows it without -v.
//
// One admin pool is shared by the whole test binary; it creates and drops the
// per-test schemas. Each test then connects through a URL whose search_path
// names its schema, so the code under test sees an ordinary database.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tallyhq/tally/store/pgstore"
)

// EnvURL names the environment variable that holds the test server's URL.
const EnvURL = "TEST_DATABASE_URL"

var (
	adminOnce sync.Once
	adminPool *pgxpool.Pool
	adminErr  error
)

func admin(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	base := os.Getenv(EnvURL)
	if base == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("pgtest: %s is not set, and CI is: the PostgreSQL tests must run in CI", EnvURL)
		}
		skipOnce.Do(announceSkip)
		t.Skipf("pgtest: %s is not set; skipping the PostgreSQL test (see README: Testing)", EnvURL)
	}
	adminOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		adminPool, adminErr = pgxpool.New(ctx, base)
		if adminErr == nil {
			adminErr = adminPool.Ping(ctx)
		}
	})
	if adminErr != nil {
		t.Fatalf("pgtest: connect to %s: %v", EnvURL, adminErr)
	}
	return adminPool, base
}

// skipOnce makes the skip announcement once per test binary, that is once
// per package.
var skipOnce sync.Once

// announceSkip prints one line saying that this package's PostgreSQL tests
// skip. go test shows a passing package's output only with -v, so a skip
// would otherwise be invisible in `go test ./...`: the line goes to the
// terminal (/dev/tty) when there is one, which go test does not capture, and
// to stderr otherwise (shown with -v or when the package fails).
func announceSkip() {
	dir, err := os.Getwd() // go test runs a test binary in its package's directory
	if err != nil {
		dir = "this package"
	}
	msg := fmt.Sprintf("pgtest: %s is not set: the PostgreSQL tests in %s skip (see README: Testing)\n", EnvURL, dir)
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		defer tty.Close()
		if _, err := tty.WriteString(msg); err == nil {
			return
		}
	}
	fmt.Fprint(os.Stderr, msg)
}

// URL creates a fresh schema, applies every embedded migration to it, and
// returns a connection URL whose search_path selects it. The schema is
// dropped when the test and its subtests finish.
//
// With the environment variable [EnvLayout] set to "converted" or
// "unpartitioned", URL returns [ConvertedURL] or [UnpartitionedURL]
// instead, so that any package's tests run on that layout of events
// (docs/testing.md).
func URL(t testing.TB) string {
	t.Helper()
	switch os.Getenv(EnvLayout) {
	case "converted":
		return ConvertedURL(t)
	case "unpartitioned":
		return UnpartitionedURL(t)
	}
	return PartitionedURL(t)
}

// EnvLayout names the environment variable that selects the layout of
// events [URL] gives: "" (partitioned, as a new database is),
// "converted" or "unpartitioned".
const EnvLayout = "TALLY_TEST_EVENTS_LAYOUT"

// PartitionedURL is [URL] whatever [EnvLayout] says: a fresh schema with
// every migration applied, whose events is partitioned by month as a new
// database's is, for the tests of that layout itself (partitions,
// retention).
func PartitionedURL(t testing.TB) string {
	t.Helper()
	u := EmptyURL(t)
	ctx := context.Background()
	db, err := pgstore.Open(ctx, u, pgstore.Options{})
	if err != nil {
		t.Fatalf("pgtest: open: %v", err)
	}
	defer db.Close()
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatalf("pgtest: migrate: %v", err)
	}
	return u
}

// LastUnpartitioned is the last migration of the layout whose events
// table is one plain table; the next one (00015) partitions it by month.
const LastUnpartitioned = 14

// ConvertedURL is [URL] for a schema that had the unpartitioned layout,
// with one event stored, when the partitioning migration converted it: it
// is migrated to [LastUnpartitioned], given an event (event_id
// "pgtest-legacy", 2000-01-01), migrated to the end (which attaches the
// table as events_legacy), and that event deleted again, so that the
// schema holds no event, as URL's does, yet keeps the converted layout.
func ConvertedURL(t testing.TB) string {
	t.Helper()
	u := EmptyURL(t)
	ctx := context.Background()
	db, err := pgstore.Open(ctx, u, pgstore.Options{})
	if err != nil {
		t.Fatalf("pgtest: open: %v", err)
	}
	defer db.Close()
	if _, err := db.MigrateTo(ctx, LastUnpartitioned); err != nil {
		t.Fatalf("pgtest: migrate to %d: %v", LastUnpartitioned, err)
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer conn.Close(ctx)
	const row = `INSERT INTO events (event_id, timestamp, event_type, platform, cloud, resource_type, resource_id,
                    project_id, source, payload, category, received_at)
VALUES ('pgtest-legacy', '2000-01-01 00:00:00+00', 'compute.instance.create.end', 'openstack', 'pgtest',
        'instance', 'pgtest-legacy', 'p', 'collector', '{}', 'compute', now())`
	if _, err := conn.Exec(ctx, row); err != nil {
		t.Fatalf("pgtest: store the legacy event: %v", err)
	}
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatalf("pgtest: migrate: %v", err)
	}
	if _, err := conn.Exec(ctx, `DELETE FROM events WHERE event_id = 'pgtest-legacy'`); err != nil {
		t.Fatalf("pgtest: delete the legacy event: %v", err)
	}
	return u
}

// UnpartitionedURL is [URL] for a schema whose events table is one plain
// table, as on a database where timescaledb's branch of migration 00001
// left it so (00015 then partitions nothing): migrated to the end, then
// events turned back into a plain table by [Unpartition]. It holds no
// event.
func UnpartitionedURL(t testing.TB) string {
	t.Helper()
	u := PartitionedURL(t)
	if err := Unpartition(context.Background(), u); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return u
}

// unpartitionSQL replaces events by one plain table with the same
// columns, defaults and indexes (events must hold no row).
const unpartitionSQL = `
CREATE TABLE events_plain (LIKE events INCLUDING DEFAULTS);
ALTER SEQUENCE events_feed_seq OWNED BY events_plain.seq;
DROP TABLE events;
ALTER TABLE events_plain RENAME TO events;
ALTER TABLE events ADD PRIMARY KEY (event_id, timestamp);
CREATE INDEX idx_events_resource ON events (cloud, resource_type, resource_id, timestamp);
CREATE INDEX idx_events_time ON events (timestamp, event_id COLLATE "C");
CREATE INDEX idx_events_project ON events (project_id, timestamp, event_id COLLATE "C");
CREATE INDEX idx_events_type ON events (event_type, timestamp, event_id COLLATE "C");
CREATE INDEX idx_events_resource_id ON events (resource_id, timestamp, event_id COLLATE "C");
CREATE INDEX idx_events_feed ON events (tx, seq);
CREATE INDEX idx_events_feed_legacy ON events (timestamp, event_id COLLATE "C") WHERE tx IS NULL;`

// Unpartition turns the partitioned events table of the migrated, empty
// schema url selects into one plain table with the same columns,
// defaults and indexes, dropping its partitions: the baseline layout of
// the partitioned table's cost (BenchmarkStoreUnpartitioned in
// store/pgstore, tally-bench's partitioned-ingest phase). Errors: the
// connection's or PostgreSQL's.
func Unpartition(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, unpartitionSQL); err != nil {
		return fmt.Errorf("unpartition events: %w", err)
	}
	return nil
}

// EmptyURL is [URL] without the migrations: the schema exists and holds
// nothing.
func EmptyURL(t testing.TB) string {
	t.Helper()
	pool, base := admin(t)
	ctx := context.Background()

	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	schema := "t_" + hex.EncodeToString(b[:])
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("pgtest: create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", schema, err)
		}
	})

	u, err := withSearchPath(base, schema)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return u
}

// DB returns a [pgstore.DB] on a fresh, migrated schema (see [URL]),
// closed on cleanup.
func DB(t testing.TB, opts pgstore.Options) *pgstore.DB {
	t.Helper()
	return Open(t, URL(t), opts)
}

// Open returns a [pgstore.DB] on the database at url (as [URL] returns
// it), closed on cleanup.
func Open(t testing.TB, url string, opts pgstore.Options) *pgstore.DB {
	t.Helper()
	db, err := pgstore.Open(context.Background(), url, opts)
	if err != nil {
		t.Fatalf("pgtest: open: %v", err)
	}
	t.Cleanup(db.Close)
	return db
}

func withSearchPath(base, schema string) (string, error) {
	if strings.HasPrefix(base, "postgres://") || strings.HasPrefix(base, "postgresql://") {
		u, err := url.Parse(base)
		if err != nil {
			return "", fmt.Errorf("parse %s: %w", EnvURL, err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	return base + " search_path=" + schema, nil
}

// LeaveInvalidIndex leaves, in the migrated schema of url, an index that
// PostgreSQL marks INVALID, as a CREATE INDEX CONCURRENTLY that failed
// midway does: a unique build over two dead letters of one reason fails
// after its first phase. It returns the index's name.
func LeaveInvalidIndex(t testing.TB, url string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO dead_letters (raw, raw_size, reason, event_id, received_at)
VALUES ('{}', 2, 'a', 'e1', now()), ('{}', 2, 'a', 'e2', now())`); err != nil {
		t.Fatal(err)
	}
	const name = "idx_broken"
	if _, err := conn.Exec(ctx, `CREATE UNIQUE INDEX CONCURRENTLY `+name+` ON dead_letters (reason)`); err == nil {
		t.Fatal("the unique build over duplicates succeeded")
	}
	return name
}
