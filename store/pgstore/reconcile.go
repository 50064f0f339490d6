package pgstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/reconcile"
	"github.com/tallyhq/tally/sizenames"
)

var _ reconcile.Store = (*Reconcile)(nil)

// Reconcile is the store of reconciliation runs: it implements
// reconcile.Store on the table sync_runs (which [Ingest.Commit] writes) and
// size_names, and serialises the runs of one cloud with a PostgreSQL
// advisory lock. Get it from [DB.Reconcile]; the zero value is not usable.
// Safe for concurrent use.
type Reconcile struct{ *conn }

// insertSyncRun records run in tx and returns its ID.
func insertSyncRun(ctx context.Context, tx pgx.Tx, run ingest.SyncRun, now time.Time) (int64, error) {
	errs := run.Errors
	if errs == nil {
		errs = []string{}
	}
	var id int64
	err := tx.QueryRow(ctx, `
INSERT INTO sync_runs (cloud, platform, observed_at, started_at, finished_at, status,
                       created, updated, deleted, unchanged, skipped, refused, errors)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
RETURNING id`,
		run.Cloud, run.Platform, utcMicro(run.ObservedAt), stamp(run.StartedAt, now), stamp(run.FinishedAt, now), string(run.Status),
		run.Created, run.Updated, run.Deleted, run.Unchanged, run.Skipped, run.Refused, errs).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("insert sync run: %w", err)
	}
	return id, nil
}

// SizeNames implements [reconcile.Store], as [Ingest.SizeNames].
func (s *Reconcile) SizeNames(ctx context.Context, cloud, resourceType string) ([]sizenames.Row, error) {
	return s.sizeNames(ctx, cloud, resourceType)
}

// SyncRuns implements [reconcile.Store]: one query on the primary key, or
// on (cloud, id) for one cloud.
func (s *Reconcile) SyncRuns(ctx context.Context, q reconcile.RunQuery) ([]ingest.SyncRun, error) {
	var conds []string
	var args []any
	if q.Cloud != "" {
		args = append(args, q.Cloud)
		conds = append(conds, "cloud = $"+strconv.Itoa(len(args)))
	}
	if q.Before > 0 {
		args = append(args, q.Before)
		conds = append(conds, "id < $"+strconv.Itoa(len(args)))
	}
	lim, args := limitClause(q.Limit, args)
	out := []ingest.SyncRun{}
	var (
		r      ingest.SyncRun
		status string
	)
	err := s.forEachRow(ctx, `
SELECT id, cloud, platform, observed_at, started_at, finished_at, status,
       created, updated, deleted, unchanged, skipped, refused, errors
FROM sync_runs`+where(conds)+`
ORDER BY id DESC`+lim, args,
		[]any{&r.ID, &r.Cloud, &r.Platform, &r.ObservedAt, &r.StartedAt, &r.FinishedAt, &status,
			&r.Created, &r.Updated, &r.Deleted, &r.Unchanged, &r.Skipped, &r.Refused, &r.Errors},
		func() error {
			run := r
			run.Status = ingest.SyncStatus(status)
			run.ObservedAt, run.StartedAt, run.FinishedAt = run.ObservedAt.UTC(), run.StartedAt.UTC(), run.FinishedAt.UTC()
			if run.Errors == nil {
				run.Errors = []string{}
			}
			out = append(out, run)
			r.Errors = nil
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("pgstore: sync runs: %w", interpretError(err))
	}
	return out, nil
}

// Exclusive implements [reconcile.Store]: fn runs while this session holds
// the advisory lock of cloud (pg_advisory_lock on a hash of the cloud's
// name), which every process sharing the database takes for a run of that
// cloud. The wait ends with ctx. The lock is released after fn, or with its
// connection should the release fail.
func (s *Reconcile) Exclusive(ctx context.Context, cloud string, fn func(ctx context.Context) error) error {
	pc, err := s.acquireConn(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: sync turn of cloud %q: %w", cloud, interpretError(err))
	}
	defer pc.Release()
	const lockKey = `hashtextextended('tally.sync:' || $1, 0)`
	if _, err := pc.Exec(ctx, `SELECT pg_advisory_lock(`+lockKey+`)`, cloud); err != nil {
		return fmt.Errorf("pgstore: sync turn of cloud %q: %w", cloud, interpretError(err))
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := pc.Exec(uctx, `SELECT pg_advisory_unlock(`+lockKey+`)`, cloud); err != nil {
			_ = pc.Conn().Close(uctx) // a closed session holds no lock
		}
	}()
	return fn(ctx)
}
