package pgstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/store/memstore"
	"github.com/tallyhq/tally/store/pgstore"
)

// diffEvent builds a decoded event (a Go caller's batch: not Checked).
func diffEvent(t *testing.T, id, res, typ string, at time.Time, payload string) event.Event {
	t.Helper()
	raw := fmt.Sprintf(`{"event_id":%q,"timestamp":%q,"event_type":%q,"platform":"openstack","cloud":"c☃","resource_type":"volume","resource_id":%q,"project_id":"p","payload":%s}`,
		id, "2026-01-01T00:00:00Z", typ, res, payload)
	ev, err := event.Decode([]byte(raw))
	if err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	ev.Source = event.SourceCollector
	ev.Timestamp = at // a Go caller's nanoseconds, and year 0000
	return ev
}

func readFeed(t *testing.T, st ingest.Store, want int) map[string]bool {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out := map[string]bool{}
		var after ingest.FeedPosition
		for {
			b, err := st.Feed(context.Background(), ingest.FeedRead{After: after, Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range b.Items {
				out[fmt.Sprintf("%s@%d", it.Event.EventID, it.Event.Timestamp.UnixMicro())] = it.Late
			}
			if len(b.Items) == 0 || b.Next == after {
				break
			}
			after = b.Next
		}
		if len(out) >= want || time.Now().After(deadline) {
			return out
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAttackDifferentialRandomBatches commits the same seeded random
// batches to memstore and to pgstore (straight, as a Go caller) and
// compares the Committed results, the stored events, Late and the
// projection: duplicates and conflicts within and across batches, late
// events, equal timestamps with create, update and delete, months apart
// and the ends of time.
func TestAttackDifferentialRandomBatches(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(30) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			pg, _ := openDB(t, pgstore.Options{})
			mem, err := memstore.New(memstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(seed, 99))
			times := []time.Time{
				time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
				time.Date(0, 12, 31, 23, 30, 0, 0, time.UTC),
				time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC),
				time.Date(2026, 1, 31, 23, 59, 59, 999999999, time.UTC),
				time.Date(2026, 2, 1, 0, 0, 0, 500, time.UTC),
				time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC),
				time.Date(2026, 3, 15, 12, 0, 0, 0, time.FixedZone("", 5*3600)),
				time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
			}
			payloads := []string{
				`{"state":"active","size":{"size_gb":1}}`,
				`{"state":null}`,
				`{}`,
				`{"state":"","zz":{"a":[1,2]},"provider":{"é":"☃"}}`,
				`{"size":{"size_gb":2},"other":"x"}`,
			}
			types := []string{"volume.create.end", "volume.resize.end", "volume.delete.end"}
			resources := []string{"vol-a", "vol-b", "vol-é", ""}
			var total int
			for b := range 15 {
				var batch []event.Event
				for range 1 + r.IntN(8) {
					batch = append(batch, diffEvent(t,
						fmt.Sprintf("e%d", r.IntN(12)), resources[r.IntN(len(resources))], types[r.IntN(len(types))],
						times[r.IntN(len(times))], payloads[r.IntN(len(payloads))]))
				}
				var before []string
				for _, rid := range resources {
					k := projection.Key{Cloud: "c☃", ResourceType: "volume", ResourceID: rid}
					rm, em := mem.Projection().Get(ctx, k)
					rp, ep := pg.Projection().Get(ctx, k)
					before = append(before, fmt.Sprintf("%q mem %+v %v\n   pg %+v %v", rid, rm, em, rp, ep))
				}
				rm, errM := mem.Ingest().Commit(ctx, ingest.Batch{Events: batch})
				rp, errP := pg.Ingest().Commit(ctx, ingest.Batch{Events: batch})
				if errP != nil {
					parts, _ := pg.EventPartitions(ctx)
					for _, p := range parts {
						t.Logf("  %s %v %v", p.Name, p.From, p.To)
					}
				}
				if (errM == nil) != (errP == nil) {
					t.Fatalf("batch %d %v: memstore %v, pgstore %v", b, batch, errM, errP)
				}
				if errM != nil {
					continue
				}
				if d := cmp.Diff(rm, rp); d != "" {
					for _, r := range before {
						t.Logf("before: %s", r)
					}
					t.Fatalf("batch %d %v: committed (-mem +pg):\n%s", b, batch, d)
				}
				for _, in := range rm.Inserted {
					if in {
						total++
					}
				}
			}
			em, err := mem.Ingest().Events(ctx, ingest.EventQuery{})
			if err != nil {
				t.Fatal(err)
			}
			ep, err := pg.Ingest().Events(ctx, ingest.EventQuery{})
			if err != nil {
				t.Fatal(err)
			}
			norm := func(items []ingest.StoredEvent) []ingest.StoredEvent {
				out := make([]ingest.StoredEvent, len(items))
				for i, it := range items {
					it.ReceivedAt = time.Time{}
					out[i] = it
				}
				sort.Slice(out, func(i, j int) bool {
					a, b := out[i].Event, out[j].Event
					if a.EventID != b.EventID {
						return a.EventID < b.EventID
					}
					return a.Timestamp.Before(b.Timestamp)
				})
				return out
			}
			if d := cmp.Diff(norm(em), norm(ep), cmpopts.EquateComparable(event.State{})); d != "" {
				t.Errorf("stored events (-mem +pg):\n%s", d)
			}
			if len(em) != total {
				t.Errorf("%d stored, %d inserted", len(em), total)
			}
			if d := cmp.Diff(readFeed(t, mem.Ingest(), total), readFeed(t, pg.Ingest(), total)); d != "" {
				t.Errorf("late (-mem +pg):\n%s", d)
			}
			pm, err := mem.Projection().List(ctx, projection.Query{Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			pp, err := pg.Projection().List(ctx, projection.Query{Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			if len(pm) < 2 {
				t.Errorf("%d rows listed", len(pm))
			}
			if d := cmp.Diff(pm, pp); d != "" {
				t.Errorf("projection (-mem +pg):\n%s", d)
			}
			// The projection is the fold of each resource's stored events.
			for _, row := range pp {
				h, err := pg.Projection().History(ctx, row.Key)
				if err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(projection.Fold(h), row, cmpopts.EquateComparable(event.State{})); d != "" {
					t.Errorf("row %v is not the fold of its history (-fold +row):\n%s", row.Key, d)
				}
			}
			// Rebuild changes nothing.
			if _, err := pg.Projection().Rebuild(ctx, projection.RebuildQuery{}, nil); err != nil {
				t.Fatal(err)
			}
			pr, err := pg.Projection().List(ctx, projection.Query{Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(pp, pr); d != "" {
				t.Errorf("rebuild (-before +after):\n%s", d)
			}
		})
	}
}
