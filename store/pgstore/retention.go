package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest/projection"
)

// Retention (docs/operations.md, Retention). The events go by whole
// monthly partitions, in four steps, each safe to interrupt and rerun:
//
//  1. Under the partitions' advisory lock, the horizon (the upper bound of
//     the newest partition wholly older than now - KeepEvents) is written
//     to events_horizon, and each partition before it gets the constraint
//     events_retired, CHECK (false) NOT VALID: from then on no row lands
//     in it, whichever replica inserts and however old its cache is (the
//     insert fails, Commit reads the horizon again and refuses the event
//     as a dead letter). Taking the partition's lock waits for every
//     transaction that wrote to it, so its rows are final.
//  2. For every resource with events before the horizon, its checkpoint at
//     the horizon: the fold of its previous checkpoint and its events
//     before the horizon, in transactions of BatchSize resources. Folds
//     read a checkpoint and only the events from its at on, so the answers
//     are the same before and after step 3.
//  3. Each retired partition is detached (DETACH PARTITION CONCURRENTLY:
//     ingestion and reads never wait for it) and dropped. A table left
//     detached but not dropped by an interrupted run is found by its
//     constraint and dropped by the next.
//  4. Dead letters, audit rows, idempotency keys and soft-deleted
//     correlated events older than their Keep* are deleted, BatchSize rows
//     per statement.
//
// events_legacy (a converted database's old table, FROM MINVALUE) goes
// only once its whole range is before the horizon.

// RetentionOptions says what [DB.Retention] keeps. A zero duration keeps
// everything of its kind.
type RetentionOptions struct {
	// KeepEvents keeps the events of the last KeepEvents: the monthly
	// partitions wholly older than now - KeepEvents are dropped, after the
	// checkpoints of their resources are written. Only whole months go,
	// so up to a month more is kept.
	KeepEvents time.Duration
	// KeepDeadLetters keeps the dead letters received in the last
	// KeepDeadLetters.
	KeepDeadLetters time.Duration
	// KeepAudit keeps the audit rows of the last KeepAudit.
	KeepAudit time.Duration
	// KeepIdempotencyKeys keeps the correlated events' idempotency keys
	// bound in the last KeepIdempotencyKeys.
	KeepIdempotencyKeys time.Duration
	// KeepDeletedEvents keeps the correlated events soft-deleted in the
	// last KeepDeletedEvents; older ones are deleted with their
	// idempotency keys.
	KeepDeletedEvents time.Duration
	// BatchSize bounds each deletion (rows per statement) and each
	// checkpoint transaction (resources); 0 means
	// [DefaultRetentionBatchSize].
	BatchSize int
}

// DefaultRetentionBatchSize is RetentionOptions.BatchSize when 0.
const DefaultRetentionBatchSize = 5000

// RetentionResult is what [DB.Retention] did.
type RetentionResult struct {
	// Horizon is the events horizon after the run: events before it are no
	// longer kept (zero: every event is kept).
	Horizon time.Time
	// OldestEvent is the timestamp of the oldest event kept after the run
	// (zero when none is stored).
	OldestEvent time.Time
	// Checkpoints is how many resource checkpoints the run wrote.
	Checkpoints int
	// PartitionsDropped names the partitions of events dropped.
	PartitionsDropped []string
	// EventsDropped counts the events those partitions held.
	EventsDropped int64
	// DeadLetters, Audit, IdempotencyKeys and DeletedEvents count the rows
	// deleted of each kind.
	DeadLetters, Audit, IdempotencyKeys, DeletedEvents int64
}

