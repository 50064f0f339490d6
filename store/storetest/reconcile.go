package storetest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/ingest/reconcile"
	"github.com/tallyhq/tally/ingest/timeline"
	"github.com/tallyhq/tally/ingest/usage"
	"github.com/tallyhq/tally/sizenames"
)

// syncEnv is one database with the services a reconciliation runs on.
type syncEnv struct {
	st    Stores
	ing   *ingest.Service
	rec   *reconcile.Service
	count *syncCounter
	clock *clock // the run's (started_at, finished_at, and the bound of observed_at)
}

func newSyncEnv(t *testing.T, st Stores) *syncEnv {
	t.Helper()
	if st.Reconcile == nil {
		t.Fatal("storetest: Stores.Reconcile is required")
	}
	ing, err := ingest.New(st.Ingest, ingest.Options{Now: newClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	c := &syncCounter{runs: map[ingest.SyncStatus]int{}, actions: map[reconcile.Action]int{}}
	clk := newClock()
	rec, err := reconcile.New(ing, st.Projection, st.Reconcile, reconcile.Options{Now: clk.Now, Observer: c})
	if err != nil {
		t.Fatal(err)
	}
	return &syncEnv{st: st, ing: ing, rec: rec, count: c, clock: clk}
}

// syncCounter is a reconcile.Observer for the suite.
type syncCounter struct {
	mu      sync.Mutex
	runs    map[ingest.SyncStatus]int
	actions map[reconcile.Action]int
	errors  int
}

func (c *syncCounter) Run(_ string, s ingest.SyncStatus) { c.mu.Lock(); c.runs[s]++; c.mu.Unlock() }
func (c *syncCounter) Reconciled(_ string, a reconcile.Action, n int) {
	c.mu.Lock()
	c.actions[a] += n
	c.mu.Unlock()
}
func (c *syncCounter) Errors(_ string, n int) { c.mu.Lock(); c.errors += n; c.mu.Unlock() }

// The instants of the suite's observations: collector events at
// syncBefore, listings at syncAt, a collector event newer than the listing
// at syncAfter.
var (
	syncBefore = t0.Add(-6 * time.Hour)
	syncAt     = t0
	syncAfter  = t0.Add(time.Hour)
)

// collect ingests collector events of cloud c1.
func (e *syncEnv) collect(t *testing.T, its ...item) {
	t.Helper()
	res, err := e.ing.Ingest(context.Background(), ingest.Caller{Credential: "collector"}, items(its...))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rejected) > 0 {
		t.Fatalf("collector events refused: %+v", res.Rejected)
	}
}

func (e *syncEnv) run(t *testing.T, obs reconcile.Observation) reconcile.Outcome {
	t.Helper()
	out, err := e.rec.Run(context.Background(), "reconciler", "c1", obs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// vm is an instance event of cloud c1 with the given type, state and flavor.
func vm(id, eventType string, ts time.Time, state, flavor, project string) item {
	it := instanceCreate(id, ts)
	it["event_id"] = eventType + "-" + id + "-" + ts.Format(time.RFC3339)
	it["event_type"] = eventType
	it["resource_id"] = id
	it["project_id"] = project
	it.payload()["state"] = state
	it.payload()["size"] = flavorSize(flavor)
	return it
}

func flavorSize(flavor string) map[string]any {
	if flavor == "m1.large" {
		return map[string]any{"vcpus": 4, "ram_gb": 8, "disk_gb": 40, "flavor": "m1.large"}
	}
	return map[string]any{"vcpus": 2, "ram_gb": 4, "disk_gb": 20, "flavor": "m1.small"}
}

// observed is an instance as a listing reports it.
func observed(id, state, flavor, project string) reconcile.Resource {
	size, err := json.Marshal(flavorSize(flavor), json.Deterministic(true))
	if err != nil {
		panic(err)
	}
	return reconcile.Resource{ResourceType: "instance", ResourceID: id, ProjectID: project, State: state, Size: size}
}

func observation(complete []string, res ...reconcile.Resource) reconcile.Observation {
	return reconcile.Observation{Platform: "openstack", ObservedAt: syncAt, CompleteTypes: complete, Resources: res}
}

// rowState is what the drift table checks of a projection row.
type rowState struct {
	State, ProjectID, LastEventType string
	Size                            string
	Deleted                         *time.Time
}

func (e *syncEnv) row(t *testing.T, rt, id string) *rowState {
	t.Helper()
	r, err := e.st.Projection.Get(context.Background(), projection.Key{Cloud: "c1", ResourceType: rt, ResourceID: id})
	if err != nil {
		return nil
	}
	var size map[string]any
	if err := json.Unmarshal(r.Size, &size); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(size, json.Deterministic(true))
	return &rowState{State: r.State, ProjectID: r.ProjectID, LastEventType: r.LastEventType, Size: string(b), Deleted: r.DeletedAt}
}

func sizeText(flavor string) string {
	b, _ := json.Marshal(flavorSize(flavor), json.Deterministic(true))
	return string(b)
}

// counts is an Outcome's counts alone.
type counts struct{ Created, Updated, Deleted, Unchanged, Skipped, Refused int }

func countsOf(o reconcile.Outcome) counts {
	return counts{o.Created, o.Updated, o.Deleted, o.Unchanged, o.Skipped, o.Refused}
}

func runReconcile(t *testing.T, open func(tb testing.TB) Stores) {
	t.Run("Drift", func(t *testing.T) { t.Parallel(); testSyncDrift(t, open) })
	t.Run("Idempotent", func(t *testing.T) { t.Parallel(); testSyncTwice(t, open(t)) })
	t.Run("Concurrent", func(t *testing.T) { t.Parallel(); testSyncConcurrent(t, open(t)) })
	t.Run("SizeNames", func(t *testing.T) { t.Parallel(); testSyncSizeNames(t, open(t)) })
	t.Run("PartlyRefused", func(t *testing.T) { t.Parallel(); testSyncRefused(t, open(t)) })
	t.Run("Conflict", func(t *testing.T) { t.Parallel(); testSyncConflict(t, open(t)) })
	t.Run("FailedCommit", func(t *testing.T) { t.Parallel(); testSyncFailedCommit(t, open(t)) })
	t.Run("Runs", func(t *testing.T) { t.Parallel(); testSyncRuns(t, open(t)) })
	t.Run("RunPages", func(t *testing.T) { t.Parallel(); testSyncRunPages(t, open(t)) })
	t.Run("SameAsCollected", func(t *testing.T) { t.Parallel(); testSyncSameAsCollected(t, open(t)) })
}

// testSyncDrift is the table of drift cases (docs/reconciliation.md, What a
// run concludes): each case seeds collector events, runs one observation,
// and checks the counts and the row of vm-1.
func testSyncDrift(t *testing.T, open func(tb testing.TB) Stores) {
	deletedAt := syncBefore.Add(2 * time.Hour)
	atSync := syncAt
	cases := []struct {
		name    string
		seed    []item
		obs     reconcile.Observation
		want    counts
		wantRow *rowState
	}{
		{"missing resource: absent → sync.create", nil,
			observation(nil, observed("vm-1", "active", "m1.small", "p1")),
			counts{Created: 1}, &rowState{State: "active", ProjectID: "p1", LastEventType: reconcile.TypeCreate, Size: sizeText("m1.small")}},
		{"deleted resource seen again: deleted → sync.create",
			[]item{vm("vm-1", "compute.instance.create.end", syncBefore, "active", "m1.small", "p1"),
				vm("vm-1", "compute.instance.delete.end", syncBefore.Add(time.Hour), "deleted", "m1.small", "p1")},
			observation(nil, observed("vm-1", "active", "m1.small", "p1")),
			counts{Created: 1}, &rowState{State: "active", ProjectID: "p1", LastEventType: reconcile.TypeCreate, Size: sizeText("m1.small")}},
		{"changed state → sync.update", []item{vm("vm-1", "compute.instance.create.end", syncBefore, "active", "m1.small", "p1")},
			observation(nil, observed("vm-1", "shutoff", "m1.small", "p1")),
			counts{Updated: 1}, &rowState{State: "shutoff", ProjectID: "p1", LastEventType: reconcile.TypeUpdate, Size: sizeText("m1.small")}},
		{"changed size → sync.update", []item{vm("vm-1", "compute.instance.create.end", syncBefore, "active", "m1.small", "p1")},
			observation(nil, observed("vm-1", "active", "m1.large", "p1")),
			counts{Updated: 1}, &rowState{State: "active", ProjectID: "p1", LastEventType: reconcile.TypeUpdate, Size: sizeText("m1.large")}},
		{"changed project → sync.update", []item{vm("vm-1", "compute.instance.create.end", syncBefore, "active", "m1.small", "p1")},
			observation(nil, observed("vm-1", "active", "m1.small", "p2")),
			counts{Updated: 1}, &rowState{State: "active", ProjectID: "p2", LastEventType: reconcile.TypeUpdate, Size: sizeText("m1.small")}},
		{"gone from a complete type → sync.delete at observed_at", []item{vm("vm-1", "compute.instance.create.end", syncBefore, "active", "m1.small", "p1")},
			observation([]string{"instance"}),
			counts{Deleted: 1}, &rowState{State: "deleted", ProjectID: "p1", LastEventType: reconcile.TypeDelete, Size: sizeText("m1.small"), Deleted: &atSync}},
		{"gone from an incomplete type: no delete", []item{vm("vm-1", "compute.instance.create.end", syncBefore, "active", "m1.small", "p1")},
			observation([]string{"volume"}),
			counts{}, &rowState{State: "active", ProjectID: "p1", LastEventType: "compute.instance.create.end", Size: sizeText("m1.small")}},
		{"platform-dated delete → sync.delete at deleted_at", []item{vm("vm-1", "compute.instance.create.end", syncBefore, "active", "m1.small", "p1")},
			func() reconcile.Observation {
				o := observation([]string{"instance"})
				o.Deletes = []reconcile.Delete{{ResourceType: "instance", ResourceID: "vm-1", DeletedAt: deletedAt}}
				return o
			}(),
			counts{Deleted: 1}, &rowState{State: "deleted", ProjectID: "p1", LastEventType: reconcile.TypeDelete, Size: sizeText("m1.small"), Deleted: &deletedAt}},
		{"newer collector event: skipped", []item{vm("vm-1", "compute.instance.create.end", syncAfter, "active", "m1.small", "p1")},
			observation([]string{"instance"}, observed("vm-1", "shutoff", "m1.large", "p2")),
			counts{Skipped: 1}, &rowState{State: "active", ProjectID: "p1", LastEventType: "compute.instance.create.end", Size: sizeText("m1.small")}},
		{"newer collector event, gone from a complete type: skipped", []item{vm("vm-1", "compute.instance.create.end", syncAfter, "active", "m1.small", "p1")},
			observation([]string{"instance"}),
			counts{Skipped: 1}, &rowState{State: "active", ProjectID: "p1", LastEventType: "compute.instance.create.end", Size: sizeText("m1.small")}},
		{"identical observation: no event", []item{vm("vm-1", "compute.instance.create.end", syncBefore, "active", "m1.small", "p1")},
			observation([]string{"instance"}, observed("vm-1", "active", "m1.small", "p1")),
			counts{Unchanged: 1}, &rowState{State: "active", ProjectID: "p1", LastEventType: "compute.instance.create.end", Size: sizeText("m1.small")}},
		{"size members in another order: no event", []item{vm("vm-1", "compute.instance.create.end", syncBefore, "active", "m1.small", "p1")},
			func() reconcile.Observation {
				r := observed("vm-1", "active", "m1.small", "p1")
				r.Size = jsontext.Value(`{"flavor": "m1.small", "disk_gb": 20, "ram_gb": 4, "vcpus": 2}`)
				return observation(nil, r)
			}(),
			counts{Unchanged: 1}, &rowState{State: "active", ProjectID: "p1", LastEventType: "compute.instance.create.end", Size: sizeText("m1.small")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newSyncEnv(t, open(t))
			if tc.seed != nil {
				e.collect(t, tc.seed...)
			}
			out := e.run(t, tc.obs)
			if diff := cmp.Diff(tc.want, countsOf(out)); diff != "" {
				t.Errorf("counts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRow, e.row(t, "instance", "vm-1")); diff != "" {
				t.Errorf("row of vm-1 (-want +got):\n%s", diff)
			}
			n := tc.want.Created + tc.want.Updated + tc.want.Deleted
			if len(out.EventIDs) != n {
				t.Errorf("event_ids %v, want %d", out.EventIDs, n)
			}
			for _, id := range out.EventIDs {
				evs, err := e.st.Ingest.Events(context.Background(), ingest.EventQuery{Source: event.SourceReconciliation})
				if err != nil {
					t.Fatal(err)
				}
				if !slices.ContainsFunc(evs, func(s ingest.StoredEvent) bool { return s.Event.EventID == id }) {
					t.Errorf("event %s not stored as a reconciliation event", id)
				}
			}
		})
	}
}

// testSyncTwice: "running the same observation twice stores nothing the
// second time", and records two runs, the second with everything unchanged.
func testSyncTwice(t *testing.T, st Stores) {
	e := newSyncEnv(t, st)
	e.collect(t, vm("vm-1", "compute.instance.create.end", syncBefore, "active", "m1.small", "p1"),
		vm("vm-2", "compute.instance.create.end", syncBefore, "active", "m1.small", "p1"))
	obs := observation([]string{"instance"}, observed("vm-1", "shutoff", "m1.small", "p1"), observed("vm-3", "active", "m1.large", "p1"))
	first := e.run(t, obs)
	if diff := cmp.Diff(counts{Created: 1, Updated: 1, Deleted: 1}, countsOf(first)); diff != "" {
		t.Errorf("first run (-want +got):\n%s", diff)
	}
	stored := len(Events(t, st.Ingest))
	second := e.run(t, obs)
	if diff := cmp.Diff(counts{Unchanged: 2}, countsOf(second)); diff != "" {
		t.Errorf("second run (-want +got):\n%s", diff)
	}
	if got := len(Events(t, st.Ingest)); got != stored {
		t.Errorf("%d events after the second run, want %d (nothing new)", got, stored)
	}
	runs, err := st.Reconcile.SyncRuns(context.Background(), reconcile.RunQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].ID != second.RunID || runs[1].ID != first.RunID {
		t.Fatalf("runs %+v, want the second then the first", runs)
	}
}

// testSyncConcurrent: the same observation posted by two replicas at once
// stores each synthetic event once and records two runs, one of them with
// everything unchanged (runs of one cloud take turns).
func testSyncConcurrent(t *testing.T, st Stores) {
	envs := []*syncEnv{newSyncEnv(t, st), newSyncEnv(t, st)}
	if st.Reopen != nil {
		envs[1] = newSyncEnv(t, st.Reopen(t))
	}
	envs[0].collect(t, vm("vm-1", "compute.instance.create.end", syncBefore, "active", "m1.small", "p1"))
	obs := observation([]string{"instance"}, observed("vm-2", "active", "m1.small", "p1"), observed("vm-3", "active", "m1.small", "p1"))
	outs := make([]reconcile.Outcome, 2)
	var wg sync.WaitGroup
	for i := range envs {
		wg.Go(func() {
			out, err := envs[i].rec.Run(context.Background(), "reconciler", "c1", obs)
			if err != nil {
				t.Error(err)
			}
			outs[i] = out
		})
	}
	wg.Wait()
	got := []counts{countsOf(outs[0]), countsOf(outs[1])}
	slices.SortFunc(got, func(a, b counts) int { return b.Created - a.Created })
	if diff := cmp.Diff([]counts{{Created: 2, Deleted: 1}, {Unchanged: 2}}, got); diff != "" {
		t.Errorf("runs (-want +got):\n%s", diff)
	}
	evs, err := st.Ingest.Events(context.Background(), ingest.EventQuery{Source: event.SourceReconciliation})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 {
		t.Errorf("%d synthetic events stored, want 3", len(evs))
	}
	runs, err := st.Reconcile.SyncRuns(context.Background(), reconcile.RunQuery{Cloud: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 {
		t.Errorf("%d runs recorded, want 2", len(runs))
	}
}

// testSyncSizeNames (canonical-event.md, Size names): a run that lists a
// volume type replaces the cloud's rows (other clouds' untouched), a size
// that differs only by a size-name id is unchanged, and a collector's volume
// event carrying the type's id is then stored with the name and
// payload.provider.size_as_reported.
func testSyncSizeNames(t *testing.T, st Stores) {
	ctx := context.Background()
	e := newSyncEnv(t, st)
	if err := sizenames.ReplaceCloud(ctx, st.SizeNames, "c1", []sizenames.Row{{Cloud: "c1", ResourceType: "volume", Member: "type", Value: "id-old", Name: "old"}}); err != nil {
		t.Fatal(err)
	}
	if err := sizenames.ReplaceCloud(ctx, st.SizeNames, "c2", []sizenames.Row{{Cloud: "c2", ResourceType: "volume", Member: "type", Value: "id-c2", Name: "other"}}); err != nil {
		t.Fatal(err)
	}
	// A volume stored under the name ssd; the listing reports the type id.
	e.collect(t, volumeCreate("v1", syncBefore))
	obs := reconcile.Observation{Platform: "openstack", ObservedAt: syncAt, CompleteTypes: []string{"volume"},
		Resources: []reconcile.Resource{{ResourceType: "volume", ResourceID: "vol-v1", ProjectID: "p1", State: "available",
			Size: jsontext.Value(`{"size_gb":100,"type":"id-ssd"}`)}},
		SizeNames: []reconcile.SizeName{{ResourceType: "volume", Member: "type", Value: "id-ssd", Name: "ssd"}}}
	out := e.run(t, obs)
	if diff := cmp.Diff(counts{Unchanged: 1}, countsOf(out)); diff != "" {
		t.Errorf("a size that differs only by a size-name id (-want +got):\n%s", diff)
	}
	for cloud, want := range map[string][]sizenames.Row{
		"c1": {{Cloud: "c1", ResourceType: "volume", Member: "type", Value: "id-ssd", Name: "ssd"}},
		"c2": {{Cloud: "c2", ResourceType: "volume", Member: "type", Value: "id-c2", Name: "other"}},
	} {
		got, err := st.SizeNames.SizeNames(ctx, cloud, "volume")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("size names of %s (-want +got):\n%s", cloud, diff)
		}
	}
	e.collect(t, volumeCreate("v2", syncAfter).set("payload.size.type", "id-ssd"))
	evs, err := st.Ingest.Events(ctx, ingest.EventQuery{ResourceID: "vol-v2"})
	if err != nil || len(evs) != 1 {
		t.Fatalf("events of vol-v2: %v, %v", evs, err)
	}
	p := evs[0].Event.Payload
	if diff := jsonDiff(t, []byte(`{"size_gb":100,"type":"ssd"}`), p.Size); diff != "" {
		t.Errorf("size (-want +got):\n%s", diff)
	}
	if diff := jsonDiff(t, []byte(`{"oslo_event_type":"volume.create.end","size_as_reported":{"type":"id-ssd"}}`), p.Provider); diff != "" {
		t.Errorf("provider (-want +got):\n%s", diff)
	}
}

// testSyncRefused: "a run whose events are partly refused (a size its
// schema refuses) dead-letters those, stores the rest, and reports the
// refusals in the run".
func testSyncRefused(t *testing.T, st Stores) {
	e := newSyncEnv(t, st)
	bad := observed("vm-bad", "active", "m1.small", "p1")
	bad.Size = jsontext.Value(`{"vcpus":2}`)
	out := e.run(t, observation(nil, observed("vm-1", "active", "m1.small", "p1"), bad))
	if diff := cmp.Diff(counts{Created: 1, Refused: 1}, countsOf(out)); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	if len(out.Rejected) != 1 || out.Rejected[0].Index != 1 {
		t.Fatalf("rejected %+v, want the second event", out.Rejected)
	}
	dls := allDeadLetters(t, st.Ingest)
	if len(dls) != 1 || dls[0].EventID != out.Rejected[0].EventID {
		t.Errorf("dead letters %+v, want the refused event's", dls)
	}
	runs, err := st.Reconcile.SyncRuns(context.Background(), reconcile.RunQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Status != ingest.SyncPartial || runs[0].Refused != 1 || len(runs[0].Errors) != 1 {
		t.Fatalf("runs %+v, want one partial run naming the refusal", runs)
	}
	if e.row(t, "instance", "vm-1") == nil || e.row(t, "instance", "vm-bad") != nil {
		t.Error("want vm-1 stored and vm-bad not")
	}
	e.count.mu.Lock()
	defer e.count.mu.Unlock()
	if e.count.runs[ingest.SyncPartial] != 1 || e.count.errors != 1 || e.count.actions[reconcile.ActionCreated] != 1 {
		t.Errorf("counters %+v %d %+v", e.count.runs, e.count.errors, e.count.actions)
	}
}

// testSyncConflict: the deterministic event id names no resource_type
// (canonical-event.md, Deterministic event id), so an instance and a
// volume listed with the same resource_id at the same instant get one
// (event_id, timestamp). When the instance's create is already stored, the
// store refuses the volume's at commit as a conflict (docs/decisions.md,
// Same (event_id, timestamp) stored for another resource); the outcome and
// the recorded run count it as refused, as the dead letter does.
func testSyncConflict(t *testing.T, st Stores) {
	e := newSyncEnv(t, st)
	e.run(t, observation(nil, observed("same", "active", "m1.small", "p1")))
	vol := reconcile.Resource{ResourceType: "volume", ResourceID: "same", ProjectID: "p1", State: "available",
		Size: jsontext.Value(`{"size_gb":10,"type":"ssd"}`)}
	out := e.run(t, observation(nil, vol, observed("vm-2", "active", "m1.small", "p1")))
	if diff := cmp.Diff(counts{Created: 1, Refused: 1}, countsOf(out)); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	if len(out.Rejected) != 1 || !strings.HasPrefix(out.Rejected[0].Reason, "conflict:") || len(out.EventIDs) != 1 {
		t.Fatalf("rejected %+v, event ids %v: want one conflict and one stored event", out.Rejected, out.EventIDs)
	}
	if dls := allDeadLetters(t, st.Ingest); len(dls) != 1 {
		t.Errorf("dead letters %+v, want the conflict's", dls)
	}
	runs, err := st.Reconcile.SyncRuns(context.Background(), reconcile.RunQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 {
		t.Fatalf("runs %+v, want two", runs)
	}
	got := runs[0]
	if runs[1].ID > got.ID {
		got = runs[1]
	}
	if got.Status != ingest.SyncPartial || got.Created != 1 || got.Refused != 1 || len(got.Errors) != 1 {
		t.Fatalf("run %+v, want a partial run with one create and the conflict", got)
	}
}

// failingCommit is an ingest.Store whose Commit fails after writing
// nothing, as a store that loses its connection mid-run does.
type failingCommit struct{ ingest.Store }

var errCommit = errors.New("storetest: the connection was lost")

func (failingCommit) Commit(context.Context, ingest.Batch) (ingest.Committed, error) {
	return ingest.Committed{}, errCommit
}

// testSyncFailedCommit: "nothing is half-written when the store fails
// mid-run": no event, no size names, no run; the run is counted failed.
func testSyncFailedCommit(t *testing.T, st Stores) {
	e := newSyncEnv(t, st)
	ing, err := ingest.New(failingCommit{st.Ingest}, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := reconcile.New(ing, st.Projection, st.Reconcile, reconcile.Options{Observer: e.count})
	if err != nil {
		t.Fatal(err)
	}
	obs := observation(nil, observed("vm-1", "active", "m1.small", "p1"))
	obs.SizeNames = []reconcile.SizeName{{ResourceType: "volume", Member: "type", Value: "id-ssd", Name: "ssd"}}
	if _, err := rec.Run(context.Background(), "reconciler", "c1", obs); !errors.Is(err, errCommit) {
		t.Fatalf("Run: %v, want the store's error", err)
	}
	// A cancelled context mid-run: the store's own rollback.
	ctx, cancel := context.WithCancel(context.Background())
	ing2, err := ingest.New(&cancellingStore{ingestStore: st.ingest(), cancel: cancel}, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec2, err := reconcile.New(ing2, st.Projection, st.Reconcile, reconcile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rec2.Run(ctx, "reconciler", "c1", obs); err == nil {
		t.Fatal("Run with a context cancelled at commit: no error")
	}
	if evs := Events(t, st.Ingest); len(evs) != 0 {
		t.Errorf("%d events stored", len(evs))
	}
	if rows, _ := st.SizeNames.SizeNames(context.Background(), "c1", "volume"); len(rows) != 0 {
		t.Errorf("size names written: %+v", rows)
	}
	if runs, _ := st.Reconcile.SyncRuns(context.Background(), reconcile.RunQuery{}); len(runs) != 0 {
		t.Errorf("runs recorded: %+v", runs)
	}
	if e.count.runs[ingest.SyncFailed] != 1 {
		t.Errorf("failed runs counted %d, want 1", e.count.runs[ingest.SyncFailed])
	}
}

// testSyncRuns: the runs are listed newest first, by cloud, before an ID,
// at most Limit; a run records its observation and counts.
func testSyncRuns(t *testing.T, st Stores) {
	ctx := context.Background()
	e := newSyncEnv(t, st)
	var ids []int64
	for i, cloud := range []string{"c1", "c2", "c1"} {
		obs := observation(nil, observed("vm-"+cloud, "active", "m1.small", "p1"))
		obs.ObservedAt = syncAt.Add(time.Duration(i) * time.Minute)
		out, err := e.rec.Run(ctx, "reconciler", cloud, obs)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, out.RunID)
	}
	list := func(q reconcile.RunQuery) []int64 {
		runs, err := st.Reconcile.SyncRuns(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		out := []int64{}
		for _, r := range runs {
			out = append(out, r.ID)
		}
		return out
	}
	for _, c := range []struct {
		name string
		q    reconcile.RunQuery
		want []int64
	}{
		{"all, newest first", reconcile.RunQuery{}, []int64{ids[2], ids[1], ids[0]}},
		{"one cloud", reconcile.RunQuery{Cloud: "c1"}, []int64{ids[2], ids[0]}},
		{"before an ID", reconcile.RunQuery{Before: ids[2]}, []int64{ids[1], ids[0]}},
		{"limit", reconcile.RunQuery{Limit: 1}, []int64{ids[2]}},
	} {
		if diff := cmp.Diff(c.want, list(c.q)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
	runs, err := st.Reconcile.SyncRuns(ctx, reconcile.RunQuery{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := ingest.SyncRun{ID: ids[2], Cloud: "c1", Platform: "openstack", ObservedAt: syncAt.Add(2 * time.Minute),
		StartedAt: t0, FinishedAt: t0, Status: ingest.SyncCompleted, Unchanged: 1, Errors: []string{}}
	if diff := cmp.Diff([]ingest.SyncRun{want}, runs); diff != "" {
		t.Errorf("recorded run (-want +got):\n%s", diff)
	}
}

// testSyncSameAsCollected: a resource corrected by a run has the same row
// as one whose events all arrived, and the lifecycle feed carries the
// synthetic events.
func testSyncSameAsCollected(t *testing.T, st Stores) {
	e := newSyncEnv(t, st)
	e.collect(t, vm("vm-a", "compute.instance.create.end", syncAt, "active", "m1.small", "p1"))
	e.run(t, observation(nil, observed("vm-a", "active", "m1.small", "p1"), observed("vm-b", "active", "m1.small", "p1")))
	a, b := e.row(t, "instance", "vm-a"), e.row(t, "instance", "vm-b")
	if diff := cmp.Diff(a, b, cmpopts.IgnoreFields(rowState{}, "LastEventType")); diff != "" {
		t.Errorf("corrected row vs collected row (-collected +corrected):\n%s", diff)
	}
	awaitFeed(t, st.Ingest) // on PostgreSQL, once the server's older transactions have ended
	fb, err := st.Ingest.Feed(context.Background(), ingest.FeedRead{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, it := range fb.Items {
		types = append(types, it.Event.EventType)
	}
	if diff := cmp.Diff([]string{"compute.instance.create.end", reconcile.TypeCreate}, types); diff != "" {
		t.Errorf("feed (-want +got):\n%s", diff)
	}

	// Both end an hour later: vm-a by the collector's delete, vm-b by a run
	// that no longer lists it. Their timelines and usage are the same.
	e.collect(t, vm("vm-a", "compute.instance.delete.end", syncAfter, "deleted", "m1.small", "p1"))
	gone := observation([]string{"instance"})
	gone.ObservedAt = syncAfter
	e.clock.Advance(syncAfter.Sub(syncAt))
	if out := e.run(t, gone); out.Deleted != 1 {
		t.Fatalf("second run deleted %d, want vm-b", out.Deleted)
	}
	if st.Usage == nil {
		return
	}
	// Usage answers as of the feed's head, which on PostgreSQL reaches the
	// deletes once the server's older transactions (other tests') ended.
	awaitFeed(t, st.Ingest)
	us, err := usage.New(st.Usage)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var intervals [][]timeline.Interval
	for _, id := range []string{"vm-a", "vm-b"} {
		lc, err := us.Lifecycle(ctx, projection.Key{Cloud: "c1", ResourceType: "instance", ResourceID: id})
		if err != nil {
			t.Fatal(err)
		}
		intervals = append(intervals, lc.Intervals)
	}
	if diff := cmp.Diff(intervals[0], intervals[1]); diff != "" {
		t.Errorf("timeline of the corrected vm-b vs the collected vm-a (-collected +corrected):\n%s", diff)
	}
	// A usage answer is as of the feed's head: on PostgreSQL the deletes
	// count once the server's older transactions have ended.
	awaitFeed(t, st.Ingest)
	ans, err := us.Usage(ctx, usage.Query{From: syncBefore, To: syncAfter.Add(time.Hour), GroupBy: []string{"resource_id"}, Quantity: "size.vcpus"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range ans.Items {
		got = append(got, it.Seconds+" s, "+it.Quantity+" vcpu·s")
	}
	if diff := cmp.Diff([]string{"3600 s, 7200 vcpu·s", "3600 s, 7200 vcpu·s"}, got); diff != "" {
		t.Errorf("usage of vm-a and vm-b (-want +got):\n%s", diff)
	}
}

// testSyncRunPages: the Service pages the runs with next_cursor.
func testSyncRunPages(t *testing.T, st Stores) {
	ctx := context.Background()
	e := newSyncEnv(t, st)
	for i := range 3 {
		obs := observation(nil)
		obs.ObservedAt = syncAt.Add(time.Duration(i) * time.Minute)
		e.run(t, obs)
	}
	var got []int64
	cursor := ""
	for range 5 {
		p, err := e.rec.Runs(ctx, reconcile.RunFilter{Cloud: "c1", Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Items {
			got = append(got, r.ID)
		}
		if p.NextCursor == nil {
			break
		}
		cursor = *p.NextCursor
	}
	if len(got) != 3 || got[0] < got[1] || got[1] < got[2] {
		t.Errorf("paged runs %v, want three, newest first", got)
	}
	if _, err := e.rec.Runs(ctx, reconcile.RunFilter{Limit: 1001, Cursor: "x"}); !errors.Is(err, event.ErrInvalid) {
		t.Errorf("bad limit and cursor: %v", err)
	}
}
