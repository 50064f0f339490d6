package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// createPipe coalesces concurrent creates without an idempotencyKey (one
// statement each, pgcorrelate.Write) into pipelines: a flusher takes every
// create queued, up to maxPipeline, and sends them on one connection of the
// pool in one write, as one implicit transaction (one Sync, one commit),
// their statements in the order of their lock keys (see together), and
// hands each create its result once that transaction committed. When it
// fails, none took effect, and each create runs again with a Sync after
// its statement, its own implicit transaction, for its own answer (see
// alone). At most maxFlushers pipelines run at once; the creates that
// arrive meanwhile wait in the queue and leave in the next one, in arrival
// order, unless every pipeline has stalled (see stalled). The pipeline's
// transaction holds the row locks of all its statements until its commit:
// SetStatuses and DeleteMany lock in the same order (lockedInKeyOrder).
//
// Each create keeps its own cancellation: one whose context is done before
// its pipeline is sent is not sent; one that gives up after it was sent
// returns at once (its statement may still commit, as when a lone
// statement's context ends while the server runs it); and a pipeline is
// cancelled only when every create in it has given up.
//
// What it saves, measured with tally-bench's correlation phase: see
// docs/performance.md, "Pipelined creates".
type createPipe struct {
	c           *conn
	maxFlushers int
	maxPipeline int

	mu       sync.Mutex
	queue    []*pipedCreate
	flushers int
	started  time.Time // when the newest pipeline was taken from the queue

	// What [DB.PipelineStats] reports.
	pipelines, creates, reruns, bypasses atomic.Int64
}

// pipedCreate is one create in a createPipe: its statement and context,
// and, once done is closed, its written row or error.
type pipedCreate struct {
	ctx   context.Context
	query string
	args  []any
	// lockKey orders the creates of a pipeline run together: the
	// (organization, user, correlationKey) whose open event the statement
	// locks, "" when it has none.
	lockKey string

	done chan struct{}
	w    writtenRow
	err  error
}

// Default shape of a createPipe: pipelines of at most 64 creates; one
// pipeline at a time while the creates waiting fit the next, and more, up
// to 4 but never more than half the pool (so that ingestion and reads keep
// connections of their own), only when more wait. Fewer, longer pipelines
// measured best (docs/performance.md, "Pipelined creates"): each is one
// commit, and one backend serves it without contention.
const (
	defaultPipeFlushers = 4
	defaultPipeLength   = 64
	pipeStall           = 20 * time.Millisecond
)

func newCreatePipe(c *conn) *createPipe {
	flushers := min(defaultPipeFlushers, max(1, int(c.pool.Config().MaxConns)/2))
	return &createPipe{c: c, maxFlushers: flushers, maxPipeline: defaultPipeLength}
}

// write runs query with args in the next pipeline and returns the row it
// wrote and the statement's error (pgx.ErrNoRows when it wrote none), or
// ctx's error when ctx ends first.
func (p *createPipe) write(ctx context.Context, lockKey, query string, args []any) (writtenRow, error) {
	r := &pipedCreate{ctx: ctx, lockKey: lockKey, query: query, args: args, done: make(chan struct{})}
	p.mu.Lock()
	p.queue = append(p.queue, r)
	// One flusher while the queue fits its next pipeline; another only
	// when more creates wait than the running flushers take next, or when
	// the newest pipeline running has run for pipeStall (a statement
	// waiting on a lock must not hold every create behind it).
	if p.flushers == 0 || (p.flushers < p.maxFlushers &&
		(len(p.queue) > p.flushers*p.maxPipeline || time.Since(p.started) > pipeStall)) {
		p.flushers++
		go p.flush()
	}
	p.mu.Unlock()
	return r.wait()
}

// wait returns r's result once its pipeline has it, or its context's error
// as soon as its context ends. A pipeline that failed because every
// caller in it gave up (its own context cancelled) answers each its own
// context's error, not the pipeline's.
func (r *pipedCreate) wait() (writtenRow, error) {
	select {
	case <-r.done:
		if r.err != nil && r.ctx.Err() != nil {
			return writtenRow{}, context.Cause(r.ctx)
		}
		return r.w, r.err
	case <-r.ctx.Done():
		return writtenRow{}, context.Cause(r.ctx)
	}
}

