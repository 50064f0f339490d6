package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// TestAttackGoCallerBadEventsStoreNothing: a hand-built batch (not
// Checked) with an event whose raw payload members are not what
// event.Decode produces, or whose text PostgreSQL refuses (NUL, invalid
// UTF-8), is refused by Commit with an error and stores nothing; the next
// good batch is stored.
func TestAttackGoCallerBadEventsStoreNothing(t *testing.T) {
	ctx := context.Background()
	db, conn := openDB(t, pgstore.Options{})
	good := ev("good", t0)
	for name, mut := range map[string]func(e *event.Event){
		"invalid size JSON":             func(e *event.Event) { e.Payload.Size = jsontext.Value(`{"vcpus":`) },
		"size duplicate member names":   func(e *event.Event) { e.Payload.Size = jsontext.Value(`{"a":1,"a":2}`) },
		"provider two values":           func(e *event.Event) { e.Payload.Provider = jsontext.Value(`1 2`) },
		"unknown names state":           func(e *event.Event) { e.Payload.Unknown = jsontext.Value(`{"state":"x"}`) },
		"unknown names size":            func(e *event.Event) { e.Payload.Unknown = jsontext.Value(`{"size":{}}`) },
		"unknown not an object":         func(e *event.Event) { e.Payload.Unknown = jsontext.Value(`[1]`) },
		"unknown duplicate names":       func(e *event.Event) { e.Payload.Unknown = jsontext.Value(`{"x":1,"x":2}`) },
		"unknown invalid":               func(e *event.Event) { e.Payload.Unknown = jsontext.Value(`{"x":}`) },
		"state invalid UTF-8":           func(e *event.Event) { e.Payload.State = event.StateOf("a\xffb") },
		"resource_id NUL":               func(e *event.Event) { e.ResourceID = "vm-\x00" },
		"resource_id invalid UTF-8":     func(e *event.Event) { e.ResourceID = "vm-\xff" },
		"event_id invalid UTF-8":        func(e *event.Event) { e.EventID = "\xc3" },
		"project_id NUL":                func(e *event.Event) { e.ProjectID = "p\x00" },
		"size lone surrogate escape":    func(e *event.Event) { e.Payload.Size = jsontext.Value(`{"a":"\ud800"}`) },
		"provider invalid UTF-8 string": func(e *event.Event) { e.Payload.Provider = jsontext.Value("\"\xff\"") },
	} {
		t.Run(name, func(t *testing.T) {
			bad := ev("bad-"+name, t0.Add(time.Second))
			mut(&bad)
			for mode := range 3 {
				res, err := pgstore.CommitInMode(ctx, db.Ingest(), ingest.Batch{Events: []event.Event{good, bad}}, mode)
				if err == nil {
					t.Errorf("mode %d: committed %+v, want an error", mode, res)
				}
				if n := count(t, conn, "events"); n != 0 {
					t.Errorf("mode %d: %d events stored", mode, n)
				}
				if n := count(t, conn, "current_resources"); n != 0 {
					t.Errorf("mode %d: %d rows stored", mode, n)
				}
			}
		})
	}
	if _, err := db.Ingest().Commit(ctx, ingest.Batch{Events: []event.Event{good}}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, conn, "events"); n != 1 {
		t.Errorf("%d events stored, want 1", n)
	}
}

// rewriter is an ingest.Store between the Service and pgstore that
// rewrites the events of the batches it forwards (an enricher, a test
// double): the batch it forwards is the Service's, Checked.
type rewriter struct {
	ingest.Store
	rewrite func(e *event.Event)
}

func (r rewriter) Commit(ctx context.Context, b ingest.Batch) (ingest.Committed, error) {
	for i := range b.Events {
		r.rewrite(&b.Events[i])
	}
	return r.Store.Commit(ctx, b)
}

