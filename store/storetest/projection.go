package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/store"
)

// runProjection is the conformance suite of the projection of current
// resources (canonical-event.md, Event: "The events table is the system's
// single source of truth; everything else is derived from it and
// rebuildable"; the projection rules). Every case drives the public ingest.Service and
// reads the rows back through projection.Store.
func runProjection(t *testing.T, newStore func(t *testing.T) ingestStore) {
	t.Run("every arrival order of a five-event history gives the same row", func(t *testing.T) {
		t.Parallel()
		testProjectionPermutations(t, newStore(t))
	})
	t.Run("random histories, batching and order give the in-order fold", func(t *testing.T) {
		t.Parallel()
		testProjectionProperty(t, newStore(t), 8)
	})
	t.Run("a late update older than a delete never revives a deleted resource", func(t *testing.T) {
		t.Parallel()
		testProjectionLateUpdate(t, newStore(t))
	})
	t.Run("a Go caller's nanoseconds: the fold orders and replays by the microsecond kept", func(t *testing.T) {
		t.Parallel()
		testProjectionSubMicro(t, newStore(t))
	})
	t.Run("created, deleted and created again: incremental equals replay", func(t *testing.T) {
		t.Parallel()
		testProjectionRecreate(t, newStore(t))
	})
	t.Run("duplicates and refusals never touch the projection", func(t *testing.T) {
		t.Parallel()
		testProjectionDuplicates(t, newStore(t))
	})
	t.Run("rebuild equals incremental and is idempotent", func(t *testing.T) {
		t.Parallel()
		testProjectionRebuild(t, newStore(t))
	})
	t.Run("resources are listed by filter, alive-at instant and page", func(t *testing.T) {
		t.Parallel()
		testProjectionQueries(t, newStore(t))
	})
	t.Run("stored events are listed by filter, window and position, with received_at", func(t *testing.T) {
		t.Parallel()
		testStoredEvents(t, newStore(t))
	})
	t.Run("listing pages stop at their limit or their byte budget, whichever comes first", func(t *testing.T) {
		t.Parallel()
		testPageBytes(t, newStore(t))
	})
	t.Run("a resource's read and its events stop at the byte budget and point to the rest", func(t *testing.T) {
		t.Parallel()
		testResourceHistoryBytes(t, newStore(t))
	})
	t.Run("resources are counted by platform, cloud, resource type and state", func(t *testing.T) {
		t.Parallel()
		testProjectionCounts(t, newStore(t))
	})
	t.Run("concurrent batches on the same resources converge", func(t *testing.T) {
		t.Parallel()
		testProjectionConcurrent(t, newStore(t), 4, 8)
	})
}

// projEvent is one canonical volume event of cloud c1 for the projection
// tests.
type projEvent struct {
	id, typ, resource, project, state string
	at                                time.Duration
	sizeGB                            int // 0: no size
}

func (p projEvent) bytes() []byte {
	payload := map[string]any{}
	if p.state != "" {
		payload["state"] = p.state
	}
	if p.sizeGB > 0 {
		payload["size"] = map[string]any{"size_gb": p.sizeGB, "type": "ssd"}
	}
	b, err := json.Marshal(map[string]any{
		"event_id": p.id, "timestamp": t0.Add(p.at).Format(time.RFC3339Nano), "event_type": p.typ,
		"platform": "openstack", "cloud": "c1", "resource_type": "volume", "resource_id": p.resource,
		"project_id": p.project, "payload": payload,
	}, json.Deterministic(true))
	if err != nil {
		panic(err)
	}
	return b
}

func ingestOne(t *testing.T, svc *ingest.Service, evs ...projEvent) ingest.Result {
	t.Helper()
	raw := make([][]byte, len(evs))
	for i, e := range evs {
		raw[i] = e.bytes()
	}
	res, err := svc.Ingest(context.Background(), ingest.Caller{Credential: "test"}, raw)
	if err != nil {
		t.Fatalf("Ingest: %v", err)
	}
	if len(res.Rejected) > 0 {
		t.Fatalf("Ingest refused items: %+v", res.Rejected)
	}
	return res
}