// stalled reports whether every pipeline that may run at once is running
// and the newest has run for pipeStall: one statement waiting on a lock
// holds every create of its pipeline, and the queue behind, for as long as
// the lock is held. A create that arrives then runs on a connection of its
// own instead (Correlate.createOnce), as every create did before
// pipelining, so that it waits only for its own key's lock.
func (p *createPipe) stalled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.flushers >= p.maxFlushers && time.Since(p.started) > pipeStall {
		p.bypasses.Add(1)
		return true
	}
	return false
}

// flush sends pipelines while creates are queued, then ends.
func (p *createPipe) flush() {
	for {
		p.mu.Lock()
		n := min(len(p.queue), p.maxPipeline)
		if n == 0 {
			p.flushers--
			p.queue = nil // let the backing array go
			p.mu.Unlock()
			return
		}
		p.started = time.Now()
		batch := slices.Clone(p.queue[:n])
		clear(p.queue[:n])
		p.queue = p.queue[n:]
		p.mu.Unlock()
		p.send(batch)
	}
}

// send runs batch in one pipeline on one connection and closes every
// create's done.
func (p *createPipe) send(batch []*pipedCreate) {
	live := sendable(batch)
	if len(live) == 0 {
		return
	}
	// The pipeline's context ends when every create in it has given up.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var waiting atomic.Int64
	waiting.Store(int64(len(live)))
	for _, r := range live {
		stop := context.AfterFunc(r.ctx, func() {
			if waiting.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	pc, err := p.c.acquireConn(ctx)
	if err != nil {
		answerAll(live, fmt.Errorf("acquire: %w", err))
		return
	}
	defer pc.Release()
	conn := pc.Conn()
	sds := make(map[string]*pgconn.StatementDescription, 3)
	for _, r := range live {
		if sds[r.query] != nil {
			continue
		}
		// Named by its text: prepared once per connection, then found in
		// the connection's map without a round trip.
		sd, err := conn.Prepare(ctx, r.query, r.query)
		if err != nil {
			answerAll(live, fmt.Errorf("prepare: %w", err))
			return
		}
		sds[r.query] = sd
	}
	// A caller that gave up while the pipeline waited for its connection
	// has been answered its context's error: its create must not be sent
	// now, to commit after that answer.
	if live = sendable(live); len(live) == 0 {
		return
	}
	p.pipelines.Add(1)
	p.creates.Add(int64(len(live)))
	if len(live) > 1 {
		done, sent, err := together(ctx, conn, sds, live)
		live = sent
		switch {
		case done || len(live) == 0:
			return
		case conn.IsClosed() || ctx.Err() != nil:
			answerAll(live, err)
			return
		}
		// A statement failed, so none took effect: run each on its own,
		// for its own answer.
		p.reruns.Add(1)
		if staleStatement(err) {
			if err := prepareAgain(ctx, conn, sds); err != nil {
				answerAll(live, fmt.Errorf("prepare: %w", err))
				return
			}
		}
	}
	alone(ctx, conn, sds, live)
	for _, r := range live {
		if staleStatement(r.err) {
			// The next pipeline on this connection prepares them again.
			_ = prepareAgain(ctx, conn, sds)
			return
		}
	}
}

// staleStatement reports whether err is the server's refusal of a prepared
// statement that no longer exists on the connection (SQLSTATE 26000: a
// DISCARD ALL or DEALLOCATE ALL that pgx did not see, as a pooler's reset
// runs) or whose result no longer fits (0A000, "cached plan must not change
// result type", after a migration). pgx's statement cache forgets a
// statement that failed; the pipeline's statements, prepared by name, are
// forgotten by prepareAgain.
func staleStatement(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "26000" || pgErr.Code == "0A000")
}

// prepareAgain deallocates each statement of sds on conn (a statement that
// is gone already is no error) and prepares it again, updating sds.
func prepareAgain(ctx context.Context, conn *pgx.Conn, sds map[string]*pgconn.StatementDescription) error {
	for q := range sds {
		if err := conn.Deallocate(ctx, q); err != nil {
			return err
		}
		sd, err := conn.Prepare(ctx, q, q)
		if err != nil {
			return err
		}
		sds[q] = sd
	}
	return nil
}

// sendable closes the done of every create of rs whose caller has given up
// (its context is done), with that context's error, and returns the others.
func sendable(rs []*pipedCreate) []*pipedCreate {
	live := rs[:0:0]
	for _, r := range rs {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			close(r.done)
			continue
		}
		live = append(live, r)
	}
	return live
}

// together runs rs in one pipeline with one Sync, so one implicit
// transaction: one commit, and one WAL flush, for all of them. The
// statements run in the order of their lock keys (the open event of each
// (organization, user, correlationKey), and its key in the open-key
// index), and each create's earlier and later creates of one key keep
// their order: two pipelines lock in one total order and cannot deadlock.
// A create whose arguments cannot be encoded is answered that error and
// not sent. It returns the creates sent, and whether the transaction
// committed, in which case every one of them has its result and its done
// closed (an answer that could not be
// read is that create's error, its effect committed all the same).
// Otherwise none of them took effect, unless the connection broke after
// the Sync was sent (then the connection is closed and the outcome is
// unknown), and none is done (err says why).
func together(ctx context.Context, conn *pgx.Conn, sds map[string]*pgconn.StatementDescription, rs []*pipedCreate) (bool, []*pipedCreate, error) {
	slices.SortStableFunc(rs, func(a, b *pipedCreate) int { return strings.Compare(a.lockKey, b.lockKey) })
	pl := conn.PgConn().StartPipeline(ctx)
	rs = buffer(pl, conn, sds, rs, false)
	pl.SendPipelineSync()
	if err := pl.Flush(); err != nil {
		_ = pl.Close()
		return false, rs, err
	}
	for _, r := range rs {
		res, err := pl.GetResults()
		if err == nil {
			rr, ok := res.(*pgconn.ResultReader)
			if !ok {
				_ = conn.PgConn().Close(context.Background()) // out of step with the server
				return false, rs, fmt.Errorf("pipeline: unexpected %T for a statement", res)
			}
			err = scanWritten(conn, rr, &r.w)
		}
		if err != nil && !errors.Is(err, pgx.ErrNoRows) && (isPgError(err) || conn.IsClosed()) {
			// The server's error, which aborted the transaction, or a
			// broken connection.
			if cerr := pl.Close(); cerr != nil && !conn.IsClosed() && !isPgError(cerr) {
				_ = conn.PgConn().Close(context.Background())
			}
			return false, rs, err
		}
		// nil; pgx.ErrNoRows, a refused insert; or an answer that could
		// not be read (a scan's error): the server ran the statement, and
		// the Sync commits it with the others, so it must not run again.
		r.err = err
	}
	res, err := pl.GetResults() // the Sync: the commit
	if err == nil {
		if _, ok := res.(*pgconn.PipelineSync); !ok {
			err = fmt.Errorf("pipeline: unexpected %T for a Sync", res)
		}
	}
	if cerr := pl.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		if !conn.IsClosed() && !isPgError(err) {
			_ = conn.PgConn().Close(context.Background())
		}
		return false, rs, err
	}
	for _, r := range rs {
		close(r.done)
	}
	return true, rs, nil
}

