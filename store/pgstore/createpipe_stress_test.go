package pgstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// Hundreds of callers on two replicas (two DBs on one schema) create
// occurrences and resolutions of a few shared keys, pipelined and keyed
// (each keyed create retried once), and set statuses and delete the events
// answered, some of them giving up early. Afterwards, from what is stored:
// at most one open event per (organization, user, correlationKey)
// (event-correlation.md, "Scope and invariant"); every occurrence counted
// exactly once (the occurrence counts of a key sum to its counted
// occurrences and the resolutions that recorded an event, each of them
// answered created or incremented, or given up); a retried idempotencyKey
// replays the event its first create answered (step 1); and the change log
// holds exactly one change per write: a created change per row, an
// incremented change per counted occurrence, a resolved change per close,
// a status or deleted change per answered SetStatus, SetStatuses or Delete
// (none missing, none for a rolled-back create).
func TestPipelineStressInvariants(t *testing.T) {
	if testing.Short() {
		t.Skip("stress")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	u := pgtest.URL(t)
	dbs := []*pgstore.DB{pgtest.Open(t, u, pgstore.Options{MaxConns: 6}), pgtest.Open(t, u, pgstore.Options{MaxConns: 6})}
	goroutines := runtime.NumGoroutine()
	keys := []string{"k0", "k1", "k2", "k3"}
	const callers, ops = 300, 8
	var (
		mu sync.Mutex
		// per key: answered occurrences/resolutions by disposition, and
		// creates given up (their effect may or may not be stored).
		answered = map[string]map[correlate.Disposition]int{}
		gaveUp   = map[string]int{}
		ids      []string
		statuses atomic.Int64 // answered SetStatus and SetStatuses changes
		deletes  atomic.Int64 // answered Delete changes
	)
	for _, k := range keys {
		answered[k] = map[correlate.Disposition]int{}
	}
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 7))
			for op := range ops {
				s := dbs[r.IntN(2)].Correlate()
				now := time.Now().UTC().Truncate(time.Microsecond)
				key := keys[r.IntN(len(keys))]
				switch n := r.IntN(10); {
				case n < 6: // a create, pipelined or keyed, maybe given up
					c := occurrence(key, `{}`, now)
					if n == 5 {
						c = resolution(key, now)
					}
					keyed := r.IntN(3) == 0
					if keyed {
						c.IdempotencyKey = fmt.Sprintf("idem-%d-%d", g, op)
					}
					cctx, ccancel := context.WithCancel(ctx)
					if r.IntN(8) == 0 {
						time.AfterFunc(time.Duration(r.IntN(3000))*time.Microsecond, ccancel)
					}
					e, d, err := s.Create(cctx, c)
					ccancel()
					mu.Lock()
					if err != nil {
						if cctx.Err() == nil {
							t.Errorf("create %s (keyed %v): %v", key, keyed, err)
						}
						gaveUp[key]++
					} else {
						answered[key][d]++
						ids = append(ids, e.ID)
						if d == correlate.Created && e.ID != c.Event.ID {
							t.Errorf("created answers event %s, not the create's own %s", e.ID, c.Event.ID)
						}
						if e.CorrelationKey != key {
							t.Errorf("create of %s answered an event of %q", key, e.CorrelationKey)
						}
					}
					mu.Unlock()
					if keyed && err == nil { // the retry replays
						re, rd, rerr := dbs[r.IntN(2)].Correlate().Create(ctx, c)
						if rerr != nil || rd != correlate.Replayed || re.ID != e.ID {
							t.Errorf("retry of %s: %s %q, %v; want replayed %s", c.IdempotencyKey, re.ID, rd, rerr, e.ID)
						}
					}
				default: // a status change or delete of an event answered
					mu.Lock()
					if len(ids) == 0 {
						mu.Unlock()
						continue
					}
					id, id2 := ids[r.IntN(len(ids))], ids[r.IntN(len(ids))]
					mu.Unlock()
					if id2 == id { // one id twice is answered twice, changed once
						continue
					}
					switch n {
					case 6, 7:
						if _, err := s.SetStatus(ctx, testCaller, id, correlate.StatusRead, now); err == nil {
							statuses.Add(1)
						}
					case 8:
						got, err := s.SetStatuses(ctx, testCaller, []string{id, id2}, correlate.StatusUnread, now)
						if err != nil {
							t.Errorf("SetStatuses: %v", err)
						}
						statuses.Add(int64(len(got)))
					case 9:
						if r.IntN(2) == 0 {
							if _, err := s.Delete(ctx, testCaller, id, now); err == nil {
								deletes.Add(1)
							}
						} else {
							got, err := s.DeleteMany(ctx, testCaller, []string{id, id2}, now)
							if err != nil {
								t.Errorf("DeleteMany: %v", err)
							}
							deletes.Add(int64(len(got)))
						}
					}
				}
			}
		})
	}
	wg.Wait()

	pool := pgstore.PoolOf(dbs[0])
	type keyState struct {
		Rows, Open, ResolvedRows, Sum                          int64
		CreatedChanges, CreatedResolved, Incremented, Resolved int64
	}
	got := map[string]keyState{}
	for _, k := range keys {
		var st keyState
		if err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE resolved_at IS NULL AND deleted_at IS NULL),
			count(*) FILTER (WHERE resolved_at IS NOT NULL), coalesce(sum(occurrence_count), 0)
			FROM correlated_events WHERE correlation_key = $1`, k).Scan(&st.Rows, &st.Open, &st.ResolvedRows, &st.Sum); err != nil {
			t.Fatal(err)
		}
		if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE kind = 'created'), count(*) FILTER (WHERE kind = 'created' AND resolved),
			count(*) FILTER (WHERE kind = 'incremented'), count(*) FILTER (WHERE kind = 'resolved')
			FROM correlated_event_changes WHERE correlation_key = $1`, k).Scan(&st.CreatedChanges, &st.CreatedResolved, &st.Incremented, &st.Resolved); err != nil {
			t.Fatal(err)
		}
		got[k] = st
		a := answered[k]
		if st.Open > 1 {
			t.Errorf("%s: %d open events, want at most one", k, st.Open)
		}
		// One created change per row, one resolved change per close.
		if st.CreatedChanges != st.Rows || st.Resolved != st.ResolvedRows-st.CreatedResolved {
			t.Errorf("%s: changes %+v do not match the rows", k, st)
		}
		// Each row starts at 1 and each counted occurrence adds 1.
		if st.Sum != st.Rows+st.Incremented {
			t.Errorf("%s: occurrence counts sum to %d, want %d rows + %d increments", k, st.Sum, st.Rows, st.Incremented)
		}
		// Every answered write is stored; only a create given up may be
		// stored unanswered.
		for d, n := range map[correlate.Disposition]int64{correlate.Created: st.CreatedChanges, correlate.Incremented: st.Incremented, correlate.Resolved: st.Resolved} {
			if w := int64(a[d]); n < w || n > w+int64(gaveUp[k]) {
				t.Errorf("%s: %d %s changes stored, %d answered and %d given up", k, n, d, w, gaveUp[k])
			}
		}
	}
	var st, del int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE kind = 'status'), count(*) FILTER (WHERE kind = 'deleted') FROM correlated_event_changes`).Scan(&st, &del); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([2]int64{statuses.Load(), deletes.Load()}, [2]int64{st, del}); d != "" {
		t.Errorf("status and deleted changes (-answered +stored):\n%s", d)
	}
	t.Logf("per key %+v; answered %v; given up %v; pipelines %+v %+v", got, answered, gaveUp, dbs[0].PipelineStats(), dbs[1].PipelineStats())
	// No goroutine outlives its create (flushers end when the queue is
	// empty); the pools' connections are all back.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > goroutines+2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > goroutines+2 {
		t.Errorf("%d goroutines after the creates, %d before", n, goroutines)
	}
	for i, db := range dbs {
		if n := pgstore.PoolOf(db).Stat().AcquiredConns(); n != 0 {
			t.Errorf("db %d: %d connections still acquired", i, n)
		}
	}
}
