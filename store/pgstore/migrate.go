package pgstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/pressly/goose/v3/lock"
)

// migrationLock serialises migrations of one schema: goose takes it on the
// connection it then runs every migration on, and releases it when done
// (goose's Provider runs without any lock unless it is given a session
// locker).
//
// It is a session-level advisory lock whose key is a hash of the schema the
// connection's search_path selects, so migrations of two schemas of one
// database (the test suite's, say) do not wait for each other. Unlike
// goose's own lock.NewPostgresSessionLocker, which polls
// pg_try_advisory_lock every few seconds, pg_advisory_lock blocks in the
// server and returns the moment the holder releases, so replicas that start
// together wait only as long as the first one migrates. The wait is bounded
// by the caller's context (pgx cancels the query when it ends), and the
// server releases the lock when a holder's session ends, a crashed one
// included.
type migrationLock struct{}

var _ lock.SessionLocker = migrationLock{}

// migrationLockKey is the SQL expression of the lock key.
const migrationLockKey = `hashtextextended('tally migrate ' || coalesce(current_schema(), ''), 0)`

// SessionLock implements lock.SessionLocker.
func (migrationLock) SessionLock(ctx context.Context, conn *sql.Conn) error {
	// A migration may run longer than the pool's statement_timeout (an
	// index on a large table), and so may the wait for another replica's
	// migrations: no statement timeout on this session until the unlock.
	if _, err := conn.ExecContext(ctx, `SET statement_timeout = 0`); err != nil {
		return fmt.Errorf("pgstore: take the migration lock: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(`+migrationLockKey+`)`); err != nil {
		return fmt.Errorf("pgstore: take the migration lock: %w", err)
	}
	return nil
}

// SessionUnlock implements lock.SessionLocker.
func (migrationLock) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	var released bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_advisory_unlock(`+migrationLockKey+`)`).Scan(&released); err != nil {
		return fmt.Errorf("pgstore: release the migration lock: %w", err)
	}
	if !released {
		return fmt.Errorf("pgstore: release the migration lock: this session did not hold it")
	}
	if _, err := conn.ExecContext(ctx, `RESET statement_timeout`); err != nil {
		return fmt.Errorf("pgstore: release the migration lock: %w", err)
	}
	return nil
}
