package pgstore

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/ingest/usage"
	"github.com/tallyhq/tally/internal/feed"
	"github.com/tallyhq/tally/internal/pgcorrelate"
)

// CommitInMode runs one Commit transaction in the insert mode given (0 the
// sample probe then COPY, 1 the full probe then COPY, 2 INSERT … ON
// CONFLICT), as commitBatch escalates through them.
func CommitInMode(ctx context.Context, s *Ingest, b ingest.Batch, mode int) (ingest.Committed, error) {
	return commitOnce(ctx, s.conn, b, utcMicro(s.now()), insertMode(mode))
}

// UpsertResources writes rows into current_resources with the upsert a
// rebuild runs (its rows binary encoded by resourceParams), in one
// transaction.
func UpsertResources(ctx context.Context, db *DB, rows []projection.Resource) error {
	return pgx.BeginFunc(ctx, db.conn.pool, func(tx pgx.Tx) error {
		return execParams(ctx, tx, upsertSQL, resourceParams(rows), nil)
	})
}

// PoolOf is the pool db's stores use.
func PoolOf(db *DB) *pgxpool.Pool { return db.conn.pool }

// EventsQuery is the SELECT that Ingest.Events runs for q.
func EventsQuery(q ingest.EventQuery) (string, []any) { return eventsQuery(q) }

// DeadLettersQuery is the SELECT that Ingest.DeadLetters runs for q.
func DeadLettersQuery(q ingest.DeadLetterQuery) (string, []any) { return deadLettersQuery(q) }

// AuditQuery is the SELECT that Ingest.Audit runs for q.
func AuditQuery(q ingest.AuditQuery) (string, []any) { return auditQuery(q) }

// CountsQuery is the GROUP BY that Correlate.Counts runs.
func CountsQuery(scope correlate.Caller, q correlate.Query, by correlate.CountKey) (string, []any) {
	return countsQuery(scope, q, by)
}

// ResourcesQuery is the SELECT that Projection.List runs for q.
func ResourcesQuery(q projection.Query) (string, []any) { return resourcesQuery(q) }

// FeedReadQuery is the unfiltered feed read of the current phase after
// after (readPhase's query), for plan tests.
func FeedReadQuery(after feed.Position, limit int) (string, []any) {
	var args []any
	arg := func(v any) string { args = append(args, v); return "$" + strconv.Itoa(len(args)) }
	conds := []string{currentPhase.where, currentPhase.after(after, arg)}
	return `SELECT ` + feedColumns + ` FROM events` + where(conds) + ` ORDER BY ` + currentPhase.order + ` LIMIT ` + arg(limit), args
}

// FeedHeadQuery is feedHead's query.
const FeedHeadQuery = headQuery

// SetScanChunk makes Histories' key-order scan read n event rows a
// statement until the returned function restores it.
func SetScanChunk(n int) (restore func()) {
	old := scanChunk
	scanChunk = n
	return func() { scanChunk = old }
}

// HistoriesByResource is Histories read in chunks of resources (the path
// of a query with a project or platform filter), whatever q's filters.
func HistoriesByResource(ctx context.Context, s *Ingest, q usage.HistoryQuery, fn func(usage.History) error) error {
	return s.historiesByResource(ctx, q, fn)
}

// ProbeQuery is the duplicate probe storedResources runs for evs' keys.
func ProbeQuery(evs []event.Event) (string, []any) {
	ps := make([]*event.Event, len(evs))
	for i := range evs {
		ps[i] = &evs[i]
	}
	return probeQuery(ps)
}

// MarkLateQuery is the UPDATE markLate runs for the keys of evs.
func MarkLateQuery(evs []event.Event) (string, []any) {
	ids, stamps := make([]string, len(evs)), make([]time.Time, len(evs))
	for i := range evs {
		ids[i], stamps[i] = evs[i].EventID, utcMicro(evs[i].Timestamp)
	}
	return markLateQuery(ids, stamps)
}

// pipedCreates is cs as creates of a pipeline, each with ctxs[i] when it
// is there and not nil, else the background context.
func pipedCreates(ctxs []context.Context, cs []correlate.Create) []*pipedCreate {
	batch := make([]*pipedCreate, len(cs))
	for i, c := range cs {
		query, args, err := pgcorrelate.Write(c)
		if err != nil {
			panic(err)
		}
		ctx := context.Background()
		if i < len(ctxs) && ctxs[i] != nil {
			ctx = ctxs[i]
		}
		batch[i] = &pipedCreate{ctx: ctx, lockKey: pipeLockKey(c.Event), query: query, args: args, done: make(chan struct{})}
	}
	return batch
}

// PipeCreates runs cs, planned for s, in one pipeline (as concurrent
// creates without an idempotencyKey are) and returns each one's written
// event, disposition and error, in the order of cs. A create whose ctxs[i]
// is not nil runs with that context.
func PipeCreates(s *Correlate, ctxs []context.Context, cs []correlate.Create) ([]correlate.Event, []correlate.Disposition, []error) {
	batch := pipedCreates(ctxs, cs)
	s.pipe.send(slices.Clone(batch))
	evs, ds, errs := make([]correlate.Event, len(cs)), make([]correlate.Disposition, len(cs)), make([]error, len(cs))
	for i, r := range batch {
		<-r.done
		evs[i], ds[i], errs[i] = r.w.result(r.err, cs[i])
	}
	return evs, ds, errs
}

// ScanEventsQuery is the statement of Histories' key-order scan when no
// checkpoint lies ahead, for q.
func ScanEventsQuery(q usage.HistoryQuery) (string, []any) { return scanEventsQuery(q) }

// PipeWrites queues cs, planned for s, in one pipeline as concurrent
// Correlate.Create calls without an idempotencyKey do, and answers each as
// such a call does: its result once its pipeline has it, or its context's
// error as soon as ctxs[i] (when not nil) ends.
func PipeWrites(s *Correlate, ctxs []context.Context, cs []correlate.Create) ([]correlate.Disposition, []error) {
	p := s.pipe
	batch := pipedCreates(ctxs, cs)
	p.mu.Lock()
	p.queue = append(p.queue, batch...)
	p.flushers++
	p.mu.Unlock()
	go p.flush()
	ds, errs := make([]correlate.Disposition, len(cs)), make([]error, len(cs))
	for i, r := range batch {
		w, err := r.wait()
		_, ds[i], errs[i] = w.result(err, cs[i])
	}
	return ds, errs
}

// PipeStatements runs each query, with its args, as a create of one
// pipeline does (its lock key ""), and returns each one's error.
func PipeStatements(s *Correlate, queries []string, args [][]any) []error {
	batch := make([]*pipedCreate, len(queries))
	for i, q := range queries {
		batch[i] = &pipedCreate{ctx: context.Background(), query: q, args: args[i], done: make(chan struct{})}
	}
	s.pipe.send(slices.Clone(batch))
	errs := make([]error, len(batch))
	for i, r := range batch {
		<-r.done
		errs[i] = r.err
	}
	return errs
}

// WriteOf is pgcorrelate.Write.
func WriteOf(c correlate.Create) (string, []any, error) { return pgcorrelate.Write(c) }