// TestAttackRewrittenCheckedBatch: code between the Service and the store
// that changes a Checked batch's payloads forwards the Checked mark with
// them: Checked sees the payload changed, and Commit refuses what
// MarshalJSON refuses instead of storing a payload that no listing or
// feed can read back (PostgreSQL's json input keeps duplicate names).
func TestAttackRewrittenCheckedBatch(t *testing.T) {
	ctx := context.Background()
	for name, rw := range map[string]func(e *event.Event){
		"unknown names state":     func(e *event.Event) { e.Payload.Unknown = jsontext.Value(`{"state":"evil"}`) },
		"unknown duplicate names": func(e *event.Event) { e.Payload.Unknown = jsontext.Value(`{"x":1,"x":2}`) },
		"size duplicate names":    func(e *event.Event) { e.Payload.Size = jsontext.Value(`{"vcpus":1,"vcpus":2}`) },
	} {
		t.Run(name, func(t *testing.T) {
			db, conn := openDB(t, pgstore.Options{})
			svc, err := ingest.New(rewriter{db.Ingest(), rw}, ingest.Options{})
			if err != nil {
				t.Fatal(err)
			}
			item := []byte(`{"event_id":"rw-1","timestamp":"2026-11-30T09:00:00Z","event_type":"compute.instance.create.end","platform":"openstack","cloud":"east","resource_type":"instance","resource_id":"vm-rw","project_id":"p1","payload":{"state":"active","size":{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"}}}`)
			res, err := svc.Ingest(ctx, ingest.Caller{}, [][]byte{item})
			if err == nil {
				var payload string
				_ = conn.QueryRow(ctx, `SELECT payload::text FROM events`).Scan(&payload)
				_, lerr := db.Ingest().Events(ctx, ingest.EventQuery{})
				t.Fatalf("committed %+v: stored payload %s; listing: %v", res, payload, lerr)
			}
			if n := count(t, conn, "events"); n != 0 {
				t.Errorf("%d events stored after an error", n)
			}
		})
	}
}

// TestAttackConcurrentOverlappingCommits: two DBs (two pools) commit
// overlapping batches (same resources, same keys, some late) at once: no
// deadlock, each key stored once, the Inserted of the two sides partition
// the keys, and each row is the fold of its stored history.
func TestAttackConcurrentOverlappingCommits(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("one DB %v", shared), func(t *testing.T) { concurrentOverlapping(t, shared) })
	}
}

func concurrentOverlapping(t *testing.T, shared bool) {
	ctx := context.Background()
	u := pgtest.URL(t)
	dbs := []*pgstore.DB{pgtest.Open(t, u, pgstore.Options{}), nil}
	if dbs[1] = dbs[0]; !shared {
		dbs[1] = pgtest.Open(t, u, pgstore.Options{})
	}
	base := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	mk := func(i int) event.Event {
		e := ev(fmt.Sprintf("k%03d", i), base.Add(time.Duration(i%37)*time.Minute))
		e.ResourceID = fmt.Sprintf("vm-%d", i%5)
		e.EventType = []string{"compute.instance.create.end", "compute.instance.update", "compute.instance.delete.end"}[i%3]
		return e
	}
	const rounds = 30
	var inserted sync.Map
	var wg sync.WaitGroup
	errs := make(chan error, 2*rounds)
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				var b []event.Event
				for j := range 20 {
					// Both sides commit the keys of round r, in opposite orders, plus their own.
					i := r*10 + j%10
					if w == 1 {
						i = r*10 + 9 - j%10
					}
					if j >= 10 {
						i = 10000 + w*1000 + r*10 + j
					}
					b = append(b, mk(i))
				}
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				res, err := dbs[w].Ingest().Commit(cctx, ingest.Batch{Events: b})
				cancel()
				if err != nil {
					errs <- err
					return
				}
				for i, in := range res.Inserted {
					if in {
						if _, dup := inserted.LoadOrStore(b[i].EventID, w); dup {
							errs <- fmt.Errorf("%s inserted twice", b[i].EventID)
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	items, err := dbs[0].Ingest().Events(ctx, ingest.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	inserted.Range(func(any, any) bool { n++; return true })
	if len(items) != n {
		t.Errorf("%d events stored, %d inserted", len(items), n)
	}
	rows, err := dbs[0].Projection().List(ctx, projection.Query{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		h, err := dbs[0].Projection().History(ctx, row.Key)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(projection.Fold(h), row, cmpopts.EquateComparable(event.State{})); d != "" {
			t.Errorf("row %v (-fold +row):\n%s", row.Key, d)
		}
	}
}
