package projection_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest/projection"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ev(id, typ string, at time.Duration, project, state, size string) event.Event {
	e := event.Event{
		EventID: id, Timestamp: t0.Add(at), EventType: typ,
		Platform: "openstack", Cloud: "c1", ResourceType: "volume", ResourceID: "v-1",
		ProjectID: project,
	}
	if state != "" {
		e.Payload.State = event.StateOf(state)
	}
	if size != "" {
		e.Payload.Size = jsontext.Value(size)
	}
	return e
}

func ptr(t time.Time) *time.Time { return &t }

func TestFoldRules(t *testing.T) {
	key := projection.Key{Cloud: "c1", ResourceType: "volume", ResourceID: "v-1"}
	tests := []struct {
		name    string
		history []event.Event
		want    projection.Resource
	}{
		{
			// "A create sets created_at to the event's timestamp and requires
			// payload.size beside payload.state."
			name:    "create sets created_at, state and size",
			history: []event.Event{ev("e1", "volume.create.end", 0, "p1", "available", `{"size_gb":1}`)},
			want: projection.Resource{Key: key, Platform: "openstack", ProjectID: "p1", State: "available",
				Size: jsontext.Value(`{"size_gb":1}`), CreatedAt: ptr(t0), FirstEventAt: t0, LastEventAt: t0,
				LastEventType: "volume.create.end", LastEventID: "e1"},
		},
		{
			// "An update applies payload.state, payload.size and the top-level
			// project_id as the event carries them." "Absent means the size
			// did not change."
			name: "update applies state and owner, absent size keeps the size",
			history: []event.Event{
				ev("e1", "volume.create.end", 0, "p1", "available", `{"size_gb":1}`),
				ev("e2", "volume.attach.end", time.Minute, "p2", "in-use", ""),
			},
			want: projection.Resource{Key: key, Platform: "openstack", ProjectID: "p2", State: "in-use",
				Size: jsontext.Value(`{"size_gb":1}`), CreatedAt: ptr(t0), FirstEventAt: t0, LastEventAt: t0.Add(time.Minute),
				LastEventType: "volume.attach.end", LastEventID: "e2"},
		},
		{
			// "A delete sets deleted_at and forces the state to deleted."
			name: "delete sets deleted_at and forces state deleted, size kept",
			history: []event.Event{
				ev("e1", "volume.create.end", 0, "p1", "available", `{"size_gb":1}`),
				ev("e2", "volume.delete.end", time.Minute, "p1", "deleting", ""),
			},
			want: projection.Resource{Key: key, Platform: "openstack", ProjectID: "p1", State: "deleted",
				Size: jsontext.Value(`{"size_gb":1}`), CreatedAt: ptr(t0), DeletedAt: ptr(t0.Add(time.Minute)),
				FirstEventAt: t0, LastEventAt: t0.Add(time.Minute), LastEventType: "volume.delete.end", LastEventID: "e2"},
		},
		{
			name: "a late update older than a delete never revives the resource",
			history: []event.Event{
				ev("e3", "volume.delete.end", 2*time.Minute, "p1", "", ""),
				ev("e1", "volume.create.end", 0, "p1", "available", `{"size_gb":1}`),
				ev("e2", "volume.resize.end", time.Minute, "p1", "available", `{"size_gb":5}`),
			},
			want: projection.Resource{Key: key, Platform: "openstack", ProjectID: "p1", State: "deleted",
				Size: jsontext.Value(`{"size_gb":5}`), CreatedAt: ptr(t0), DeletedAt: ptr(t0.Add(2 * time.Minute)),
				FirstEventAt: t0, LastEventAt: t0.Add(2 * time.Minute), LastEventType: "volume.delete.end", LastEventID: "e3"},
		},
		{
			name: "an update after a delete does not revive; a create does",
			history: []event.Event{
				ev("e1", "volume.create.end", 0, "p1", "available", `{"size_gb":1}`),
				ev("e2", "volume.delete.end", time.Minute, "p1", "", ""),
				ev("e3", "volume.update", 2*time.Minute, "p1", "available", `{"size_gb":9}`),
				ev("e4", "volume.create.end", 3*time.Minute, "p3", "creating", `{"size_gb":2}`),
			},
			want: projection.Resource{Key: key, Platform: "openstack", ProjectID: "p3", State: "creating",
				Size: jsontext.Value(`{"size_gb":2}`), CreatedAt: ptr(t0.Add(3 * time.Minute)),
				FirstEventAt: t0, LastEventAt: t0.Add(3 * time.Minute), LastEventType: "volume.create.end", LastEventID: "e4"},
		},
		{
			name: "equal timestamps: create < update < delete, then event_id",
			history: []event.Event{
				ev("a", "volume.delete.end", 0, "p1", "", ""),
				ev("z", "volume.update", 0, "p1", "in-use", ""),
				ev("y", "volume.update", 0, "p1", "error", ""),
				ev("m", "volume.create.end", 0, "p1", "available", `{"size_gb":1}`),
			},
			want: projection.Resource{Key: key, Platform: "openstack", ProjectID: "p1", State: "deleted",
				Size: jsontext.Value(`{"size_gb":1}`), CreatedAt: ptr(t0), DeletedAt: ptr(t0),
				FirstEventAt: t0, LastEventAt: t0, LastEventType: "volume.delete.end", LastEventID: "a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, projection.Fold(tt.history)); diff != "" {
				t.Errorf("Fold (-want +got):\n%s", diff)
			}
		})
	}
}

