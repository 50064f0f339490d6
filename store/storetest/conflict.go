package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
)

// conflictReason is the reason of a conflict refusal: it names the rule
// and nothing of the stored event.
const conflictReason = "conflict: /event_id: conflict: this (event_id, timestamp) is already taken by an event of another platform, cloud, resource_type or resource_id; " +
	"an event_id identifies one event of one resource, so this item is not a duplicate and was not stored"

// otherCollector is a credential scoped to another cloud than collector's.
var otherCollector = ingest.Caller{Credential: "collector-c2", Platform: "openstack", Cloud: "c2"}

// docs/decisions.md, Same (event_id, timestamp) stored for another resource: a
// collector of cloud c2 posts an event with the event_id and timestamp of a
// c1 event (deterministic ids can be computed); c1's own event is then not
// a duplicate: it is refused as a conflict, kept as a dead letter whose
// reason names the rule and nothing of c2's event, audited and counted.
func testConflictOtherCloud(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	id := event.DeterministicID("openstack", "c1", "vol-x", "volume.create.end", t0)
	planted := volumeCreate(id, t0).set("cloud", "c2").set("resource_id", "vol-planted")
	if res := e.ingest(otherCollector, planted.bytes()); res.Accepted != 1 {
		t.Fatalf("planted event: %+v", res)
	}
	real := volumeCreate(id, t0).set("resource_id", "vol-x").bytes()
	res := e.ingest(collector, real)
	want := ingest.Result{Rejected: []ingest.Rejection{{Index: 0, EventID: id, Reason: conflictReason}}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	if strings.Contains(res.Rejected[0].Reason, "c2") || strings.Contains(res.Rejected[0].Reason, "planted") {
		t.Errorf("the reason reveals the other cloud's event: %s", res.Rejected[0].Reason)
	}
	dls := allDeadLetters(t, e.st)
	for i := range dls {
		dls[i].ID, dls[i].UUID = 0, ""
	}
	wantDL := []ingest.DeadLetter{{Raw: real, RawSize: len(real), Reason: conflictReason, EventID: id, ReceivedAt: t0}}
	if diff := cmp.Diff(wantDL, dls); diff != "" {
		t.Errorf("dead letters (-want +got):\n%s", diff)
	}
	audit := allAudit(t, e.st)
	for i := range audit {
		audit[i].ID = 0
	}
	wantAudit := []ingest.AuditEntry{{At: t0, Action: ingest.ActionConflict, Credential: "collector-c1", EventID: id, Platform: "openstack", Cloud: "c1"}}
	if diff := cmp.Diff(wantAudit, audit); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]eventForm{expected(t, planted.bytes(), event.SourceCollector)}, storedEvents(t, e.st)); diff != "" {
		t.Errorf("stored events (-want +got):\n%s", diff)
	}
	e.obs.mu.Lock()
	defer e.obs.mu.Unlock()
	if diff := cmp.Diff(map[string]int{"c1/conflict": 1}, e.obs.rejectedBy); diff != "" {
		t.Errorf("rejected by cloud/kind (-want +got):\n%s", diff)
	}
	if e.obs.duplicates != 0 {
		t.Errorf("%d duplicates counted, want 0", e.obs.duplicates)
	}
}