// isPgError reports whether err is the server's error (the connection is
// still usable) rather than the connection's.
func isPgError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr)
}

// scanWritten scans the one row of a write statement's result into w:
// pgx.ErrNoRows when it has none.
func scanWritten(conn *pgx.Conn, rr *pgconn.ResultReader, w *writtenRow) error {
	rows := pgx.RowsFromResultReader(conn.TypeMap(), rr)
	var err error
	if rows.Next() {
		err = rows.Scan(w.dest()...)
	} else {
		err = pgx.ErrNoRows
	}
	rows.Close()
	if rerr := rows.Err(); rerr != nil {
		err = rerr
	}
	return err
}

// buffer queues the statement of each create of rs on pl, with a Sync
// after each when sync, and returns the creates queued. A create whose
// arguments cannot be encoded is answered that error at once; nothing of
// it is queued, so it fails alone.
func buffer(pl *pgconn.Pipeline, conn *pgx.Conn, sds map[string]*pgconn.StatementDescription, rs []*pipedCreate, sync bool) []*pipedCreate {
	var eqb pgx.ExtendedQueryBuilder
	queued := rs[:0:0]
	for _, r := range rs {
		sd := sds[r.query]
		if err := eqb.Build(conn.TypeMap(), sd, r.args); err != nil {
			answerAll([]*pipedCreate{r}, fmt.Errorf("encode arguments: %w", err))
			continue
		}
		// The pipeline keeps the result formats until the answer is read;
		// the builder reuses its slices.
		pl.SendQueryStatement(sd, eqb.ParamValues, eqb.ParamFormats, slices.Clone(eqb.ResultFormats))
		if sync {
			pl.SendPipelineSync()
		}
		queued = append(queued, r)
	}
	return queued
}

