package memstore

import (
	"context"
	"slices"
	"time"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/reconcile"
	"github.com/tallyhq/tally/sizenames"
)

var _ reconcile.Store = (*Reconcile)(nil)

// Reconcile is the store of reconciliation runs: it implements
// reconcile.Store over the tables of the [DB] it came from (the runs
// [Ingest.Commit] records). Get it from [DB.Reconcile]; the zero value is
// not usable. Safe for concurrent use.
type Reconcile struct{ *state }

// syncData holds the recorded runs and the per-cloud turns of Exclusive.
// Guarded by state.mu.
type syncData struct {
	runs  []ingest.SyncRun // in ID order
	next  int64
	turns map[string]chan struct{} // by cloud: holds a value while a run has the turn
}

// record appends run with the next ID (its times truncated to
// microseconds, FinishedAt defaulting to now) and returns the ID.
func (d *syncData) record(run ingest.SyncRun, now time.Time) int64 {
	d.next++
	run.ID = d.next
	for _, t := range []*time.Time{&run.ObservedAt, &run.StartedAt, &run.FinishedAt} {
		*t = t.UTC().Truncate(time.Microsecond)
	}
	if run.FinishedAt.IsZero() {
		run.FinishedAt = now
	}
	run.Errors = slices.Clone(run.Errors)
	if run.Errors == nil {
		run.Errors = []string{}
	}
	d.runs = append(d.runs, run)
	return run.ID
}

// SizeNames implements [reconcile.Store], as [Ingest.SizeNames].
func (s *Reconcile) SizeNames(ctx context.Context, cloud, resourceType string) ([]sizenames.Row, error) {
	return s.sizeNames(ctx, cloud, resourceType)
}

// SyncRuns implements [reconcile.Store].
func (s *Reconcile) SyncRuns(ctx context.Context, q reconcile.RunQuery) ([]ingest.SyncRun, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []ingest.SyncRun{}
	for i := len(s.sync.runs) - 1; i >= 0; i-- {
		r := s.sync.runs[i]
		if (q.Cloud != "" && r.Cloud != q.Cloud) || (q.Before > 0 && r.ID >= q.Before) {
			continue
		}
		r.Errors = slices.Clone(r.Errors)
		out = append(out, r)
		if q.Limit > 0 && len(out) == q.Limit {
			break
		}
	}
	return out, nil
}

// Exclusive implements [reconcile.Store] within the process (the memory
// store is one process's).
func (s *Reconcile) Exclusive(ctx context.Context, cloud string, fn func(ctx context.Context) error) error {
	s.mu.Lock()
	if s.sync.turns == nil {
		s.sync.turns = make(map[string]chan struct{})
	}
	turn, ok := s.sync.turns[cloud]
	if !ok {
		turn = make(chan struct{}, 1)
		s.sync.turns[cloud] = turn
	}
	s.mu.Unlock()
	select {
	case turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-turn }()
	return fn(ctx)
}
