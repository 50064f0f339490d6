package pgstore

import (
	"context"
	"fmt"
	"time"
)

// ReplayedAt reports how current db is when it is a streaming replica
// (tallyd --read-database-url, docs/scale-out.md, Read replicas): the
// commit instant, on the primary, of the last transaction the replica has
// replayed (pg_last_xact_replay_timestamp), so what the primary committed
// until then is in what db reads. On a database that is not in recovery
// (a primary) it is the database's now(): it holds everything committed.
// The zero time means a replica that has replayed no transaction since it
// started, whose freshness is unknown. An idle primary commits nothing,
// so the instant can be old while the replica is current: it is a lower
// bound. Errors wrap store.ErrUnavailable when the server does not answer.
func (db *DB) ReplayedAt(ctx context.Context) (time.Time, error) {
	var at *time.Time
	err := db.conn.pool.QueryRow(ctx, `SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_xact_replay_timestamp() ELSE now() END`).Scan(&at)
	if err != nil {
		return time.Time{}, fmt.Errorf("pgstore: read the replay position: %w", interpretError(err))
	}
	if at == nil {
		return time.Time{}, nil
	}
	return at.UTC(), nil
}