// incremental folds events in arrival order the way a store does: Apply
// when the event sorts after the row's last event, else replay the history.
func incremental(arrivals []event.Event) (projection.Resource, int) {
	var r projection.Resource
	var seen []event.Event
	replays := 0
	for i := range arrivals {
		e := arrivals[i]
		seen = append(seen, e)
		if len(seen) == 1 || r.After(&e) {
			projection.Apply(&r, &e)
			continue
		}
		replays++
		r = projection.Fold(seen)
	}
	return r, replays
}

func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := append(append(append([]int{}, p[:i]...), n-1), p[i:]...)
			out = append(out, q)
		}
	}
	return out
}

func TestFoldEveryArrivalOrderOfAFiveEventHistory(t *testing.T) {
	history := []event.Event{
		ev("e1", "volume.create.end", 0, "p1", "available", `{"size_gb":1}`),
		ev("e2", "volume.attach.end", time.Minute, "p1", "in-use", ""),
		ev("e3", "volume.retype", 2*time.Minute, "p2", "available", `{"size_gb":1,"type":"ssd"}`),
		ev("e4", "volume.delete.end", 3*time.Minute, "p2", "", ""),
		ev("e5", "volume.create.end", 4*time.Minute, "p3", "creating", `{"size_gb":2}`),
	}
	want := projection.Fold(history)
	orders := permutations(len(history))
	if len(orders) != 120 {
		t.Fatalf("got %d orders, want 120", len(orders))
	}
	for _, order := range orders {
		arrivals := make([]event.Event, len(order))
		for i, j := range order {
			arrivals[i] = history[j]
		}
		got, _ := incremental(arrivals)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("arrival order %v (-want +got):\n%s", order, diff)
		}
	}
}

// RandomHistory builds a random history of one resource: creates, updates
// with and without size, owner transfers, deletes, re-creates, and equal
// timestamps.
func randomHistory(r *rand.Rand, n int) []event.Event {
	types := []string{"volume.create.end", "volume.update", "volume.resize.end", "volume.delete.end", "sync.update"}
	out := make([]event.Event, n)
	for i := range out {
		typ := types[r.IntN(len(types))]
		size := ""
		if typ == "volume.create.end" || r.IntN(2) == 0 {
			size = fmt.Sprintf(`{"size_gb":%d}`, r.IntN(100)+1)
		}
		out[i] = ev(fmt.Sprintf("e%02d", i), typ, time.Duration(r.IntN(n))*time.Second,
			fmt.Sprintf("p%d", r.IntN(3)), fmt.Sprintf("s%d", r.IntN(4)), size)
	}
	return out
}

func TestFoldPropertyIncrementalEqualsInOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		h := randomHistory(r, 1+r.IntN(12))
		want := projection.Fold(h)
		r.Shuffle(len(h), func(i, j int) { h[i], h[j] = h[j], h[i] })
		got, _ := incremental(h)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("history %d (-want +got):\n%s", i, diff)
		}
	}
}

// TestFoldBatchRandomBatching drives FoldBatch the way a store does, over
// several resources, random batching and random arrival order: every row
// equals the in-order fold of its resource's history.
func TestFoldBatchRandomBatching(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 300 {
		var all []event.Event
		for res := range 1 + r.IntN(4) {
			h := randomHistory(r, 1+r.IntN(10))
			for i := range h {
				h[i].ResourceID = fmt.Sprintf("v-%d", res)
				h[i].EventID = fmt.Sprintf("r%d-%s", res, h[i].EventID)
			}
			all = append(all, h...)
		}
		r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })

		stored := map[projection.Key][]event.Event{}
		rows := map[projection.Key]projection.Resource{}
		for len(all) > 0 {
			n := 1 + r.IntN(len(all))
			batch := all[:n]
			all = all[n:]
			for _, e := range batch {
				stored[projection.KeyOf(&e)] = append(stored[projection.KeyOf(&e)], e)
			}
			got, _, err := projection.FoldBatch(batch,
				func(k projection.Key) (projection.Resource, bool) { row, ok := rows[k]; return row, ok },
				func(k projection.Key) ([]event.Event, error) { return stored[k], nil })
			if err != nil {
				t.Fatal(err)
			}
			for k, row := range got {
				rows[k] = row
			}
		}
		for k, h := range stored {
			if diff := cmp.Diff(projection.Fold(h), rows[k]); diff != "" {
				t.Fatalf("round %d, %v (-want +got):\n%s", round, k, diff)
			}
		}
	}
}

func TestFoldBatchCountsReplaysOfLateEvents(t *testing.T) {
	early := ev("e1", "volume.create.end", 0, "p1", "available", `{"size_gb":1}`)
	late := ev("e2", "volume.attach.end", time.Minute, "p1", "in-use", "")
	row := projection.Fold([]event.Event{late})
	_, replays, err := projection.FoldBatch([]event.Event{early},
		func(projection.Key) (projection.Resource, bool) { return row, true },
		func(projection.Key) ([]event.Event, error) { return []event.Event{early, late}, nil })
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{"c1": 1}, replays); diff != "" {
		t.Errorf("replays (-want +got):\n%s", diff)
	}
}
