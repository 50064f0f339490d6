package pgstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
)

// leaderLockKey is the SQL expression of the leader lock's key: a hash of
// the schema, as the migration lock's, so two deployments in two schemas
// of one database have a leader each.
const leaderLockKey = `hashtextextended('tally leader ' || coalesce(current_schema(), ''), 0)`

// leader is the connection that holds the leader lock, nil when this DB
// does not hold it.
type leader struct {
	mu   sync.Mutex
	conn *pgx.Conn
}

// Leader reports whether db leads the processes that share its schema:
// whether it holds a session-level advisory lock (keyed by the schema) on
// a connection of its own, outside the pool, which it tries to take when
// it does not. One process at a time holds it. When the holder's session
// ends (its process stops or crashes, [DB.Close], the network or the
// server drops the connection) PostgreSQL releases it, and the next call
// of another process takes it; a holder that finds its connection dead
// reports false and tries again. tallyd exports the fleet-wide gauge
// tally_current_resources from the leader alone, so that a sum over
// replicas counts each resource once (docs/operations.md, Metrics).
// Errors: the server cannot be reached (wrapping store.ErrUnavailable).
func (db *DB) Leader(ctx context.Context) (bool, error) {
	l := &db.leader
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		if err := l.conn.Ping(ctx); err == nil {
			return true, nil
		}
		_ = l.conn.Close(context.WithoutCancel(ctx))
		l.conn = nil
	}
	conn, err := pgx.ConnectConfig(ctx, db.conn.pool.Config().ConnConfig.Copy())
	if err != nil {
		return false, fmt.Errorf("pgstore: connect for the leader lock: %w", interpretError(err))
	}
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(`+leaderLockKey+`)`).Scan(&locked); err != nil || !locked {
		_ = conn.Close(context.WithoutCancel(ctx))
		if err != nil {
			return false, fmt.Errorf("pgstore: take the leader lock: %w", interpretError(err))
		}
		return false, nil
	}
	l.conn = conn
	return true, nil
}

// closeLeader ends the leader's session, releasing the lock.
func (db *DB) closeLeader() {
	l := &db.leader
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		_ = l.conn.Close(context.Background())
		l.conn = nil
	}
}
