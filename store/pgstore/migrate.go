package pgstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/pressly/goose/v3/lock"
)

// migrationLock serialises migrations of one schema: goose takes it on the
// connection it then runs every migration on, and releases it when done
// (goose's Provider runs without any lock unless it is given a session
// locker).
//
// It is a session-level advisory lock whose key is a hash of the schema the
// connection's search_path selects, so migrations of two schemas of one
// database (the test suite's, say) do not wait for each other. A waiter
// polls pg_try_advisory_lock, from every 10 ms up to every 200 ms (goose's
// own lock.NewPostgresSessionLocker polls every few seconds), so replicas
// that start together wait about as long as the first one migrates. It does
// not block in pg_advisory_lock: a statement waiting there holds a
// snapshot, and CREATE INDEX CONCURRENTLY (00011) waits for every older
// snapshot of the database, so the holder and the waiter would deadlock
// (PostgreSQL then fails one of them, the index build included). Between
// two tries the waiter holds none. The wait is bounded by the caller's
// context, and the server releases the lock when a holder's session ends, a
// crashed one included.
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
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		var locked bool
		if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock(`+migrationLockKey+`)`).Scan(&locked); err != nil {
			return fmt.Errorf("pgstore: take the migration lock: %w", err)
		}
		if locked {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgstore: take the migration lock: %w", ctx.Err())
		case <-time.After(wait):
		}
	}
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