// Retention applies o once, with the DB's clock (docs/operations.md,
// Retention; the steps at the top of retention.go). It may run beside
// serving replicas; several runs at once (in any processes) are
// serialised by a session-level advisory lock, the later waiting for the
// earlier. Rebuilding the projection, and folding a late event,
// give the same rows before and after the old partitions are dropped.
// Errors: a negative duration or batch size; the database's (a lock
// wait past 2 s included, store.ErrUnavailable), after which a rerun
// finishes the work.
func (db *DB) Retention(ctx context.Context, o RetentionOptions) (RetentionResult, error) {
	var res RetentionResult
	if o.KeepEvents < 0 || o.KeepDeadLetters < 0 || o.KeepAudit < 0 || o.KeepIdempotencyKeys < 0 || o.KeepDeletedEvents < 0 || o.BatchSize < 0 {
		return res, errors.New("pgstore: retention: a Keep duration or the batch size is negative")
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultRetentionBatchSize
	}
	c := db.conn
	unlock, err := c.lockRetention(ctx)
	if err != nil {
		return res, fmt.Errorf("pgstore: retention: %w", interpretError(err))
	}
	defer unlock()
	now := c.now().UTC()
	if o.KeepEvents > 0 {
		if res, err = c.retireEvents(ctx, now.Add(-o.KeepEvents), o.BatchSize); err != nil {
			return res, fmt.Errorf("pgstore: retention: %w", interpretError(err))
		}
	} else if res.Horizon, err = c.cachedHorizon(ctx, true); err != nil {
		return res, fmt.Errorf("pgstore: retention: %w", interpretError(err))
	}
	for _, p := range []struct {
		keep  time.Duration
		n     *int64
		query string
	}{
		{o.KeepDeadLetters, &res.DeadLetters, `DELETE FROM dead_letters WHERE id IN (SELECT id FROM dead_letters WHERE received_at < $1 ORDER BY received_at, id LIMIT $2)`},
		{o.KeepAudit, &res.Audit, `DELETE FROM audit_log WHERE id IN (SELECT id FROM audit_log WHERE at < $1 ORDER BY at, id LIMIT $2)`},
		{o.KeepIdempotencyKeys, &res.IdempotencyKeys, `DELETE FROM correlated_event_idempotency_keys WHERE (organization, user_id, key) IN
(SELECT organization, user_id, key FROM correlated_event_idempotency_keys WHERE bound_at < $1 ORDER BY bound_at LIMIT $2)`},
		{o.KeepDeletedEvents, &res.DeletedEvents, `DELETE FROM correlated_events WHERE id IN
(SELECT id FROM correlated_events WHERE deleted_at < $1 ORDER BY deleted_at LIMIT $2)`},
	} {
		if p.keep == 0 {
			continue
		}
		if *p.n, err = c.deleteInBatches(ctx, p.query, now.Add(-p.keep), o.BatchSize); err != nil {
			return res, fmt.Errorf("pgstore: retention: %w", interpretError(err))
		}
	}
	if err := c.pool.QueryRow(ctx, `SELECT coalesce(min(timestamp), '0001-01-01 00:00:00+00') FROM events`).Scan(&res.OldestEvent); err != nil {
		return res, fmt.Errorf("pgstore: retention: oldest event: %w", interpretError(err))
	}
	if res.OldestEvent.Year() == 1 {
		res.OldestEvent = time.Time{}
	}
	res.OldestEvent = res.OldestEvent.UTC()
	return res, nil
}

// retentionLockKey is the SQL expression of the session-level advisory
// lock key that serialises the retention runs of one schema.
const retentionLockKey = `hashtextextended('tally retention ' || coalesce(current_schema(), ''), 0)`

// lockRetention waits (as long as ctx allows, without the statement
// timeout) until no other run holds the retention lock, takes it on a
// connection of its own and returns its release. Two runs at once (two
// cron jobs, two hosts) both detaching one partition failed ("already
// pending detach", "does not exist"): the later now waits for the
// earlier, then finds its work done.
func (c *conn) lockRetention(ctx context.Context) (unlock func(), err error) {
	pc, err := c.acquireConn(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire: %w", err)
	}
	if _, err := pc.Exec(ctx, `SET statement_timeout = 0`); err != nil {
		pc.Release()
		return nil, fmt.Errorf("retention lock: %w", err)
	}
	if _, err := pc.Exec(ctx, `SELECT pg_advisory_lock(`+retentionLockKey+`)`); err != nil {
		// a cancelled wait may leave the connection unusable: close it
		_ = pc.Conn().Close(context.WithoutCancel(ctx))
		pc.Release()
		return nil, fmt.Errorf("retention lock: %w", err)
	}
	return func() {
		bg := context.WithoutCancel(ctx)
		if _, err := pc.Exec(bg, `SELECT pg_advisory_unlock(`+retentionLockKey+`)`); err != nil {
			_ = pc.Conn().Close(bg) // the session's end releases the lock
		} else {
			_, _ = pc.Exec(bg, `RESET statement_timeout`)
		}
		pc.Release()
	}, nil
}