// "A duplicate is the same (event_id, timestamp) pair": for one resource
// it stays a duplicate whatever else differs; another platform, cloud,
// resource_type or resource_id makes it a conflict, stored or earlier in
// the same batch.
func testConflictMembers(t *testing.T, newStore func(t *testing.T) ingestStore) {
	tests := []struct {
		name     string
		change   func(it item) item
		conflict bool
	}{
		{"same resource, other event_type and payload", func(it item) item {
			return it.set("event_type", "volume.update.end").set("payload.state", "in-use").set("project_id", "p2")
		}, false},
		{"other platform", func(it item) item { return it.set("platform", "vmware") }, true},
		{"other cloud", func(it item) item { return it.set("cloud", "c2") }, true},
		{"other resource_type", func(it item) item { return it.set("resource_type", "image") }, true},
		{"other resource_id", func(it item) item { return it.set("resource_id", "vol-other") }, true},
	}
	for _, tc := range tests {
		for _, inBatch := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/in one batch %v", tc.name, inBatch), func(t *testing.T) {
				e := newEnv(t, newStore, ingest.Options{})
				first := volumeCreate("k", t0).bytes()
				second := tc.change(volumeCreate("k", t0)).bytes()
				var res ingest.Result
				index := 0
				if inBatch {
					res = e.ingest(syncRun, first, second)
					res.Accepted--
					index = 1
				} else {
					e.ingest(syncRun, first)
					res = e.ingest(syncRun, second)
				}
				want := ingest.Result{Duplicates: 1, Rejected: []ingest.Rejection{}}
				if tc.conflict {
					want = ingest.Result{Rejected: []ingest.Rejection{{Index: index, EventID: "k", Reason: conflictReason}}}
				}
				if diff := cmp.Diff(want, res); diff != "" {
					t.Errorf("result (-want +got):\n%s", diff)
				}
				wantRows := 0
				if tc.conflict {
					wantRows = 1
				}
				if n, m := len(allDeadLetters(t, e.st)), len(allAudit(t, e.st)); n != wantRows || m != wantRows {
					t.Errorf("%d dead letters and %d audit rows, want %d of each", n, m, wantRows)
				}
				if diff := cmp.Diff([]eventForm{expected(t, first, event.SourceReconciliation)}, storedEvents(t, e.st)); diff != "" {
					t.Errorf("stored events (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// Store.Commit decides the conflict itself, on every path of its write: a
// stored key the duplicate probe's sample misses (a batch larger than any
// sample, the conflicting event in the middle), a key taken twice in one
// batch after a conflicting one, and the dead letters and audit rows of
// Batch.Conflicts written with the batch.
func testConflictCommit(t *testing.T, newStore func(t *testing.T) ingestStore) {
	st := newStore(t)
	ctx := context.Background()
	mk := func(id, cloud string) event.Event {
		ev, err := event.DecodeValidate(volumeCreate(id, t0).set("cloud", cloud).bytes())
		if err != nil {
			t.Fatal(err)
		}
		ev.Source = event.SourceCollector
		return ev
	}
	if _, err := st.Commit(ctx, ingest.Batch{Events: []event.Event{mk("held", "c2")}}); err != nil {
		t.Fatal(err)
	}
	var b ingest.Batch
	wantInserted, wantConflicted := []bool{}, []bool{}
	for i := range 100 {
		id := fmt.Sprintf("e%03d", i)
		conflict := false
		switch i {
		case 37, 38: // the stored key, twice: both conflict with the stored event
			id, conflict = "held", true
		case 61: // a key of this batch for another cloud
			id, conflict = "e060", true
		case 62: // the same again, same resource: a duplicate
			id = "e060"
		}
		cloud := "c1"
		if i == 61 {
			cloud = "c3"
		}
		b.Events = append(b.Events, mk(id, cloud))
		b.Conflicts = append(b.Conflicts, ingest.Conflict{
			DeadLetter: ingest.DeadLetter{Raw: []byte(id), RawSize: len(id), Reason: conflictReason, EventID: id, ReceivedAt: t0},
			Audit:      ingest.AuditEntry{At: t0, Action: ingest.ActionConflict, Credential: "c", EventID: id, Platform: "openstack", Cloud: cloud},
		})
		wantInserted = append(wantInserted, !conflict && i != 62)
		wantConflicted = append(wantConflicted, conflict)
	}
	got, err := st.Commit(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantInserted, got.Inserted); diff != "" {
		t.Errorf("inserted (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantConflicted, got.Conflicted); diff != "" {
		t.Errorf("conflicted (-want +got):\n%s", diff)
	}
	var dlIDs, auditIDs []string
	for _, dl := range allDeadLetters(t, st) {
		dlIDs = append(dlIDs, dl.EventID+"/"+string(dl.Raw))
	}
	for _, a := range allAudit(t, st) {
		auditIDs = append(auditIDs, a.EventID+"/"+a.Cloud)
	}
	if diff := cmp.Diff([]string{"held/held", "held/held", "e060/e060"}, dlIDs); diff != "" {
		t.Errorf("dead letters (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"held/c1", "held/c1", "e060/c3"}, auditIDs); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
	if n := len(storedEvents(t, st)); n != 97 { // 96 new and the held one
		t.Errorf("%d events stored, want 97", n)
	}
	// A batch without Conflicts still reports them, and writes nothing for
	// them.
	got, err = st.Commit(ctx, ingest.Batch{Events: []event.Event{mk("held", "c4"), mk("held", "c2")}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ingest.Committed{Inserted: []bool{false, false}, Conflicted: []bool{true, false}}, got); diff != "" {
		t.Errorf("without Conflicts (-want +got):\n%s", diff)
	}
	if n := len(allDeadLetters(t, st)); n != 3 {
		t.Errorf("%d dead letters, want still 3", n)
	}
	if _, err := st.Commit(ctx, ingest.Batch{Events: []event.Event{mk("x", "c1")}, Conflicts: []ingest.Conflict{}}); err == nil {
		t.Error("Conflicts not parallel to Events: no error")
	}
}

// Concurrent batches (and replicas) of several clouds racing for the same
// keys: each key is stored once, for one cloud, and every other cloud's
// event of that key is a conflict with its dead letter and audit row;
// nothing is counted as a duplicate and no call fails.
func testConflictConcurrent(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	const keys, clouds = 40, 6
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		sum  ingest.Result
		errs []error
	)
	for c := range clouds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cloud := fmt.Sprintf("r%d", c)
			var batch [][]byte
			for k := range keys {
				// Each cloud walks the keys from its own offset, so the
				// batches lock in different orders of arrival.
				id := fmt.Sprintf("k%02d", (k+c*7)%keys)
				batch = append(batch, volumeCreate(id, t0).set("cloud", cloud).set("resource_id", "vol-"+cloud+id).bytes())
			}
			for start := 0; start < keys; start += 20 {
				res, err := e.svc.Ingest(context.Background(), syncRun, batch[start:start+20])
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				sum.Accepted += res.Accepted
				sum.Duplicates += res.Duplicates
				sum.Rejected = append(sum.Rejected, res.Rejected...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d calls failed, first: %v", len(errs), errs[0])
	}
	if sum.Accepted != keys || sum.Duplicates != 0 || len(sum.Rejected) != keys*(clouds-1) {
		t.Errorf("accepted %d duplicates %d rejected %d, want %d, 0 and %d", sum.Accepted, sum.Duplicates, len(sum.Rejected), keys, keys*(clouds-1))
	}
	for _, r := range sum.Rejected {
		if r.Reason != conflictReason {
			t.Errorf("rejection %+v, want a conflict", r)
			break
		}
	}
	if n := len(storedEvents(t, e.st)); n != keys {
		t.Errorf("%d events stored, want %d", n, keys)
	}
	if n, m := len(allDeadLetters(t, e.st)), len(allAudit(t, e.st)); n != keys*(clouds-1) || m != keys*(clouds-1) {
		t.Errorf("%d dead letters and %d audit rows, want %d of each", n, m, keys*(clouds-1))
	}
}
