package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// occurrence is a planned occurrence (step 3) of testCaller's
// correlationKey key at now, with metadata as given.
func occurrence(key, metadata string, now time.Time) correlate.Create {
	one := int64(1)
	return correlate.Create{
		Caller: testCaller, Step: correlate.StepOccurrence, Count: 1, LastSeenAt: now, Now: now,
		Event: correlate.Event{
			ID: uuid.Must(uuid.NewV7()).String(), Organization: testCaller.Organization, User: testCaller.User,
			Category: "connection", Action: "failed", Severity: correlate.SeverityError,
			Status: correlate.StatusUnread, Metadata: []byte(metadata), CreatedAt: now, UpdatedAt: now,
			CorrelationKey: key, OccurrenceCount: &one, FirstSeenAt: &now, LastSeenAt: &now,
		},
	}
}

// resolution is a planned resolution (step 4) of testCaller's
// correlationKey key at now.
func resolution(key string, now time.Time) correlate.Create {
	c := occurrence(key, `{}`, now)
	c.Step, c.ResolvedAt = correlate.StepResolution, now
	c.Event.Action, c.Event.Severity, c.Event.ResolvedAt = "connected", correlate.SeverityInformational, &now
	return c
}

// openCounts is every open event of testCaller: its occurrence count by
// correlationKey.
func openCounts(t *testing.T, s *pgstore.Correlate) map[string]int64 {
	t.Helper()
	l, err := s.List(context.Background(), testCaller, correlate.Query{PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, e := range l.Events {
		if e.ResolvedAt == nil && e.OccurrenceCount != nil {
			out[e.CorrelationKey] += *e.OccurrenceCount
		}
	}
	return out
}

// holdOpenEvent stores the open event of testCaller's correlationKey key
// and row-locks it in a transaction of db's pool, as a concurrent writer
// would, until the test rolls the transaction back (or ends). It returns
// the transaction and its backend's pid.
func holdOpenEvent(ctx context.Context, t *testing.T, db *pgstore.DB, key string, now time.Time) (pgx.Tx, int32) {
	t.Helper()
	if _, _, err := db.Correlate().Create(ctx, occurrence(key, `{}`, now)); err != nil {
		t.Fatal(err)
	}
	tx, err := pgstore.PoolOf(db).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	var pid int32
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid() FROM correlated_events WHERE correlation_key = $1 FOR UPDATE`, key).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return tx, pid
}

// waitWaiters returns once n backends wait on the locks of the backend
// pid, directly or behind another such backend (the test server serves
// other tests too, so the wait follows pg_blocking_pids from pid).
func waitWaiters(ctx context.Context, t *testing.T, pool *pgxpool.Pool, pid int32, n int) {
	t.Helper()
	for waiting := 0; waiting < n; {
		if err := pool.QueryRow(ctx, `WITH RECURSIVE w(pid) AS (SELECT $1::int
			UNION SELECT a.pid FROM pg_stat_activity a, w WHERE w.pid = ANY(pg_blocking_pids(a.pid)))
			SELECT count(*) - 1 FROM w`, pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Creates pipelined together run as their statements would alone: the
// occurrences of one key count on its one open event in the order they
// arrived (a resolution between them closes the first event and the next
// occurrence opens another), whatever the order of the keys
// (event-correlation.md, "Correlation": "at most one open event per
// (organization, user, correlationKey)"), in one transaction.
func TestPipelineTogetherKeepsEachKeysOrder(t *testing.T) {
	db := pgtest.Open(t, pgtest.URL(t), pgstore.Options{})
	s := db.Correlate()
	now := time.Now().UTC().Truncate(time.Microsecond)
	cs := []correlate.Create{
		occurrence("k3", `{}`, now), occurrence("k1", `{}`, now), occurrence("k2", `{}`, now),
		occurrence("k1", `{}`, now), resolution("k1", now), occurrence("k1", `{}`, now), occurrence("k3", `{}`, now),
	}
	_, ds, errs := pgstore.PipeCreates(s, nil, cs)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	want := []correlate.Disposition{correlate.Created, correlate.Created, correlate.Created,
		correlate.Incremented, correlate.Resolved, correlate.Created, correlate.Incremented}
	if d := cmp.Diff(want, ds); d != "" {
		t.Errorf("dispositions (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]int64{"k1": 1, "k2": 1, "k3": 2}, openCounts(t, s)); d != "" {
		t.Errorf("open events' counts (-want +got):\n%s", d)
	}
	if got := db.PipelineStats(); got != (pgstore.PipelineStats{Pipelines: 1, Creates: 7}) {
		t.Errorf("PipelineStats = %+v, want one pipeline of 7 and no rerun", got)
	}
}

// A statement that fails in a pipeline fails alone: the pipeline's
// transaction rolls back, each create runs again on its own, and every
// other create is answered and stored once ("nothing half-written", and a
// client error is that client's alone).
func TestPipelineIsolatesAFailedStatement(t *testing.T) {
	db := pgtest.Open(t, pgtest.URL(t), pgstore.Options{})
	s := db.Correlate()
	now := time.Now().UTC().Truncate(time.Microsecond)
	cs := []correlate.Create{
		occurrence("k1", `{}`, now),
		occurrence("k2", `{"broken":`, now), // PostgreSQL refuses it as json
		occurrence("k3", `{}`, now),
		occurrence("k1", `{}`, now),
	}
	_, ds, errs := pgstore.PipeCreates(s, nil, cs)
	if errs[1] == nil {
		t.Error("the create whose metadata is not JSON succeeded")
	}
	for _, i := range []int{0, 2, 3} {
		if errs[i] != nil {
			t.Errorf("create %d beside the failed one: %v", i, errs[i])
		}
	}
	if d := cmp.Diff([]correlate.Disposition{correlate.Created, "", correlate.Created, correlate.Incremented}, ds); d != "" {
		t.Errorf("dispositions (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]int64{"k1": 2, "k3": 1}, openCounts(t, s)); d != "" {
		t.Errorf("open events' counts (-want +got):\n%s", d)
	}
	if got := db.PipelineStats(); got != (pgstore.PipelineStats{Pipelines: 1, Creates: 4, Reruns: 1}) {
		t.Errorf("PipelineStats = %+v, want one pipeline of 4, rerun once", got)
	}
}

// A create whose caller gave up before its pipeline was sent is not sent:
// it answers its context's error and stores nothing; the others in the
// pipeline are stored.
func TestPipelineSkipsACreateWhoseCallerLeft(t *testing.T) {
	db := pgtest.Open(t, pgtest.URL(t), pgstore.Options{})
	s := db.Correlate()
	now := time.Now().UTC().Truncate(time.Microsecond)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, errs := pgstore.PipeCreates(s, []context.Context{nil, gone}, []correlate.Create{occurrence("k1", `{}`, now), occurrence("k2", `{}`, now)})
	if errs[0] != nil {
		t.Errorf("the create whose caller waits: %v", errs[0])
	}
	if !errors.Is(errs[1], context.Canceled) {
		t.Errorf("the create whose caller left: error %v, want context.Canceled", errs[1])
	}
	if d := cmp.Diff(map[string]int64{"k1": 1}, openCounts(t, s)); d != "" {
		t.Errorf("open events' counts (-want +got):\n%s", d)
	}
}

// A create blocked in the database (here behind a row lock another
// transaction holds) answers its context's error as soon as its context
// ends, and the pipeline, every caller in it gone, is cancelled: the
// connection goes back to the pool and the next create is stored.
func TestPipelineCancelledWhenEveryCallerLeft(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := pgtest.Open(t, pgtest.URL(t), pgstore.Options{MaxConns: 4})
	s := db.Correlate()
	now := time.Now().UTC().Truncate(time.Microsecond)
	tx, _ := holdOpenEvent(ctx, t, db, "k1", now)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() {
			cctx, ccancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer ccancel()
			_, _, errs[i] = s.Create(cctx, occurrence("k1", `{}`, now))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("blocked create %d: error %v, want its deadline", i, err)
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, d, err := s.Create(ctx, occurrence("k2", `{}`, now)); err != nil || d != correlate.Created {
		t.Fatalf("the next create: %q, %v; want created", d, err)
	}
}

// Pipelines running at once on different connections, with their keys in
// opposite orders, neither deadlock nor rerun: each runs its statements in
// the order of their keys. A deadlock would show as a rerun (PostgreSQL
// aborts one of the two after deadlock_timeout, and its creates run
// again one by one).
func TestPipelinesInOppositeKeyOrdersDoNotDeadlock(t *testing.T) {
	db := pgtest.Open(t, pgtest.URL(t), pgstore.Options{MaxConns: 4})
	s := db.Correlate()
	now := time.Now().UTC().Truncate(time.Microsecond)
	const keys, rounds = 12, 15
	var up, down []correlate.Create
	for k := range keys {
		up = append(up, occurrence(fmt.Sprintf("k%02d", k), `{}`, now))
	}
	if _, _, errs := pgstore.PipeCreates(s, nil, up); errors.Join(errs...) != nil {
		t.Fatal(errors.Join(errs...))
	}
	for round := range rounds {
		up, down = up[:0], down[:0]
		for k := range keys {
			up = append(up, occurrence(fmt.Sprintf("k%02d", k), `{}`, now))
			down = append(down, occurrence(fmt.Sprintf("k%02d", keys-1-k), `{}`, now))
		}
		var wg sync.WaitGroup
		for _, cs := range [][]correlate.Create{up, down} {
			wg.Go(func() {
				if _, _, errs := pgstore.PipeCreates(s, nil, cs); errors.Join(errs...) != nil {
					t.Errorf("round %d: %v", round, errors.Join(errs...))
				}
			})
		}
		wg.Wait()
	}
	want := map[string]int64{}
	for k := range keys {
		want[fmt.Sprintf("k%02d", k)] = 1 + 2*rounds
	}
	if d := cmp.Diff(want, openCounts(t, s)); d != "" {
		t.Errorf("open events' counts (-want +got):\n%s", d)
	}
	if got := db.PipelineStats().Reruns; got != 0 {
		t.Errorf("%d pipelines were rerun, want 0 (a deadlock between them?)", got)
	}
}

// A pipeline blocked in the database (behind a row lock another
// transaction holds) does not hold the creates of other keys: a create
// that arrives once it has run a while leaves in a pipeline of its own.
func TestPipelineBlockedDoesNotHoldOthers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := pgtest.Open(t, pgtest.URL(t), pgstore.Options{MaxConns: 4})
	s := db.Correlate()
	now := time.Now().UTC().Truncate(time.Microsecond)
	tx, txPID := holdOpenEvent(ctx, t, db, "k1", now)
	blocked := make(chan error, 1)
	go func() {
		_, _, err := s.Create(ctx, occurrence("k1", `{}`, now))
		blocked <- err
	}()
	// Until its statement waits on the transaction's lock, and then more
	// than the stall after which another pipeline starts.
	waitWaiters(ctx, t, pgstore.PoolOf(db), txPID, 1)
	time.Sleep(50 * time.Millisecond)
	octx, ocancel := context.WithTimeout(ctx, 10*time.Second)
	defer ocancel()
	if _, d, err := s.Create(octx, occurrence("k2", `{}`, now)); err != nil || d != correlate.Created {
		t.Fatalf("a create of another key while k1's pipeline is blocked: %q, %v; want created", d, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-blocked; err != nil {
		t.Fatalf("the blocked create, once the lock is gone: %v", err)
	}
	if d := cmp.Diff(map[string]int64{"k1": 2, "k2": 1}, openCounts(t, s)); d != "" {
		t.Errorf("open events' counts (-want +got):\n%s", d)
	}
}

// A create whose arguments cannot be encoded fails alone, before anything
// is sent: the others of its pipeline commit together, without a rerun.
func TestPipelineUnencodableArgumentFailsAlone(t *testing.T) {
	db := pgtest.Open(t, pgtest.URL(t), pgstore.Options{})
	s := db.Correlate()
	now := time.Now().UTC().Truncate(time.Microsecond)
	var queries []string
	var args [][]any
	for _, key := range []string{"k1", "k2", "k3"} {
		q, a, err := pgstore.WriteOf(occurrence(key, `{}`, now))
		if err != nil {
			t.Fatal(err)
		}
		queries, args = append(queries, q), append(args, a)
	}
	args[1][1] = make(chan int) // no encoding for a text parameter
	errs := pgstore.PipeStatements(s, queries, args)
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "encode arguments") {
		t.Errorf("the unencodable create: error %v, want an encoding error", errs[1])
	}
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("the others: %v, %v; want both stored", errs[0], errs[2])
	}
	if d := cmp.Diff(map[string]int64{"k1": 1, "k3": 1}, openCounts(t, s)); d != "" {
		t.Errorf("open events' counts (-want +got):\n%s", d)
	}
	if got := db.PipelineStats(); got != (pgstore.PipelineStats{Pipelines: 1, Creates: 3}) {
		t.Errorf("PipelineStats = %+v, want one pipeline of 3 and no rerun", got)
	}
}