// deleteInBatches runs query ($1 the cut-off, $2 the batch size) until it
// deletes fewer rows than a batch, each run its own transaction, and
// returns the rows deleted.
func (c *conn) deleteInBatches(ctx context.Context, query string, before time.Time, batch int) (int64, error) {
	var total int64
	for {
		tag, err := c.pool.Exec(ctx, query, before, batch)
		if err != nil {
			return total, err
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) {
			return total, nil
		}
	}
}

// retireEvents runs the steps 1 to 3 for the cut-off keepFrom.
func (c *conn) retireEvents(ctx context.Context, keepFrom time.Time, batch int) (RetentionResult, error) {
	var res RetentionResult
	horizon, retired, err := c.raiseHorizon(ctx, monthOf(keepFrom))
	if err != nil {
		return res, err
	}
	res.Horizon = horizon
	if !horizon.IsZero() {
		if res.Checkpoints, err = c.writeCheckpoints(ctx, horizon, batch); err != nil {
			return res, err
		}
	}
	for _, p := range retired {
		n, err := c.dropPartition(ctx, p)
		if err != nil {
			return res, err
		}
		res.PartitionsDropped = append(res.PartitionsDropped, p)
		res.EventsDropped += n
	}
	c.partitions.mu.Lock()
	err = c.loadPartitions(ctx)
	c.partitions.mu.Unlock()
	return res, err
}

// raiseHorizon is step 1 for the month start limit: it returns the
// horizon (limit, or the stored one when later, or the stored one when no
// partition is wholly before limit) and the partitions before it, retired
// (those of an interrupted run included, detached ones too).
func (c *conn) raiseHorizon(ctx context.Context, limit time.Time) (horizon time.Time, retired []string, err error) {
	pc, err := c.acquireConn(ctx)
	if err != nil {
		return horizon, nil, fmt.Errorf("acquire: %w", err)
	}
	defer pc.Release()
	err = pgx.BeginFunc(ctx, pc, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf(`SET LOCAL lock_timeout = %d`, partitionLockTimeout.Milliseconds())); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+partitionLockKey+`)`); err != nil {
			return fmt.Errorf("advisory lock: %w", err)
		}
		var stored *time.Time
		if err := tx.QueryRow(ctx, `SELECT max(horizon) FROM events_horizon`).Scan(&stored); err != nil {
			return fmt.Errorf("read the horizon: %w", err)
		}
		parts, err := listPartitions(ctx, tx)
		if err != nil {
			return err
		}
		if stored != nil {
			horizon = stored.UTC()
		}
		for _, p := range parts {
			if !p.To.After(limit) && p.To.After(horizon) {
				horizon = p.To
			}
		}
		if horizon.IsZero() {
			return nil
		}
		if _, err := tx.Exec(ctx, `INSERT INTO events_horizon (horizon) VALUES ($1)
ON CONFLICT (one) DO UPDATE SET horizon = greatest(events_horizon.horizon, EXCLUDED.horizon)`, horizon); err != nil {
			return fmt.Errorf("write the horizon: %w", err)
		}
		for _, p := range parts {
			if p.To.After(horizon) {
				continue
			}
			if err := retire(ctx, tx, p.Name); err != nil {
				return err
			}
			retired = append(retired, p.Name)
		}
		left, err := detachedRetired(ctx, tx)
		retired = append(retired, left...)
		return err
	})
	return horizon, retired, err
}

// detachedRetired lists the tables of the schema that carry
// retiredConstraint but are no longer partitions of events: what a run
// stopped between a partition's DETACH and its DROP (killed, or the DROP
// failed) left, which the rerun drops.
func detachedRetired(ctx context.Context, tx pgx.Tx) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT c.relname::text FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
WHERE k.conname = $1 AND c.relnamespace = to_regnamespace(current_schema())
  AND NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid)
ORDER BY c.relname`, retiredConstraint)
	if err != nil {
		return nil, fmt.Errorf("detached partitions: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("detached partitions: %w", err)
	}
	return names, nil
}

// retire adds retiredConstraint to the partition name unless it has it.
func retire(ctx context.Context, tx pgx.Tx, name string) error {
	var has bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = to_regclass($1) AND conname = $2)`,
		name, retiredConstraint).Scan(&has); err != nil {
		return fmt.Errorf("retire %s: %w", name, err)
	}
	if has {
		return nil
	}
	if _, err := tx.Exec(ctx, `ALTER TABLE `+pgx.Identifier{name}.Sanitize()+` ADD CONSTRAINT `+retiredConstraint+` CHECK (false) NOT VALID`); err != nil {
		return fmt.Errorf("retire %s: %w", name, err)
	}
	return nil
}

