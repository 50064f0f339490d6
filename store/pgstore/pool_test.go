package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"

	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store"
	"github.com/tallyhq/tally/store/pgstore"
)

// lockTable holds an ACCESS EXCLUSIVE lock on table from a connection of
// its own until the returned function is called (or the test ends).
func lockTable(t *testing.T, url, table string) (release func()) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			_ = tx.Rollback(ctx)
			_ = c.Close(ctx)
		})
	}
	t.Cleanup(release)
	return release
}

// Timeouts: "A lock on a table holds requests for as long as it
// lasts" no more: the statement timeout cancels the waiting statement and
// the store says store.ErrUnavailable (answered 503 with Retry-After).
func TestStatementTimeout(t *testing.T) {
	u := pgtest.URL(t)
	db := pgtest.Open(t, u, pgstore.Options{StatementTimeout: 300 * time.Millisecond})
	lockTable(t, u, "resource_types")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := db.Ingest().ResourceTypes(ctx)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a read behind a table lock: %v, want store.ErrUnavailable", err)
	}
}

// Readiness: Ping does not queue behind request traffic. With
// the pool's only connection stuck behind a table lock, Ping still answers.
func TestPingDoesNotQueueBehindTraffic(t *testing.T) {
	u := pgtest.URL(t) + "&application_name=tally_ping_test"
	db := pgtest.Open(t, u, pgstore.Options{MaxConns: 1, StatementTimeout: -1})
	release := lockTable(t, u, "resource_types")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stuck := make(chan error, 1)
	go func() {
		_, err := db.Ingest().ResourceTypes(ctx)
		stuck <- err
	}()
	// The read holds the pool's one connection, waiting on the lock.
	waitForLockWaiters(ctx, t, u, "tally_ping_test", 1)
	if err := db.Ping(ctx); err != nil {
		t.Errorf("Ping with the pool busy: %v", err)
	}
	release()
	if err := <-stuck; err != nil {
		t.Errorf("the read after the lock: %v", err)
	}
}

