package pgstore

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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
type Reconcile struct {
	*conn
	turns *syncTurns
}

// insertSyncRun records run in tx and returns its ID. The ID is taken
// under a transaction-level advisory lock that the commit of tx releases,
// the statement before it: the runs of every cloud get their IDs in the
// order they commit, so a run is visible once a larger ID is, and a reader
// paging newest first (by ID) never passes a run that commits later.
func insertSyncRun(ctx context.Context, tx pgx.Tx, run ingest.SyncRun, now time.Time) (int64, error) {
	errs := run.Errors
	if errs == nil {
		errs = []string{}
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('tally.sync_runs', 0))`); err != nil {
		return 0, fmt.Errorf("insert sync run: take the order of runs: %w", err)
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
// the advisory lock of cloud (pg_advisory_lock's key, a hash of the cloud's
// name), which every process sharing the database takes for a run of that
// cloud. Waiting holds no connection of the pool: the calls of one cloud
// in this process take turns in memory, the turn's holder then tries the
// lock (pg_try_advisory_lock) and, while another process holds it, gives
// its connection back between tries, so the wait is bounded by ctx alone
// (never by the statement timeout) and the runs of other clouds and every
// other request keep the pool. At most a quarter of the pool's connections
// (at least one) hold locks at once, so that each holder finds the
// connection its run needs. The lock is released after fn, or with its
// connection should the release fail.
func (s *Reconcile) Exclusive(ctx context.Context, cloud string, fn func(ctx context.Context) error) error {
	release, err := s.turns.take(ctx, cloud)
	if err != nil {
		return fmt.Errorf("pgstore: sync turn of cloud %q: %w", cloud, err)
	}
	defer release()
	pc, err := s.lock(ctx, cloud)
	if err != nil {
		return fmt.Errorf("pgstore: sync turn of cloud %q: %w", cloud, err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := pc.Exec(uctx, `SELECT pg_advisory_unlock(`+syncLockKey+`)`, cloud); err != nil {
			_ = pc.Conn().Close(uctx) // a closed session holds no lock
		}
		pc.Release()
		s.turns.giveSlot()
	}()
	return fn(ctx)
}

const syncLockKey = `hashtextextended('tally.sync:' || $1, 0)`

// Bounds of the pause between two tries of a lock another process holds.
const (
	syncRetryFirst = 10 * time.Millisecond
	syncRetryMost  = 250 * time.Millisecond
)

// lock returns a connection holding the advisory lock of cloud, and a slot
// of s.turns with it.
func (s *Reconcile) lock(ctx context.Context, cloud string) (*pgxpool.Conn, error) {
	for pause := syncRetryFirst; ; pause = min(2*pause, syncRetryMost) {
		if err := s.turns.takeSlot(ctx); err != nil {
			return nil, err
		}
		pc, err := s.acquireConn(ctx)
		if err != nil {
			s.turns.giveSlot()
			return nil, interpretError(err)
		}
		var got bool
		if err := pc.QueryRow(ctx, `SELECT pg_try_advisory_lock(`+syncLockKey+`)`, cloud).Scan(&got); err != nil {
			pc.Release()
			s.turns.giveSlot()
			return nil, interpretError(err)
		}
		if got {
			return pc, nil
		}
		pc.Release()
		s.turns.giveSlot()
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

// syncTurns orders the Exclusive calls of one process: one call per cloud
// goes on to the advisory lock, the others wait in memory; and slots
// bounds the connections that hold (or try) a lock at once.
type syncTurns struct {
	mu     sync.Mutex
	clouds map[string]*syncTurn
	slots  chan struct{}
}

type syncTurn struct {
	held    chan struct{} // holds a value while a call has the cloud's turn
	callers int           // calls holding or awaiting the turn; the entry goes with the last
}

// newSyncTurns returns the turns of a pool of maxConns connections.
func newSyncTurns(maxConns int32) *syncTurns {
	return &syncTurns{clouds: map[string]*syncTurn{}, slots: make(chan struct{}, max(1, maxConns/4))}
}

// take waits for cloud's turn in this process until ctx is done, and
// returns the function that gives it back.
func (t *syncTurns) take(ctx context.Context, cloud string) (func(), error) {
	t.mu.Lock()
	turn, ok := t.clouds[cloud]
	if !ok {
		turn = &syncTurn{held: make(chan struct{}, 1)}
		t.clouds[cloud] = turn
	}
	turn.callers++
	t.mu.Unlock()
	leave := func() {
		t.mu.Lock()
		if turn.callers--; turn.callers == 0 {
			delete(t.clouds, cloud)
		}
		t.mu.Unlock()
	}
	select {
	case turn.held <- struct{}{}:
		return func() { <-turn.held; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}

func (t *syncTurns) takeSlot(ctx context.Context) error {
	select {
	case t.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *syncTurns) giveSlot() { <-t.slots }