// writeCheckpoints is step 2: the checkpoint at horizon of every resource
// with events before it, batch resources per transaction. It returns how
// many it wrote.
func (c *conn) writeCheckpoints(ctx context.Context, horizon time.Time, batch int) (int, error) {
	written := 0
	var after *projection.Key
	for {
		keys, err := c.keysBefore(ctx, horizon, after, batch)
		if err != nil || len(keys) == 0 {
			return written, err
		}
		if err := c.checkpointBatch(ctx, horizon, keys); err != nil {
			return written, err
		}
		written += len(keys)
		last := keys[len(keys)-1]
		after = &last
	}
}

// keysBefore lists the next keys after after, in key order, with events
// before horizon.
func (c *conn) keysBefore(ctx context.Context, horizon time.Time, after *projection.Key, limit int) ([]projection.Key, error) {
	var ac, at, ai string
	if after != nil {
		ac, at, ai = after.Cloud, after.ResourceType, after.ResourceID
	}
	rows, err := c.pool.Query(ctx, `SELECT DISTINCT cloud, resource_type, resource_id FROM events
WHERE timestamp < $1 AND (NOT $2 OR (cloud, resource_type, resource_id) > ($3, $4, $5))
ORDER BY cloud, resource_type, resource_id LIMIT $6`, horizon, after != nil, ac, at, ai, limit)
	if err != nil {
		return nil, fmt.Errorf("checkpoints: list resources: %w", err)
	}
	var (
		keys []projection.Key
		k    projection.Key
	)
	if _, err := pgx.ForEachRow(rows, []any{&k.Cloud, &k.ResourceType, &k.ResourceID}, func() error {
		keys = append(keys, k)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("checkpoints: list resources: %w", err)
	}
	return keys, nil
}

// checkpointBatch writes the checkpoints at horizon of keys in one
// transaction: each the fold of its stored checkpoint (when older) and its
// events from that checkpoint's at up to horizon.
func (c *conn) checkpointBatch(ctx context.Context, horizon time.Time, keys []projection.Key) error {
	pc, err := c.acquireConn(ctx)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	defer pc.Release()
	return pgx.BeginFunc(ctx, pc, func(tx pgx.Tx) error {
		cps, err := checkpointsTx(ctx, tx, keys)
		if err != nil {
			return err
		}
		evs, err := eventHistoriesTx(ctx, tx, keys, horizon)
		if err != nil {
			return err
		}
		rows := make([]projection.Resource, 0, len(keys))
		for _, k := range keys {
			cp, ok := cps[k]
			if ok && !cp.at.Before(horizon) {
				continue // written by an interrupted run
			}
			h := slices.DeleteFunc(evs[k], func(e event.Event) bool { return ok && e.Timestamp.Before(cp.at) })
			if len(h) == 0 && !ok {
				continue
			}
			rows = append(rows, projection.FoldFrom(cp.Resource, h))
		}
		if len(rows) == 0 {
			return nil
		}
		slices.SortFunc(rows, func(a, b projection.Resource) int { return a.Key.Compare(b.Key) })
		p := resourceParams(rows)
		p.timestamp(horizon)
		err = execParams(ctx, tx, `INSERT INTO resource_checkpoints (cloud, resource_type, resource_id, platform, project_id,
    state, size, created_at, deleted_at, first_event_at, last_event_at, last_event_type, last_event_id, at)
SELECT c, t, i, p, pr, st, sz::json, ca, da, fa, la, lt, li, $14::timestamptz
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
    $8::timestamptz[], $9::timestamptz[], $10::timestamptz[], $11::timestamptz[], $12::text[], $13::text[])
    AS u(c, t, i, p, pr, st, sz, ca, da, fa, la, lt, li)
ON CONFLICT (cloud, resource_type, resource_id) DO UPDATE SET
    platform = EXCLUDED.platform, project_id = EXCLUDED.project_id, state = EXCLUDED.state, size = EXCLUDED.size,
    created_at = EXCLUDED.created_at, deleted_at = EXCLUDED.deleted_at, first_event_at = EXCLUDED.first_event_at,
    last_event_at = EXCLUDED.last_event_at, last_event_type = EXCLUDED.last_event_type,
    last_event_id = EXCLUDED.last_event_id, at = EXCLUDED.at`, p, nil)
		if err != nil {
			return fmt.Errorf("write checkpoints: %w", err)
		}
		return nil
	})
}

// dropPartition is step 3 for one retired partition: DETACH … CONCURRENTLY
// (FINALIZE when an interrupted run left it pending), then DROP TABLE. It
// returns the rows the partition held. DETACH CONCURRENTLY runs outside a
// transaction and waits for every transaction that uses events; this
// session has no statement timeout meanwhile, only lock_timeout on the
// final drop.
func (c *conn) dropPartition(ctx context.Context, name string) (int64, error) {
	pc, err := c.acquireConn(ctx)
	if err != nil {
		return 0, fmt.Errorf("acquire: %w", err)
	}
	defer pc.Release()
	ident := pgx.Identifier{name}.Sanitize()
	var attached, pending bool
	if err := pc.QueryRow(ctx, `SELECT count(*) > 0, coalesce(bool_or(inhdetachpending), false) FROM pg_inherits
WHERE inhrelid = to_regclass($1) AND inhparent = to_regclass('events')`, name).Scan(&attached, &pending); err != nil {
		return 0, fmt.Errorf("drop %s: %w", name, err)
	}
	var n int64
	if err := pc.QueryRow(ctx, `SELECT count(*) FROM `+ident).Scan(&n); err != nil {
		return 0, fmt.Errorf("drop %s: count: %w", name, err)
	}
	if _, err := pc.Exec(ctx, `SET statement_timeout = 0`); err != nil {
		return 0, err
	}
	defer func() { _, _ = pc.Exec(context.WithoutCancel(ctx), `RESET statement_timeout`) }()
	switch {
	case pending:
		_, err = pc.Exec(ctx, `ALTER TABLE events DETACH PARTITION `+ident+` FINALIZE`)
	case attached:
		_, err = pc.Exec(ctx, `ALTER TABLE events DETACH PARTITION `+ident+` CONCURRENTLY`)
	}
	if err != nil {
		return 0, fmt.Errorf("detach %s: %w", name, err)
	}
	if _, err := pc.Exec(ctx, fmt.Sprintf(`SET lock_timeout = %d`, partitionLockTimeout.Milliseconds())); err != nil {
		return 0, err
	}
	defer func() { _, _ = pc.Exec(context.WithoutCancel(ctx), `RESET lock_timeout`) }()
	err = pgx.BeginFunc(ctx, pc, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DROP TABLE `+ident); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE events_horizon SET partitions_dropped = partitions_dropped + 1, events_dropped = events_dropped + $1`, n)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("drop %s: %w", name, err)
	}
	return n, nil
}

