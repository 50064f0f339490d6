package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tallyhq/tally/store"
)

// ErrSchemaOlder is returned (wrapped) by [DB.CheckReplicaOf] when the
// read database has not applied every migration this binary embeds: its
// reads would fail on a table or column it lacks.
var ErrSchemaOlder = errors.New("pgstore: the read database's schema is older than this binary")

// ErrNotStandby is returned (wrapped) by [DB.CheckReplicaOf] when the read
// database is neither a standby of the primary nor the primary's own
// database: a promoted standby (it no longer follows the primary, its
// answers diverge), another cluster or another schema.
var ErrNotStandby = errors.New("pgstore: the read database is not a standby of the primary")

// serverIdentity is what tells two databases apart: the cluster's system
// identifier (a standby shares its primary's), whether it is in recovery,
// its postmaster's start (one server), the database and the schema.
type serverIdentity struct {
	sysID      int64
	inRecovery bool
	started    time.Time
	database   string
	schema     string
	version    int64 // the newest applied migration; 0: none
}

func (db *DB) identity(ctx context.Context) (serverIdentity, error) {
	var id serverIdentity
	err := db.conn.pool.QueryRow(ctx, `SELECT (SELECT system_identifier FROM pg_control_system()), pg_is_in_recovery(),
       pg_postmaster_start_time(), current_database()::text, coalesce(current_schema()::text, '')`).
		Scan(&id.sysID, &id.inRecovery, &id.started, &id.database, &id.schema)
	if err != nil {
		return id, fmt.Errorf("pgstore: identify the database: %w", interpretError(err))
	}
	var has bool
	if err := db.conn.pool.QueryRow(ctx, `SELECT to_regclass('goose_db_version') IS NOT NULL`).Scan(&has); err != nil {
		return id, fmt.Errorf("pgstore: read the schema version: %w", interpretError(err))
	}
	if has {
		// goose's current version: the newest migration applied.
		if err := db.conn.pool.QueryRow(ctx, `SELECT coalesce(max(version_id), 0) FROM goose_db_version WHERE is_applied AND version_id > 0`).Scan(&id.version); err != nil {
			return id, fmt.Errorf("pgstore: read the schema version: %w", interpretError(err))
		}
	}
	return id, nil
}

// CheckReplicaOf checks db, a database tallyd reads but never migrates
// (--read-database-url), against primary, before it serves reads
// (docs/scale-out.md, Read replicas):
//   - its schema must be at the newest migration this binary embeds:
//     [ErrSchemaOlder] (the replica has not replayed the primary's
//     migrations yet, or is not a replica of it) or [ErrSchemaNewer],
//     naming both versions;
//   - it must be a standby (in recovery) of primary's cluster, or the
//     primary's own database (same reports it: it serves, with nothing
//     taken off the primary); else [ErrNotStandby].
//
// A standby it accepts is remembered: once that db is no longer in
// recovery (promoted, it stops following the primary), [DB.ReplayedAt]
// fails with store.ErrUnavailable, so tallyd reads from the primary.
func (db *DB) CheckReplicaOf(ctx context.Context, primary *DB) (same bool, err error) {
	r, err := db.identity(ctx)
	if err != nil {
		return false, err
	}
	if newest := newestMigration(); r.version != newest {
		sentinel := ErrSchemaOlder
		if r.version > newest {
			sentinel = ErrSchemaNewer
		}
		return false, fmt.Errorf("%w: it is at migration %05d, this binary at %05d (tallyd migrates the primary only; a standby replays its migrations)", sentinel, r.version, newest)
	}
	p, err := primary.identity(ctx)
	if err != nil {
		return false, err
	}
	switch {
	case r.sysID != p.sysID:
		return false, fmt.Errorf("%w: its system identifier %d is not the primary's %d (another cluster)", ErrNotStandby, r.sysID, p.sysID)
	case r.inRecovery:
		db.conn.standby.Store(true)
		return false, nil
	case r.started.Equal(p.started) && r.database == p.database && r.schema == p.schema:
		return true, nil
	}
	return false, fmt.Errorf("%w: it is not in recovery and not the primary's own database and schema (a promoted standby, whose answers diverge from the primary's, or another database or schema)", ErrNotStandby)
}

// ReplayedAt reports how current db is when it is a streaming replica
// (tallyd --read-database-url, docs/scale-out.md, Read replicas): the
// commit instant, on the primary, of the last transaction the replica has
// replayed (pg_last_xact_replay_timestamp), so what the primary committed
// until then is in what db reads. On a database that is not in recovery
// (a primary) it is the database's now(): it holds everything committed.
// The zero time means a replica that has replayed no transaction since it
// started, whose freshness is unknown. An idle primary commits nothing,
// so the instant can be old while the replica is current: it is a lower
// bound. Errors wrap store.ErrUnavailable when the server does not answer,
// and when db, a standby by [DB.CheckReplicaOf], is no longer in recovery
// (promoted: it no longer follows the primary, so its answers diverge).
func (db *DB) ReplayedAt(ctx context.Context) (time.Time, error) {
	var (
		at         *time.Time
		inRecovery bool
	)
	pc, err := db.conn.acquireConn(ctx) // bounded by the acquire timeout, as every read
	if err != nil {
		return time.Time{}, fmt.Errorf("pgstore: read the replay position: %w", interpretError(err))
	}
	defer pc.Release()
	err = pc.QueryRow(ctx, `SELECT pg_is_in_recovery(), CASE WHEN pg_is_in_recovery() THEN pg_last_xact_replay_timestamp() ELSE now() END`).Scan(&inRecovery, &at)
	if err != nil {
		return time.Time{}, fmt.Errorf("pgstore: read the replay position: %w", interpretError(err))
	}
	if !inRecovery && db.conn.standby.Load() {
		return time.Time{}, errors.Join(store.ErrUnavailable, errors.New("pgstore: read the replay position: the standby is no longer in recovery (promoted): it no longer follows the primary"))
	}
	if at == nil {
		return time.Time{}, nil
	}
	return at.UTC(), nil
}