// Stale connections: after every connection of the pool is
// broken (as a PostgreSQL restart breaks them), the first request
// succeeds: connections are checked when taken from the pool (their socket
// peeked at, see checkOnAcquire), and a broken one is replaced before any
// statement is sent. pg_terminate_backend waits for each backend to exit,
// as a restart ends them all before the server accepts again.
func TestFirstRequestAfterBrokenConnectionsSucceeds(t *testing.T) {
	u := pgtest.URL(t) + "&application_name=tally_stale_test"
	db := pgtest.Open(t, u, pgstore.Options{MaxConns: 4})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Fill the pool with idle connections.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { _, _ = db.Ingest().ResourceTypes(ctx) })
	}
	wg.Wait()
	admin, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var killed int
	if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity
		WHERE application_name = 'tally_stale_test' AND pid <> pg_backend_pid()`).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed == 0 {
		t.Fatal("no pooled connection to break")
	}
	for i := range 8 {
		if _, err := db.Ingest().ResourceTypes(ctx); err != nil {
			t.Fatalf("request %d after %d broken connections: %v", i+1, killed, err)
		}
	}
}

// waitForLockWaiters waits (bounded by ctx and 500 polls) until n sessions
// whose application_name is app wait on a lock.
func waitForLockWaiters(ctx context.Context, t *testing.T, url, app string, n int) {
	t.Helper()
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for i := 0; ; i++ {
		var waiting int
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		if i == 500 {
			t.Fatalf("%d of %d sessions waited on the lock", waiting, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Timeouts: "A default statement or request timeout,
// configurable, answered 503 (or 504) with a problem body, nothing
// half-written" holds for the wait for a pool connection too. Both
// connections of the pool are held by Commits stuck on a table lock,
// without a statement timeout; a further Commit (the pgx-direct path) and
// a read of another table (the database/sql path) then fail with
// store.ErrUnavailable while the lock is still held, which only the
// acquire timeout can explain (their ctx has a minute left), and the shed
// batch is not stored. Ping keeps answering (its own connection). After
// the lock is released every call succeeds. Both on Open's pool and on a
// caller's pool given to New.
func TestAcquireTimeout(t *testing.T) {
	const app = "tally_acquire_test"
	for _, tc := range []struct {
		name string
		open func(t *testing.T, u string) *pgstore.DB
	}{
		{"Open", func(t *testing.T, u string) *pgstore.DB {
			return pgtest.Open(t, u, pgstore.Options{MaxConns: 2, StatementTimeout: -1, AcquireTimeout: 200 * time.Millisecond})
		}},
		{"New", func(t *testing.T, u string) *pgstore.DB {
			pool, err := pgxpool.New(context.Background(), u+"&pool_max_conns=2")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			db, err := pgstore.New(pool, pgstore.Options{AcquireTimeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(db.Close)
			return db
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := pgtest.URL(t) + "&application_name=" + app
			db := tc.open(t, u)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			// the partition of t0 exists, as the months ahead do in service
			if _, err := db.MakePartitions(ctx, t0, t0); err != nil {
				t.Fatal(err)
			}
			release := lockTable(t, u, "events")
			batch := func(id string) ingest.Batch { return ingest.Batch{Events: []event.Event{ev(id, t0)}} }

			stuck := make(chan error, 2)
			for i := range 2 {
				go func() {
					_, err := db.Ingest().Commit(ctx, batch(fmt.Sprintf("held-%d", i)))
					stuck <- err
				}()
			}
			waitForLockWaiters(ctx, t, u, app, 2)

			_, err := db.Ingest().Commit(ctx, batch("shed"))
			if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "acquire timeout") {
				t.Errorf("Commit with every connection stuck: %v, want store.ErrUnavailable (acquire timeout)", err)
			}
			if _, err := db.Ingest().ResourceTypes(ctx); !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "acquire timeout") {
				t.Errorf("ResourceTypes with every connection stuck: %v, want store.ErrUnavailable (acquire timeout)", err)
			}
			if _, err := db.ReplayedAt(ctx); !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "acquire timeout") {
				t.Errorf("ReplayedAt with every connection stuck: %v, want store.ErrUnavailable (acquire timeout)", err)
			}
			if tc.name == "Open" {
				if err := db.Ping(ctx); err != nil {
					t.Errorf("Ping with every connection stuck: %v, want nil (readiness has its own connection)", err)
				}
			}

			release()
			for range 2 {
				if err := <-stuck; err != nil {
					t.Errorf("a held Commit after the lock: %v", err)
				}
			}
			if got, want := storedIDs(ctx, t, db), []string{"held-0", "held-1"}; !cmp.Equal(want, got) {
				t.Errorf("events after the lock (-want +got):\n%s", cmp.Diff(want, got))
			}
			if _, err := db.Ingest().Commit(ctx, batch("shed")); err != nil {
				t.Errorf("the shed batch sent again: %v", err)
			}
			if _, err := db.Ingest().ResourceTypes(ctx); err != nil {
				t.Errorf("ResourceTypes after the lock: %v", err)
			}
			if got, want := storedIDs(ctx, t, db), []string{"held-0", "held-1", "shed"}; !cmp.Equal(want, got) {
				t.Errorf("events after the retry (-want +got):\n%s", cmp.Diff(want, got))
			}
		})
	}
}

// storedIDs returns the event_id of every stored event, in order.
func storedIDs(ctx context.Context, t *testing.T, db *pgstore.DB) []string {
	t.Helper()
	evs, err := db.Ingest().Events(ctx, ingest.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range evs {
		ids = append(ids, e.Event.EventID)
	}
	return ids
}

// "A replica that stops inside its transaction blocks every other
// replica's writes to the same rows": every session of the pool carries
// idle_in_transaction_session_timeout, so the server ends a transaction
// left idle (its process stopped) and the other writer proceeds.
func TestIdleInTransactionTimeout(t *testing.T) {
	u := pgtest.URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	show := func(db *pgstore.DB) string {
		t.Helper()
		var v string
		if err := pgstore.PoolOf(db).QueryRow(ctx, "SHOW idle_in_transaction_session_timeout").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name string
		opts pgstore.Options
		want string
	}{
		{"default", pgstore.Options{}, "30s"},
		{"option", pgstore.Options{IdleInTransactionTimeout: 300 * time.Millisecond}, "300ms"},
		{"none", pgstore.Options{IdleInTransactionTimeout: -1}, "0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, show(pgtest.Open(t, u, tc.opts))); diff != "" {
				t.Errorf("SHOW idle_in_transaction_session_timeout (-want +got):\n%s", diff)
			}
		})
	}

	stuck := pgtest.Open(t, u, pgstore.Options{IdleInTransactionTimeout: 300 * time.Millisecond})
	tx, err := pgstore.PoolOf(stuck).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "LOCK TABLE resource_types IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	// The transaction now sits idle, as in a stopped replica; another
	// replica's statement waits for its lock only until the server ends it
	// (well within that replica's 5 s statement timeout).
	other := pgtest.Open(t, u, pgstore.Options{StatementTimeout: 5 * time.Second})
	if _, err := other.Ingest().ResourceTypes(ctx); err != nil {
		t.Fatalf("the other writer did not proceed: %v", err)
	}
}

// Issue "Operating tallyd", point 6: application_name is set on every
// connection (the pool's, the readiness probe's, the leader's), the URL's
// own application_name winning over Options.ApplicationName.
func TestApplicationNameOnEveryConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := pgtest.URL(t)
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, tc := range []struct {
		name, url, option, want string
	}{
		{"the option when the URL sets none", base, "tallyd_opt_" + suffix, "tallyd_opt_" + suffix},
		{"the URL's own wins", base + "&application_name=tally_url_" + suffix, "tallyd_lost_" + suffix, "tally_url_" + suffix},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := pgtest.Open(t, tc.url, pgstore.Options{ApplicationName: tc.option})
			if _, err := db.Ingest().ResourceTypes(ctx); err != nil {
				t.Fatal(err)
			}
			if err := db.Ping(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Leader(ctx); err != nil {
				t.Fatal(err)
			}
			if got := db.PoolConfig().ApplicationName; got != tc.want {
				t.Errorf("PoolConfig().ApplicationName = %q, want %q", got, tc.want)
			}
			// The pool's connection, the probe's and the leader's: three
			// sessions at least, none under the option's name when the URL
			// names one.
			admin, err := pgxpool.New(ctx, base)
			if err != nil {
				t.Fatal(err)
			}
			defer admin.Close()
			var named, lost int
			if err := admin.QueryRow(ctx,
				`SELECT count(*) FILTER (WHERE application_name = $1), count(*) FILTER (WHERE application_name = $2 AND $1 <> $2)
				FROM pg_stat_activity`, tc.want, tc.option).Scan(&named, &lost); err != nil {
				t.Fatal(err)
			}
			if named < 3 || lost != 0 {
				t.Errorf("sessions named %q: %d, want at least 3 (pool, probe, leader); named %q: %d, want 0", tc.want, named, tc.option, lost)
			}
		})
	}
}