func newService(t *testing.T, st ingestStore, obs ingest.Observer) *ingest.Service {
	t.Helper()
	svc, err := ingest.New(st, ingest.Options{Now: newClock().Now, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func volumeKey(id string) projection.Key {
	return projection.Key{Cloud: "c1", ResourceType: "volume", ResourceID: id}
}

// wantRow is the in-order fold of the resource's stored history.
func wantRow(t *testing.T, st ingestStore, k projection.Key) projection.Resource {
	t.Helper()
	h, err := st.Projection().History(context.Background(), k)
	if err != nil {
		t.Fatalf("History: %v", err)
	}
	if len(h) == 0 {
		t.Fatalf("History of %v is empty", k)
	}
	return projection.Fold(h)
}

func gotRow(t *testing.T, st ingestStore, k projection.Key) projection.Resource {
	t.Helper()
	r, err := st.Projection().Get(context.Background(), k)
	if err != nil {
		t.Fatalf("Resource(%v): %v", k, err)
	}
	return r
}

func fiveEvents(resource string) []projEvent {
	return []projEvent{
		{"e1", "volume.create.end", resource, "p1", "available", 0, 1},
		{"e2", "volume.attach.end", resource, "p1", "in-use", time.Minute, 0},
		{"e3", "volume.retype", resource, "p2", "available", 2 * time.Minute, 2},
		{"e4", "volume.delete.end", resource, "p2", "", 3 * time.Minute, 0},
		{"e5", "volume.create.end", resource, "p3", "creating", 4 * time.Minute, 3},
	}
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

func testProjectionPermutations(t *testing.T, st ingestStore) {
	svc := newService(t, st, nil)
	// The reference row: the history folded in timestamp order.
	var want projection.Resource
	{
		var h []event.Event
		for _, p := range fiveEvents("v-ref") {
			e, err := event.Decode(p.bytes())
			if err != nil {
				t.Fatal(err)
			}
			e.Source = event.SourceCollector
			h = append(h, e)
		}
		want = projection.Fold(h)
	}
	orders := permutations(5)
	if len(orders) != 120 {
		t.Fatalf("%d orders, want 120", len(orders))
	}
	for n, order := range orders {
		res := fmt.Sprintf("v-%03d", n)
		evs := fiveEvents(res)
		for _, j := range order {
			e := evs[j]
			e.id = res + "-" + e.id
			ingestOne(t, svc, e) // one event per batch
		}
	}
	for n, order := range orders {
		res := fmt.Sprintf("v-%03d", n)
		w := want
		w.ResourceID = res
		w.LastEventID = res + "-" + want.LastEventID
		if diff := cmp.Diff(w, gotRow(t, st, volumeKey(res))); diff != "" {
			t.Fatalf("arrival order %v (-want +got):\n%s", order, diff)
		}
	}
}

// randomHistory is a random history of one volume: creates, updates with
// and without size, owner transfers, deletes, re-creates and equal
// timestamps.
func randomHistory(r *rand.Rand, resource string, n int) []projEvent {
	types := []string{"volume.create.end", "volume.update", "volume.resize.end", "volume.delete.end", "sync.update", "sync.create"}
	out := make([]projEvent, n)
	for i := range out {
		p := projEvent{
			id: fmt.Sprintf("%s-e%02d", resource, i), typ: types[r.IntN(len(types))], resource: resource,
			project: fmt.Sprintf("p%d", r.IntN(3)), state: fmt.Sprintf("s%d", r.IntN(4)),
			at: time.Duration(r.IntN(n)) * time.Second,
		}
		if event.Categorize(p.typ) == event.CategoryCreate || r.IntN(2) == 0 {
			p.sizeGB = 1 + r.IntN(100)
		}
		if event.Categorize(p.typ) == event.CategoryDelete && r.IntN(2) == 0 {
			p.state = ""
		}
		out[i] = p
	}
	return out
}

func testProjectionProperty(t *testing.T, st ingestStore, rounds int) {
	svc := newService(t, st, nil)
	r := rand.New(rand.NewPCG(7, 11))
	var keys []projection.Key
	for round := range rounds {
		var all []projEvent
		for res := range 1 + r.IntN(4) {
			id := fmt.Sprintf("r%d-v%d", round, res)
			keys = append(keys, volumeKey(id))
			all = append(all, randomHistory(r, id, 1+r.IntN(10))...)
		}
		r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		for len(all) > 0 {
			n := 1 + r.IntN(len(all))
			ingestOne(t, svc, all[:n]...)
			all = all[n:]
		}
	}
	for _, k := range keys {
		if diff := cmp.Diff(wantRow(t, st, k), gotRow(t, st, k)); diff != "" {
			t.Fatalf("%v (-in-order fold +stored row):\n%s", k, diff)
		}
	}
}

type replayCounter struct {
	nopCounts
	mu      sync.Mutex
	replays map[string]int
}

type nopCounts struct{}

func (nopCounts) Ingested(string, event.Source, int)  {}
func (nopCounts) Duplicates(int)                      {}
func (nopCounts) Rejected(string, ingest.Kind, int)   {}
func (nopCounts) UnvalidatedSize(string, string, int) {}
func (nopCounts) ProjectionReplays(string, int)       {}

func (c *replayCounter) ProjectionReplays(cloud string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.replays == nil {
		c.replays = map[string]int{}
	}
	c.replays[cloud] += n
}

func testProjectionLateUpdate(t *testing.T, st ingestStore) {
	obs := &replayCounter{}
	svc := newService(t, st, obs)
	ingestOne(t, svc, projEvent{"c", "volume.create.end", "v-late", "p1", "available", 0, 10})
	ingestOne(t, svc, projEvent{"d", "volume.delete.end", "v-late", "p1", "", 2 * time.Minute, 0})
	// The update is older than the delete: it arrives late.
	ingestOne(t, svc, projEvent{"u", "volume.resize.end", "v-late", "p1", "available", time.Minute, 20})
	got := gotRow(t, st, volumeKey("v-late"))
	del := t0.Add(2 * time.Minute)
	want := projection.Resource{
		Key: volumeKey("v-late"), Platform: "openstack", ProjectID: "p1", State: "deleted",
		Size:      []byte(`{"size_gb":20,"type":"ssd"}`),
		CreatedAt: &t0, DeletedAt: &del, FirstEventAt: t0, LastEventAt: del,
		LastEventType: "volume.delete.end", LastEventID: "d",
	}
	if diff := cmp.Diff(want, got, cmpJSONBytes); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	// "A late event (older than the row's last_event_at) replays that
	// resource's history; count replays in a counter."
	if diff := cmp.Diff(map[string]int{"c1": 1}, obs.replays); diff != "" {
		t.Errorf("replays (-want +got):\n%s", diff)
	}
}

// testProjectionSubMicro commits events straight to the store (a Go
// caller that did not normalize its timestamps) whose nanoseconds differ
// within one microsecond: the stores keep, order and fold every event by
// its microsecond, so an update of the stored row's microsecond with a
// smaller event_id sorts before the stored last event (projection.Compare)
// and replays the history, and two updates of one microsecond in one batch
// fold by event_id, whatever their nanoseconds; the row is the fold of the
// stored history.
func testProjectionSubMicro(t *testing.T, st ingestStore) {
	ctx := context.Background()
	base := t0.Add(time.Hour)
	mk := func(id, typ, state string, at time.Time) event.Event {
		return subMicroEvent(t, volumeCreate(id, base).set("event_type", typ).set("payload.state", state), at)
	}
	at := base.Add(time.Minute)
	k := volumeKey("vol-ns")
	for _, b := range [][]event.Event{
		{mk("n-create", "volume.create.end", "available", base)},
		{mk("n-7", "volume.resize.end", "seven", at)},
		// n-1 is of n-7's microsecond, 999 ns later: before n-7 by event_id.
		{mk("n-1", "volume.resize.end", "one", at.Add(999))},
		// One batch: n-3 has fewer nanoseconds than n-2, one microsecond.
		{mk("n-2", "volume.resize.end", "two", at.Add(time.Microsecond+900)), mk("n-3", "volume.resize.end", "three", at.Add(time.Microsecond+100))},
	} {
		if _, err := st.Commit(ctx, ingest.Batch{Events: b}); err != nil {
			t.Fatal(err)
		}
		h, err := st.Projection().History(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(projection.Fold(h), gotRow(t, st, k), cmpJSONBytes, cmpopts.EquateComparable(event.State{})); diff != "" {
			t.Errorf("after %s: row is not the fold of the stored history (-fold +row):\n%s", b[0].EventID, diff)
		}
	}
	got := gotRow(t, st, k)
	if got.State != "three" || got.LastEventID != "n-3" {
		t.Errorf("row state %q, last event %q: want three, n-3 (n-1 before n-7, n-2 before n-3)", got.State, got.LastEventID)
	}
}

// cmpJSONBytes compares sizes by JSON value, since a store may reformat the
// whitespace of stored JSON.
var cmpJSONBytes = cmp.Comparer(func(a, b []byte) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	x, err1 := normJSON(a)
	y, err2 := normJSON(b)
	return err1 == nil && err2 == nil && cmp.Equal(x, y)
})

func testProjectionRecreate(t *testing.T, st ingestStore) {
	svc := newService(t, st, nil)
	history := []projEvent{
		{"a1", "volume.create.end", "v-inc", "p1", "available", 0, 1},
		{"a2", "volume.delete.end", "v-inc", "p1", "", time.Minute, 0},
		{"a3", "volume.create.end", "v-inc", "p2", "creating", 2 * time.Minute, 2},
	}
	for _, e := range history {
		ingestOne(t, svc, e) // in order: incremental
	}
	replayed := []projEvent{history[2], history[1], history[0]}
	for _, e := range replayed {
		e.resource = "v-rep"
		e.id = "b" + e.id[1:]
		ingestOne(t, svc, e) // reversed: every later batch replays
	}
	inc, rep := gotRow(t, st, volumeKey("v-inc")), gotRow(t, st, volumeKey("v-rep"))
	if inc.State != "creating" || inc.DeletedAt != nil || inc.CreatedAt == nil || !inc.CreatedAt.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("re-created resource: state %q, created_at %v, deleted_at %v; want creating, %v, nil", inc.State, inc.CreatedAt, inc.DeletedAt, t0.Add(2*time.Minute))
	}
	rep.ResourceID, rep.LastEventID = inc.ResourceID, inc.LastEventID
	if diff := cmp.Diff(inc, rep, cmpJSONBytes); diff != "" {
		t.Errorf("incremental (-) vs replayed (+):\n%s", diff)
	}
}

func testProjectionDuplicates(t *testing.T, st ingestStore) {
	svc := newService(t, st, nil)
	first := projEvent{"x1", "volume.create.end", "v-dup", "p1", "available", 0, 1}
	ingestOne(t, svc, first)
	before := gotRow(t, st, volumeKey("v-dup"))
	// The same (event_id, timestamp) with another body is a duplicate: it
	// is not stored, so it is not folded.
	dup := first
	dup.state, dup.project = "error", "p9"
	res, err := svc.Ingest(context.Background(), ingest.Caller{Credential: "test"}, [][]byte{dup.bytes()})
	if err != nil || res.Duplicates != 1 {
		t.Fatalf("Ingest duplicate: %+v, %v", res, err)
	}
	// A refused item (no state on an update) is dead-lettered, not folded.
	bad := projEvent{"x2", "volume.update", "v-dup", "p9", "", time.Minute, 0}
	res, err = svc.Ingest(context.Background(), ingest.Caller{Credential: "test"}, [][]byte{bad.bytes()})
	if err != nil || len(res.Rejected) != 1 {
		t.Fatalf("Ingest refused item: %+v, %v", res, err)
	}
	if diff := cmp.Diff(before, gotRow(t, st, volumeKey("v-dup"))); diff != "" {
		t.Errorf("row changed (-before +after):\n%s", diff)
	}
	// A resource only refused items named has no row.
	other := projEvent{"x3", "volume.update", "v-none", "p1", "", 0, 0}
	if _, err := svc.Ingest(context.Background(), ingest.Caller{Credential: "test"}, [][]byte{other.bytes()}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Projection().Get(context.Background(), volumeKey("v-none")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Resource of a never-stored resource: %v, want store.ErrNotFound", err)
	}
}

func allResources(t *testing.T, st ingestStore, q projection.Query) []projection.Resource {
	t.Helper()
	q.Limit = 1000
	var out []projection.Resource
	for {
		page, err := st.Projection().List(context.Background(), q)
		if err != nil {
			t.Fatalf("Resources: %v", err)
		}
		out = append(out, page...)
		if len(page) < q.Limit {
			return out
		}
		last := page[len(page)-1].Key
		q.After = &last
	}
}

func testProjectionRebuild(t *testing.T, st ingestStore) {
	svc := newService(t, st, nil)
	r := rand.New(rand.NewPCG(5, 6))
	var all []projEvent
	for res := range 12 {
		all = append(all, randomHistory(r, fmt.Sprintf("rb-%02d", res), 1+r.IntN(8))...)
	}
	r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	for len(all) > 0 {
		n := 1 + r.IntN(len(all))
		ingestOne(t, svc, all[:n]...)
		all = all[n:]
	}
	incremental := allResources(t, st, projection.Query{})
	var progress []int
	n, err := st.Projection().Rebuild(context.Background(), projection.RebuildQuery{BatchSize: 5}, func(done int) { progress = append(progress, done) })
	if err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
	if n != 12 {
		t.Errorf("rebuilt %d resources, want 12", n)
	}
	if diff := cmp.Diff([]int{5, 10, 12}, progress); diff != "" {
		t.Errorf("progress in bounded steps of 5 (-want +got):\n%s", diff)
	}
	rebuilt := allResources(t, st, projection.Query{})
	if diff := cmp.Diff(incremental, rebuilt, cmpJSONBytes); diff != "" {
		t.Errorf("rebuild differs from incremental (-incremental +rebuilt):\n%s", diff)
	}
	if _, err := st.Projection().Rebuild(context.Background(), projection.RebuildQuery{Cloud: "c1", ResourceType: "volume"}, nil); err != nil {
		t.Fatalf("second Rebuild: %v", err)
	}
	if diff := cmp.Diff(rebuilt, allResources(t, st, projection.Query{}), cmpJSONBytes); diff != "" {
		t.Errorf("rebuild is not idempotent (-first +second):\n%s", diff)
	}
	if n, err := st.Projection().Rebuild(context.Background(), projection.RebuildQuery{Cloud: "elsewhere"}, nil); err != nil || n != 0 {
		t.Errorf("rebuild of a cloud with no events: %d, %v; want 0, nil", n, err)
	}
}

func testProjectionQueries(t *testing.T, st ingestStore) {
	svc := newService(t, st, nil)
	ingestOne(t, svc,
		projEvent{"q1", "volume.create.end", "q-a", "p1", "available", 0, 1},
		projEvent{"q2", "volume.create.end", "q-b", "p2", "in-use", time.Minute, 1},
		projEvent{"q3", "volume.create.end", "q-c", "p1", "available", 2 * time.Minute, 1},
		projEvent{"q4", "volume.delete.end", "q-c", "p1", "", 3 * time.Minute, 0},
	)
	ids := func(rs []projection.Resource) []string {
		out := []string{}
		for _, r := range rs {
			out = append(out, r.ResourceID)
		}
		return out
	}
	tests := []struct {
		name string
		q    projection.Query
		want []string
	}{
		{"all, ordered by key", projection.Query{}, []string{"q-a", "q-b", "q-c"}},
		{"by cloud", projection.Query{Cloud: "c1"}, []string{"q-a", "q-b", "q-c"}},
		{"by another cloud", projection.Query{Cloud: "c2"}, []string{}},
		{"by platform and type", projection.Query{Platform: "openstack", ResourceType: "volume"}, []string{"q-a", "q-b", "q-c"}},
		{"by project", projection.Query{ProjectID: "p1"}, []string{"q-a", "q-c"}},
		{"by state", projection.Query{State: "deleted"}, []string{"q-c"}},
		// The Reporting API's status filter (the existing-clients rules): active is every row
		// whose state is not deleted, deleted those alone, all both; it and
		// state are independent filters.
		{"status active", projection.Query{Status: projection.StatusActive}, []string{"q-a", "q-b"}},
		{"status deleted", projection.Query{Status: projection.StatusDeleted}, []string{"q-c"}},
		{"status all", projection.Query{Status: projection.StatusAll}, []string{"q-a", "q-b", "q-c"}},
		{"status active of project p1", projection.Query{Status: projection.StatusActive, ProjectID: "p1"}, []string{"q-a"}},
		{"state contradicting status", projection.Query{State: "available", Status: projection.StatusDeleted}, []string{}},
		{"alive before any create", projection.Query{AliveAt: t0.Add(-time.Second)}, []string{}},
		{"alive at the first create", projection.Query{AliveAt: t0}, []string{"q-a"}},
		{"alive while q-c lived", projection.Query{AliveAt: t0.Add(150 * time.Second)}, []string{"q-a", "q-b", "q-c"}},
		{"alive at q-c's delete", projection.Query{AliveAt: t0.Add(3 * time.Minute)}, []string{"q-a", "q-b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, ids(allResources(t, st, tt.q))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	t.Run("pages of one", func(t *testing.T) {
		var got []string
		q := projection.Query{Limit: 1}
		for range 5 {
			page, err := st.Projection().List(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			got = append(got, ids(page)...)
			q.After = &page[0].Key
		}
		if diff := cmp.Diff([]string{"q-a", "q-b", "q-c"}, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("history in fold order", func(t *testing.T) {
		h, err := st.Projection().History(context.Background(), volumeKey("q-c"))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range h {
			got = append(got, e.EventID)
		}
		if diff := cmp.Diff([]string{"q3", "q4"}, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

// testProjectionConcurrent ingests overlapping histories from many
// goroutines at once: no error, no deadlock, and every row converges to
// the in-order fold.
func testProjectionConcurrent(t *testing.T, st ingestStore, resources, goroutines int) {
	svc := newService(t, st, nil)
	r := rand.New(rand.NewPCG(9, 9))
	var all []projEvent
	var keys []projection.Key
	for res := range resources {
		id := fmt.Sprintf("cc-%02d", res)
		keys = append(keys, volumeKey(id))
		all = append(all, randomHistory(r, id, 20)...)
	}
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		mine := append([]projEvent(nil), all...)
		gr := rand.New(rand.NewPCG(uint64(g), 1))
		gr.Shuffle(len(mine), func(i, j int) { mine[i], mine[j] = mine[j], mine[i] })
		wg.Go(func() {
			for len(mine) > 0 {
				n := 1 + gr.IntN(min(len(mine), 10))
				raw := make([][]byte, n)
				for i, e := range mine[:n] {
					raw[i] = e.bytes()
				}
				mine = mine[n:]
				if _, err := svc.Ingest(context.Background(), ingest.Caller{Credential: "test"}, raw); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent Ingest: %v", err)
	}
	for _, k := range keys {
		if diff := cmp.Diff(wantRow(t, st, k), gotRow(t, st, k), cmpJSONBytes); diff != "" {
			t.Errorf("%v did not converge (-in-order fold +row):\n%s", k, diff)
		}
	}
}

// runWindows checks that a listing window finer than a microsecond selects
// the same rows on every store (stored times have microsecond precision).
func runWindows(t *testing.T, newStore func(t *testing.T) ingestStore) {
	st := newStore(t)
	at := t0.Add(5 * time.Second)
	svc, err := ingest.New(st, ingest.Options{Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Ingest(context.Background(), ingest.Caller{Credential: "test"}, [][]byte{[]byte(`{"event_id":"w"}`)}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		from, to time.Time
		want     int
	}{
		{"from 400ns after: the row is before the window", at.Add(400 * time.Nanosecond), time.Time{}, 0},
		{"to 400ns after: the row is inside the window", time.Time{}, at.Add(400 * time.Nanosecond), 1},
		{"from exactly at", at, time.Time{}, 1},
		{"to exactly at: the window ends before the row", time.Time{}, at, 0},
	} {
		page, err := svc.DeadLetters(context.Background(), ingest.Page{From: tt.from, To: tt.to})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) != tt.want {
			t.Errorf("%s: %d dead letters, want %d", tt.name, len(page.Items), tt.want)
		}
	}
}

// testProjectionCounts: the existing-clients rules, /metrics, "a current-resources gauge by
// platform, cloud, resource type and state": Count groups the
// projection by those four, in byte order, a deleted resource counted in
// state "deleted", and an empty projection has no group.
func testProjectionCounts(t *testing.T, st ingestStore) {
	ctx := context.Background()
	got, err := st.Projection().Count(ctx)
	if err != nil {
		t.Fatalf("Count: %v", err)
	}
	if len(got) != 0 {
		t.Errorf("Count of an empty projection = %+v, want none", got)
	}
	svc := newService(t, st, nil)
	res, err := svc.Ingest(ctx, ingest.Caller{Credential: "test"}, items(
		volumeCreate("a", t0), volumeCreate("b", t0), volumeCreate("c", t0).set("payload.state", "in-use"),
		volumeCreate("d", t0).set("cloud", "c2"), volumeCreate("e", t0).set("cloud", "C0"),
		instanceCreate("f", t0), instanceCreate("g", t0),
		volumeCreate("h", t0).set("event_type", "volume.delete.end").set("timestamp", t0.Add(time.Minute).Format(time.RFC3339Nano)).
			set("resource_id", "vol-b").set("payload.state", nil).set("payload.size", nil),
	))
	if err != nil || len(res.Rejected) > 0 {
		t.Fatalf("Ingest: %+v %v", res, err)
	}
	got, err = projService(t, st, svc).Count(ctx)
	if err != nil {
		t.Fatalf("Count: %v", err)
	}
	want := []projection.Count{
		{Platform: "openstack", Cloud: "C0", ResourceType: "volume", State: "available", N: 1},
		{Platform: "openstack", Cloud: "c1", ResourceType: "instance", State: "active", N: 2},
		{Platform: "openstack", Cloud: "c1", ResourceType: "volume", State: "available", N: 1},
		{Platform: "openstack", Cloud: "c1", ResourceType: "volume", State: "deleted", N: 1},
		{Platform: "openstack", Cloud: "c1", ResourceType: "volume", State: "in-use", N: 1},
		{Platform: "openstack", Cloud: "c2", ResourceType: "volume", State: "available", N: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Count (-want +got):\n%s", diff)
	}
}
