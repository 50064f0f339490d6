package pgstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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

// Issue 12, Timeouts: "A lock on a table holds requests for as long as it
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

// Issue 12, Readiness: Ping does not queue behind request traffic. With
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
	// The read holds the pool's one connection, waiting on the lock
	// (bounded wait for it to get there).
	admin, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for i := 0; ; i++ {
		var waiting int
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = 'tally_ping_test' AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if i == 500 {
			t.Fatal("the read never waited on the lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := db.Ping(ctx); err != nil {
		t.Errorf("Ping with the pool busy: %v", err)
	}
	release()
	if err := <-stuck; err != nil {
		t.Errorf("the read after the lock: %v", err)
	}
}

// Issue 12, Stale connections: after every connection of the pool is
// broken (as a PostgreSQL restart breaks them), the first request
// succeeds: connections are pinged when taken from the pool, and a broken
// one is replaced before any statement is sent.
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
	if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
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