// EventStorage is the state of the events table that tallyd's metrics
// report (docs/operations.md, Partitions and Retention).
type EventStorage struct {
	// Partitions counts the partitions of events (0: not partitioned).
	Partitions int
	// Horizon is the retention horizon; zero when none was set.
	Horizon time.Time
	// OldestEvent is the timestamp of the oldest stored event; zero when
	// none is stored.
	OldestEvent time.Time
	// PartitionsDropped and EventsDropped count what every retention run
	// dropped, in every process.
	PartitionsDropped, EventsDropped int64
}

// EventStorage reads the state of the events table in one statement (the
// oldest event through the (timestamp, event_id) index of each
// partition). Errors: the database's.
func (db *DB) EventStorage(ctx context.Context) (EventStorage, error) {
	var (
		st              EventStorage
		horizon, oldest *time.Time
	)
	err := db.conn.pool.QueryRow(ctx, `SELECT
    (SELECT count(*) FROM pg_inherits WHERE inhparent = to_regclass('events')),
    (SELECT min(timestamp) FROM events),
    h.horizon, coalesce(h.partitions_dropped, 0), coalesce(h.events_dropped, 0)
FROM (SELECT 1) one LEFT JOIN events_horizon h ON true`).Scan(&st.Partitions, &oldest, &horizon, &st.PartitionsDropped, &st.EventsDropped)
	if err != nil {
		return st, fmt.Errorf("pgstore: event storage: %w", interpretError(err))
	}
	if horizon != nil {
		st.Horizon = horizon.UTC()
	}
	if oldest != nil {
		st.OldestEvent = oldest.UTC()
	}
	return st, nil
}