// answerAll answers every create of rs err and closes its done.
func answerAll(rs []*pipedCreate, err error) {
	for _, r := range rs {
		r.err = err
		close(r.done)
	}
}

// alone runs rs in one pipeline with a Sync after each statement, so each
// in an implicit transaction of its own, and closes every create's done.
func alone(ctx context.Context, conn *pgx.Conn, sds map[string]*pgconn.StatementDescription, rs []*pipedCreate) {
	pl := conn.PgConn().StartPipeline(ctx)
	sent := buffer(pl, conn, sds, rs, true)
	if err := pl.Flush(); err != nil {
		answerAll(sent, err)
		_ = pl.Close()
		return
	}
	for i, r := range sent {
		if err := receive(pl, conn, r); err != nil {
			// The connection broke: no later answer will come.
			answerAll(sent[i+1:], err)
			break
		}
	}
	if err := pl.Close(); err != nil && !conn.IsClosed() && !isPgError(err) {
		_ = conn.PgConn().Close(context.Background())
	}
}

// receive reads r's answer and its Sync from pl, sets r's result and closes
// r.done. Its error is not nil when the pipeline cannot go on (the
// connection broke), in which case r has that error too.
func receive(pl *pgconn.Pipeline, conn *pgx.Conn, r *pipedCreate) error {
	defer close(r.done)
	res, err := pl.GetResults()
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr): // the statement failed: its Sync follows
		r.err = err
	case err != nil:
		r.err = err
		return err
	default:
		rr, ok := res.(*pgconn.ResultReader)
		if !ok {
			r.err = fmt.Errorf("pipeline: unexpected %T for a statement", res)
			return r.err
		}
		r.err = scanWritten(conn, rr, &r.w)
		if conn.PgConn().IsClosed() {
			return r.err
		}
	}
	// Its Sync: the implicit transaction's commit, which can still fail
	// (its error comes before the Sync's ReadyForQuery).
	for {
		res, err := pl.GetResults()
		switch {
		case errors.As(err, &pgErr):
			if r.err == nil {
				r.err = err
			}
			continue
		case err != nil:
			if r.err == nil {
				r.err = err
			}
			return err
		}
		if _, ok := res.(*pgconn.PipelineSync); !ok {
			err := fmt.Errorf("pipeline: unexpected %T for a Sync", res)
			if r.err == nil {
				r.err = err
			}
			return err
		}
		return nil
	}
}

// PipelineStats counts the pipelines of creates a [DB] ran since it was
// made (see [Correlate.Create]): Pipelines sent, the Creates they carried
// (Creates / Pipelines is the mean pipeline length), and Reruns, the
// pipelines of two or more whose one transaction failed (a statement's
// error, a deadlock, a failed commit) so that each create was run again on
// its own. Reruns that grow with the traffic mean that some statement fails
// often; each rerun costs one more round trip for its creates. Bypasses
// counts the creates without an idempotencyKey that ran alone on a
// connection of their own because every pipeline that may run at once had
// stalled (a statement of each waiting on a lock, or a slow server).
type PipelineStats struct {
	Pipelines, Creates, Reruns, Bypasses int64
}

// PipelineStats returns the counts of db's pipelined creates so far. It
// does not block.
func (db *DB) PipelineStats() PipelineStats {
	p := db.correlate.pipe
	return PipelineStats{Pipelines: p.pipelines.Load(), Creates: p.creates.Load(), Reruns: p.reruns.Load(), Bypasses: p.bypasses.Load()}
}
