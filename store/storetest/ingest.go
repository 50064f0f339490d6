package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/internal/seed"
	"github.com/tallyhq/tally/sizenames"
	"github.com/tallyhq/tally/store"
)

// collector is the caller of the public route in the suite: a credential
// scoped to (openstack, c1).
var collector = ingest.Caller{Credential: "collector-c1", Platform: "openstack", Cloud: "c1"}

// syncRun is an in-process reconciliation run: no scope.
var syncRun = ingest.Caller{Credential: "sync", Source: event.SourceReconciliation}

const volumeTypeID = "7a8b9c0d-1e2f-4a3b-8c4d-5e6f70819203"

// env is one test's store and service.
type env struct {
	t     *testing.T
	st    ingestStore
	clock *clock
	obs   *counter
	svc   *ingest.Service
}

func newEnv(t *testing.T, newStore func(t *testing.T) ingestStore, opts ingest.Options) *env {
	t.Helper()
	e := &env{t: t, st: newStore(t), clock: newClock(), obs: newCounter()}
	e.svc = e.service(e.st, opts)
	return e
}

func (e *env) service(st ingest.Store, opts ingest.Options) *ingest.Service {
	e.t.Helper()
	if opts.Now == nil {
		opts.Now = e.clock.Now
	}
	if opts.Observer == nil {
		opts.Observer = e.obs
	}
	svc, err := ingest.New(st, opts)
	if err != nil {
		e.t.Fatalf("ingest.New: %v", err)
	}
	return svc
}

func (e *env) ingest(c ingest.Caller, batch ...[]byte) ingest.Result {
	e.t.Helper()
	res, err := e.svc.Ingest(context.Background(), c, batch)
	if err != nil {
		e.t.Fatalf("Ingest: %v", err)
	}
	if n := res.Accepted + res.Duplicates + len(res.Rejected); n != len(batch) {
		e.t.Fatalf("accepted+duplicates+rejected = %d, want %d items: %+v", n, len(batch), res)
	}
	return res
}

func (e *env) names(cloud string, rows ...sizenames.Row) {
	e.t.Helper()
	if err := sizenames.ReplaceCloud(context.Background(), e.st, cloud, rows); err != nil {
		e.t.Fatalf("ReplaceCloud: %v", err)
	}
}

func volumeTypeRow(cloud, id, name string) sizenames.Row {
	return sizenames.Row{Cloud: cloud, ResourceType: "volume", Member: "type", Value: id, Name: name}
}

func schemaReason(t *testing.T, raw []byte) string {
	t.Helper()
	ev, err := event.Decode(raw)
	if err == nil {
		err = event.Validate(&ev)
	}
	if err == nil {
		t.Fatalf("test item %s is valid", raw)
	}
	return "schema: " + err.Error()
}

// runIngest is the conformance suite of the ingestion area
// (canonical-event.md, sections Rules, Size schemas, Size names, Delivery).
// It drives the public [ingest.Service] and [sizenames.ReplaceCloud] over
// the store newStore returns, which must be fresh: empty but for the seeded
// size schemas. Each subtest quotes the spec sentence it checks.
func runIngest(t *testing.T, newStore func(t *testing.T) ingestStore) {
	for _, tc := range ingestCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newStore)
		})
	}
}

type ingestCase struct {
	name string
	run  func(t *testing.T, newStore func(t *testing.T) ingestStore)
}

var ingestCases = []ingestCase{
	// Rules.
	{"Rules/replaying a batch stores nothing twice", testReplay},
	{"Rules/same pair twice in one batch is one accepted one duplicate", testInBatchDuplicate},
	{"Rules/same event_id at another timestamp is a new event", testOtherTimestamp},
	{"Rules/platform and cloud are neither meta nor partner", testVirtual},
	{"Rules/payload.state is required except on a delete", testStateRequired},
	{"Rules/payload.size is required on a create", testSizeRequired},
	{"Rules/stored source is the ingesting pipeline", testSource},
	{"Rules/a source outside the two refuses the item", testSourceRefused},
	{"Rules/event_id is the item's own, deterministic or not", testEventIDKept},
	{"Rules/project_id names the owner at or after the event", testProjectTransfer},
	{"Rules/every timestamp RFC 3339 can write is stored to the microsecond", testTimestampRange},
	{"Rules/a key stored for another cloud is a conflict, not a duplicate", testConflictOtherCloud},
	{"Rules/only the same resource makes a duplicate, stored or in one batch", testConflictMembers},
	{"Rules/Commit finds every conflict on every path of its write", testConflictCommit},
	{"Rules/concurrent batches of several clouds racing for one key", testConflictConcurrent},
	// Size schemas.
	{"SizeSchemas/size validated against the registry whenever the payload carries one", testSizeValidated},
	{"SizeSchemas/every copy of a size repeated in one batch is judged", testSizeRepeatedInBatch},
	{"SizeSchemas/five seeded pairs under openstack", testSeeds},
	{"SizeSchemas/seeded pairs admit further members and refuse what they must", testSeedRules},
	{"SizeSchemas/unregistered pair accepted unvalidated and counted", testUnregistered},
	{"SizeSchemas/unregistered pair refused when required", testRequireSizeSchema},
	{"SizeSchemas/registry listed read and written", testRegistry},
	{"SizeSchemas/a schema that does not compile is refused", testRegistryCompileFailure},
	{"SizeSchemas/a put is seen by the next batch of every service", testRegistryInvalidation},
	// Size names.
	{"SizeNames/rows read once per pair and batch", testNamesReadOnce},
	{"SizeNames/string equal to a row's value is replaced, size_as_reported example", testNamesExample},
	{"SizeNames/a size repeated in one batch is resolved for every event alike", testNamesRepeated},
	{"SizeNames/absent, non-string and unmatched members stay", testNamesStay},
	{"SizeNames/the schema validates the size after the replacement", testNamesBeforeSchema},
	{"SizeNames/the pipeline owns size_as_reported", testNamesOwnsMember},
	{"SizeNames/applies whatever the source, after the scope check", testNamesWhateverSource},
	{"SizeNames/a run replaces the cloud's rows", testReplaceCloud},
	{"SizeNames/stored events are never rewritten", testNeverRewritten},
	// Faithfulness (docs/decisions.md).
	{"Faithfulness/payload size, provider and unknown members read back byte for byte", testFaithfulPayload},
	{"Faithfulness/a size name changes only the bytes of the value it replaces", testFaithfulPayloadWithSizeNames},
	// Delivery.
	{"Delivery/more than 1000 items is refused and none stored", testBatchTooLarge},
	{"Delivery/result carries accepted, duplicates and rejected", testResultShape},
	{"Delivery/a batch of nothing but refusals still commits", testOnlyRefusals},
	{"Delivery/a refused item is kept exactly as it arrived", testDeadLetterRaw},
	{"Delivery/an item outside the scope leaves an audit row and no dead letter", testScope},
	{"Delivery/a batch lands whole or not at all", testFaultCancelledCommit},
	{"Delivery/dead letters paged oldest first", testDeadLetterPaging},
	{"Delivery/audit rows paged by action", testAuditPaging},
	{"Delivery/a cursor tally did not issue is refused as /cursor", testTamperedCursors},
	{"Delivery/dead letters paged by bytes as well as by count", testDeadLetterPageBytes},
	{"Delivery/observer counts the batch", testObserver},
	{"Delivery/concurrent overlapping batches store every event once", testConcurrent},
}

// "A duplicate is the same (event_id, timestamp) pair. Ingestion is
// idempotent, so replaying a batch stores nothing twice."
func testReplay(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	batch := items(volumeCreate("e1", t0), volumeCreate("e2", t0), instanceCreate("e3", t0.Add(time.Second)))
	if diff := cmp.Diff(ingest.Result{Accepted: 3, Rejected: []ingest.Rejection{}}, e.ingest(collector, batch...)); diff != "" {
		t.Errorf("first (-want +got):\n%s", diff)
	}
	before := storedEvents(t, e.st)
	if diff := cmp.Diff(ingest.Result{Duplicates: 3, Rejected: []ingest.Rejection{}}, e.ingest(collector, batch...)); diff != "" {
		t.Errorf("replay (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, storedEvents(t, e.st)); diff != "" {
		t.Errorf("stored events changed by the replay (-want +got):\n%s", diff)
	}
	if len(before) != 3 {
		t.Errorf("stored %d events, want 3", len(before))
	}
}

// The timestamp is stored as Decode normalised it (UTC, microseconds), at
// both ends of the years RFC 3339 can write and on either side of
// PostgreSQL's own epoch (2000-01-01), which its binary form counts from.
func testTimestampRange(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	var batch []item
	for i, ts := range []time.Time{
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999999000, time.UTC),
		time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.UTC),
		time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2000, 1, 1, 0, 0, 0, 1000, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC),
	} {
		batch = append(batch, volumeCreate(fmt.Sprintf("ts%d", i), ts))
	}
	if diff := cmp.Diff(ingest.Result{Accepted: len(batch), Rejected: []ingest.Rejection{}}, e.ingest(collector, items(batch...)...)); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	var want []eventForm
	for _, it := range batch {
		want = append(want, expected(t, it.bytes(), event.SourceCollector))
	}
	if diff := cmp.Diff(want, storedEvents(t, e.st)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// "A duplicate is the same (event_id, timestamp) pair", earlier in the same
// batch included.
func testInBatchDuplicate(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	first := volumeCreate("e1", t0)
	second := volumeCreate("e1", t0).set("payload.state", "creating") // same pair, other content
	res := e.ingest(collector, first.bytes(), second.bytes())
	if diff := cmp.Diff(ingest.Result{Accepted: 1, Duplicates: 1, Rejected: []ingest.Rejection{}}, res); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	want := []eventForm{expected(t, first.bytes(), event.SourceCollector)}
	if diff := cmp.Diff(want, storedEvents(t, e.st)); diff != "" {
		t.Errorf("the first of the pair is stored (-want +got):\n%s", diff)
	}
}

// "Reusing an event_id with another timestamp is a provider bug the API does
// not detect": it is a new event.
func testOtherTimestamp(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	a, b := volumeCreate("e1", t0), volumeCreate("e1", t0.Add(time.Microsecond))
	e.ingest(collector, a.bytes())
	if diff := cmp.Diff(ingest.Result{Accepted: 1, Rejected: []ingest.Rejection{}}, e.ingest(collector, b.bytes())); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	want := []eventForm{expected(t, a.bytes(), event.SourceCollector), expected(t, b.bytes(), event.SourceCollector)}
	if diff := cmp.Diff(want, storedEvents(t, e.st)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// "platform and cloud are neither meta nor partner. ... an item holding
// either literal in either field is refused."
func testVirtual(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	batch := items(
		volumeCreate("e0", t0).set("platform", "meta"),
		volumeCreate("e1", t0).set("cloud", "partner"),
		volumeCreate("e2", t0).set("platform", "partner"),
		volumeCreate("e3", t0).set("cloud", "meta"),
	)
	res := e.ingest(syncRun, batch...)
	want := ingest.Result{Rejected: []ingest.Rejection{}}
	for i, raw := range batch {
		want.Rejected = append(want.Rejected, ingest.Rejection{Index: i, EventID: fmt.Sprintf("e%d", i), Reason: schemaReason(t, raw)})
	}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := len(storedEvents(t, e.st)); got != 0 {
		t.Errorf("stored %d events, want 0", got)
	}
	if got := len(allDeadLetters(t, e.st)); got != 4 {
		t.Errorf("%d dead letters, want 4", got)
	}
}

// "payload.state is the resource state at or after the event. It is required
// on every event except a delete, where the core sets deleted itself."
func testStateRequired(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	update := volumeCreate("u", t0).set("event_type", "volume.resize.end").set("payload.state", nil)
	del := volumeCreate("d", t0).set("event_type", "volume.delete.end").set("payload.state", nil).set("payload.size", nil)
	res := e.ingest(collector, update.bytes(), del.bytes())
	want := ingest.Result{Accepted: 1, Rejected: []ingest.Rejection{{Index: 0, EventID: "u", Reason: schemaReason(t, update.bytes())}}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(res.Rejected[0].Reason, "schema: /payload/state: required: ") {
		t.Errorf("reason %q does not name /payload/state and its rule", res.Rejected[0].Reason)
	}
}

// "payload.size is the full replacement size object. It is required on a
// create and on any event that changes the size; absent means the size did
// not change."
func testSizeRequired(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	create := volumeCreate("c", t0).set("payload.size", nil)
	update := volumeCreate("u", t0).set("event_type", "volume.attach.end").set("payload.size", nil)
	res := e.ingest(collector, create.bytes(), update.bytes())
	want := ingest.Result{Accepted: 1, Rejected: []ingest.Rejection{{Index: 0, EventID: "c", Reason: schemaReason(t, create.bytes())}}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// "source may be left out, and it defaults to collector. A stored event
// reports the pipeline that ingested it rather than the value the item
// claimed, so an item submitted to POST /api/v1/events is stored as
// collector whatever it says."
func testSource(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	claimsSync := volumeCreate("a", t0).set("source", "reconciliation")
	leftOut := volumeCreate("b", t0)
	claimsCollector := volumeCreate("c", t0.Add(time.Second)).set("source", "collector")
	e.ingest(collector, claimsSync.bytes(), leftOut.bytes())
	e.ingest(syncRun, claimsCollector.bytes())
	want := []eventForm{
		expected(t, claimsSync.bytes(), event.SourceCollector),
		expected(t, leftOut.bytes(), event.SourceCollector),
		expected(t, claimsCollector.bytes(), event.SourceReconciliation),
	}
	if diff := cmp.Diff(want, storedEvents(t, e.st)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// "A value outside collector and reconciliation refuses the item."
func testSourceRefused(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	it := volumeCreate("a", t0).set("source", "manual")
	res := e.ingest(syncRun, it.bytes())
	want := ingest.Result{Rejected: []ingest.Rejection{{Index: 0, EventID: "a", Reason: schemaReason(t, it.bytes())}}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// "payload.size is validated against the JSON Schema the resource type
// registry holds for the pair (platform, resource_type), whenever the
// payload carries a size."
func testSizeValidated(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	bad := instanceCreate("bad", t0).set("payload.size.vcpus", 0).set("payload.size.flavor", nil)
	noSize := instanceCreate("nosize", t0).set("event_type", "compute.instance.update").set("payload.size", nil)
	res := e.ingest(collector, bad.bytes(), noSize.bytes())
	if res.Accepted != 1 || len(res.Rejected) != 1 {
		t.Fatalf("result %+v, want 1 accepted, 1 rejected", res)
	}
	want := "size_schema: /payload/size/flavor: required: is required; /payload/size/vcpus: minimum: "
	if got := res.Rejected[0].Reason; !strings.HasPrefix(got, want) {
		t.Errorf("reason %q, want prefix %q", got, want)
	}
	dls := allDeadLetters(t, e.st)
	if len(dls) != 1 || !bytes.Equal(dls[0].Raw, bad.bytes()) || dls[0].Reason != res.Rejected[0].Reason {
		t.Errorf("dead letters %+v, want the refused item as it arrived", dls)
	}
}

// Sizes repeat within a batch (one volume type, one flavor); each copy is
// judged as if it were alone: a valid size accepted every time, an invalid
// one refused every time, whatever came before it in the batch.
func testSizeRepeatedInBatch(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	var items [][]byte
	wantRejected := []int{}
	for i := range 6 {
		it := volumeCreate(fmt.Sprintf("r%d", i), t0).set("payload.size.size_gb", 5)
		if i%3 == 1 {
			it = it.set("payload.size.size_gb", 0)
			wantRejected = append(wantRejected, i)
		}
		items = append(items, it.bytes())
	}
	res := e.ingest(collector, items...)
	var got []int
	for _, r := range res.Rejected {
		got = append(got, r.Index)
		if !strings.Contains(r.Reason, "/payload/size/size_gb: exclusiveMinimum") {
			t.Errorf("item %d: reason %q, want it to name /payload/size/size_gb: exclusiveMinimum", r.Index, r.Reason)
		}
	}
	if diff := cmp.Diff(wantRejected, got); diff != "" || res.Accepted != 4 {
		t.Errorf("accepted %d (want 4), rejected indexes (-want +got):\n%s", res.Accepted, diff)
	}
}

// "Five pairs ride the migration chain, so every database the chain reaches
// knows them without an operator registering anything." The stored
// documents are seed.ResourceTypes byte for byte.
func testSeeds(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	got, err := e.svc.ResourceTypes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Platform, ResourceType, SizeSchema string
		Version                            int64
	}
	var wantRows, gotRows []row
	for _, rt := range seed.ResourceTypes() {
		wantRows = append(wantRows, row{rt.Platform, rt.ResourceType, string(rt.SizeSchema), 1})
	}
	for _, rt := range got {
		gotRows = append(gotRows, row{rt.Platform, rt.ResourceType, string(rt.SizeSchema), rt.Version})
		if rt.UpdatedAt.IsZero() {
			t.Errorf("%s: UpdatedAt is zero", rt.ResourceType)
		}
	}
	if diff := cmp.Diff(wantRows, gotRows); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// The table of Size schemas: "instance: vcpus, ram_gb, disk_gb, flavor;
// volume: size_gb, type; floating_ip: ip_version; image: size_gb;
// loadbalancer: listeners, pools" ... "all five admit further members, so a
// size that carries more than the schema names is accepted."
func testSeedRules(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{RequireSizeSchema: true})
	cases := []struct {
		rt, size string
		ok       bool
		rule     string // the member and rule a refusal names
	}{
		{"instance", `{"vcpus":1,"ram_gb":0.5,"disk_gb":0,"flavor":"m1.tiny","extra":{"gpu":true}}`, true, ""},
		{"instance", `{"vcpus":0,"ram_gb":1,"disk_gb":0,"flavor":"f"}`, false, "/payload/size/vcpus: minimum"},
		{"instance", `{"vcpus":1.5,"ram_gb":1,"disk_gb":0,"flavor":"f"}`, false, "/payload/size/vcpus: type"},
		{"instance", `{"vcpus":1,"ram_gb":0,"disk_gb":0,"flavor":"f"}`, false, "/payload/size/ram_gb: exclusiveMinimum"},
		{"instance", `{"vcpus":1,"ram_gb":1,"disk_gb":-1,"flavor":"f"}`, false, "/payload/size/disk_gb: minimum"},
		{"instance", `{"vcpus":1,"ram_gb":1,"disk_gb":1,"flavor":7}`, false, "/payload/size/flavor: type"},
		{"instance", `{"ram_gb":1,"disk_gb":1,"flavor":"f"}`, false, "/payload/size/vcpus: required"},
		{"volume", `{"size_gb":1,"type":"ssd","bootable":true}`, true, ""},
		{"volume", `{"size_gb":0,"type":"ssd"}`, false, "/payload/size/size_gb: exclusiveMinimum"},
		{"volume", `{"size_gb":1}`, false, "/payload/size/type: required"},
		{"floating_ip", `{"ip_version":6,"pool":"public"}`, true, ""},
		{"floating_ip", `{"ip_version":4}`, true, ""},
		{"floating_ip", `{"ip_version":5}`, false, "/payload/size/ip_version: enum"},
		{"floating_ip", `{}`, false, "/payload/size/ip_version: required"},
		{"image", `{"size_gb":0,"disk_format":"qcow2"}`, true, ""},
		{"image", `{"size_gb":-0.1}`, false, "/payload/size/size_gb: minimum"},
		{"loadbalancer", `{"listeners":0,"pools":0,"flavor":"small"}`, true, ""},
		{"loadbalancer", `{"listeners":1.5,"pools":0}`, false, "/payload/size/listeners: type"},
		{"loadbalancer", `{"listeners":1,"pools":-1}`, false, "/payload/size/pools: minimum"},
		{"loadbalancer", `{"listeners":1}`, false, "/payload/size/pools: required"},
	}
	for i, c := range cases {
		it := volumeCreate(fmt.Sprintf("s%d", i), t0).set("resource_type", c.rt).set("payload.size", jsontext.Value(c.size))
		res := e.ingest(collector, it.bytes())
		switch {
		case c.ok && res.Accepted != 1:
			t.Errorf("%s %s: refused %+v, want accepted", c.rt, c.size, res.Rejected)
		case !c.ok && len(res.Rejected) != 1:
			t.Errorf("%s %s: accepted, want refused naming %q", c.rt, c.size, c.rule)
		case !c.ok && !strings.Contains(res.Rejected[0].Reason, c.rule):
			t.Errorf("%s %s: reason %q, want it to name %q", c.rt, c.size, res.Rejected[0].Reason, c.rule)
		}
	}
}

// "A size for a pair no row registers is accepted unvalidated by default and
// counted" (tally_ingest_unvalidated_size_total, by platform and
// resource_type).
func testUnregistered(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	a := volumeCreate("a", t0).set("resource_type", "share").set("payload.size", map[string]any{"anything": -1})
	b := volumeCreate("b", t0).set("resource_type", "share").set("payload.size", map[string]any{})
	dup := volumeCreate("a", t0).set("resource_type", "share").set("payload.size", map[string]any{"anything": -1})
	res := e.ingest(collector, a.bytes(), b.bytes(), dup.bytes())
	if diff := cmp.Diff(ingest.Result{Accepted: 2, Duplicates: 1, Rejected: []ingest.Rejection{}}, res); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"openstack/share": 2}, e.obs.unvalidated); diff != "" {
		t.Errorf("unvalidated counter (-want +got):\n%s", diff)
	}
}

// "setting TALLY_INGEST_REQUIRE_SIZE_SCHEMA to true refuses it instead."
func testRequireSizeSchema(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{RequireSizeSchema: true})
	a := volumeCreate("a", t0).set("resource_type", "share").set("payload.size", map[string]any{"gb": 1})
	noSize := volumeCreate("b", t0).set("resource_type", "share").set("event_type", "share.update").set("payload.size", nil)
	res := e.ingest(collector, a.bytes(), noSize.bytes())
	want := ingest.Result{Accepted: 1, Rejected: []ingest.Rejection{{Index: 0, EventID: "a", Reason: "size_schema: /payload/size: schema: no size schema is registered for (openstack, share), and this server requires one"}}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if len(e.obs.unvalidated) != 0 {
		t.Errorf("unvalidated counted %v, want nothing", e.obs.unvalidated)
	}
}

// "The registry is listed, read and written through the resource type
// operations".
func testRegistry(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	ctx := context.Background()
	doc := jsontext.Value(`{"type":"object","properties":{"gb":{"type":"integer"}},"required":["gb"]}`)
	put, err := e.svc.PutResourceType(ctx, "openstack", "share", doc)
	if err != nil {
		t.Fatal(err)
	}
	if put.Version != 1 || string(put.SizeSchema) != string(doc) || put.Platform != "openstack" || put.ResourceType != "share" || put.UpdatedAt.IsZero() {
		t.Errorf("put returned %+v", put)
	}
	got, err := e.svc.ResourceType(ctx, "openstack", "share")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(put, got); diff != "" {
		t.Errorf("get (-want +got):\n%s", diff)
	}
	doc2 := jsontext.Value(`{"type":"object"}`)
	put2, err := e.svc.PutResourceType(ctx, "openstack", "share", doc2)
	if err != nil {
		t.Fatal(err)
	}
	if put2.Version != 2 || string(put2.SizeSchema) != string(doc2) {
		t.Errorf("second put returned %+v, want version 2", put2)
	}
	list, err := e.svc.ResourceTypes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, rt := range list {
		names = append(names, rt.Platform+"/"+rt.ResourceType)
	}
	want := []string{"openstack/floating_ip", "openstack/image", "openstack/instance", "openstack/loadbalancer", "openstack/share", "openstack/volume"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}
	if _, err := e.svc.ResourceType(ctx, "openstack", "nothing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("get of an unknown pair: %v, want store.ErrNotFound", err)
	}
}

// "Registering a schema that does not compile is refused with the
// compiler's message" (the lifecycle ingestion rules).
func testRegistryCompileFailure(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	ctx := context.Background()
	for _, doc := range []string{`{"type":"nonsense"}`, `{"minimum":"one"}`, `not json`, `{"$ref":"file:///etc/passwd"}`, `{"$ref":"https://example.com/s.json"}`} {
		_, err := e.svc.PutResourceType(ctx, "openstack", "volume", jsontext.Value(doc))
		var ve *event.ValidationError
		if !errors.As(err, &ve) || !errors.Is(err, event.ErrInvalid) || len(ve.Problems) == 0 || ve.Problems[0].Message == "" {
			t.Errorf("put %s: %v, want an *event.ValidationError with the compiler's message", doc, err)
		}
	}
	if _, err := e.svc.PutResourceType(ctx, "", "volume", jsontext.Value(`{}`)); !errors.Is(err, event.ErrInvalid) {
		t.Errorf("put with no platform: %v, want event.ErrInvalid", err)
	}
	got, err := e.svc.ResourceType(ctx, "openstack", "volume")
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 1 {
		t.Errorf("volume version %d after refused puts, want 1", got.Version)
	}
}

// The compiled-schema cache is invalidated when a schema changes, also when
// another service (another process on the same database) puts it.
func testRegistryInvalidation(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	other := e.service(e.st, ingest.Options{})
	ctx := context.Background()
	small := volumeCreate("a", t0).set("payload.size.size_gb", 5)
	if res := e.ingest(collector, small.bytes()); res.Accepted != 1 {
		t.Fatalf("before the put: %+v", res)
	}
	strict := jsontext.Value(`{"type":"object","properties":{"size_gb":{"type":"number","minimum":10}},"required":["size_gb"]}`)
	if _, err := other.PutResourceType(ctx, "openstack", "volume", strict); err != nil {
		t.Fatal(err)
	}
	again := volumeCreate("b", t0).set("payload.size.size_gb", 5)
	res := e.ingest(collector, again.bytes())
	if len(res.Rejected) != 1 || !strings.Contains(res.Rejected[0].Reason, "/payload/size/size_gb: minimum") {
		t.Errorf("after another service's put: %+v, want refused by the new schema", res)
	}
	if _, err := e.svc.PutResourceType(ctx, "openstack", "volume", jsontext.Value(`{"type":"object"}`)); err != nil {
		t.Fatal(err)
	}
	if res := e.ingest(collector, volumeCreate("c", t0).set("payload.size.size_gb", 5).bytes()); res.Accepted != 1 {
		t.Errorf("after this service's put: %+v, want accepted", res)
	}
}

// "The pipeline reads the rows of the event's (cloud, resource_type), once
// per pair and batch."
func testNamesReadOnce(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	e.names("c1", volumeTypeRow("c1", volumeTypeID, "ssd"))
	cs := &countingStore{ingestStore: e.st}
	svc := e.service(cs, ingest.Options{})
	var batch [][]byte
	for i := range 5 {
		batch = append(batch, volumeCreate(fmt.Sprintf("v%d", i), t0).set("payload.size.type", volumeTypeID).bytes())
	}
	batch = append(batch, instanceCreate("i1", t0).bytes(), instanceCreate("i2", t0).bytes())
	batch = append(batch, volumeCreate("other", t0).set("cloud", "c2").bytes())
	res, err := svc.Ingest(context.Background(), syncRun, batch)
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 8 {
		t.Fatalf("%+v, want 8 accepted", res)
	}
	if got := cs.sizeNames.Load(); got != 3 {
		t.Errorf("SizeNames read %d times, want 3 (c1/volume, c1/instance, c2/volume)", got)
	}
	if got := cs.resourceTypes.Load(); got != 2 {
		t.Errorf("ResourceType read %d times, want 2 (openstack/volume, openstack/instance)", got)
	}
}

// "A size member that holds a string equal to a row's value under that row's
// member is replaced by the row's name." ... "An event with at least one
// replaced member carries payload.provider.size_as_reported, an object
// holding each replaced member with the value it arrived with." The spec's
// example, byte for byte in value.
func testNamesExample(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	e.names("c1", volumeTypeRow("c1", volumeTypeID, "ssd"), volumeTypeRow("c1", "0000", "hdd"))
	it := volumeCreate("e1", t0).set("payload.size.type", volumeTypeID)
	if res := e.ingest(collector, it.bytes()); res.Accepted != 1 {
		t.Fatalf("%+v", res)
	}
	evs, err := e.st.Projection().History(context.Background(), projection.Key{Cloud: "c1", ResourceType: "volume", ResourceID: "vol-e1"})
	if err != nil || len(evs) != 1 {
		t.Fatalf("History: %v, %d events", err, len(evs))
	}
	got, err := json.Marshal(evs[0].Payload)
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "state": "available",
  "size": {"size_gb": 100, "type": "ssd"},
  "provider": {
    "oslo_event_type": "volume.create.end",
    "size_as_reported": {"type": "7a8b9c0d-1e2f-4a3b-8c4d-5e6f70819203"}
  }
}`
	if diff := jsonDiff(t, []byte(want), got); diff != "" {
		t.Errorf("stored payload (-want +got):\n%s", diff)
	}
}

// Sizes repeat within a batch (the performance rule: resolve each size once per
// batch): every copy is resolved, each event keeping its own provider with
// size_as_reported added, and a copy that matches no row stays as sent.
func testNamesRepeated(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	e.names("c1", volumeTypeRow("c1", volumeTypeID, "ssd"))
	batch := []item{
		volumeCreate("r1", t0).set("payload.size.type", volumeTypeID),
		volumeCreate("r2", t0).set("payload.size.type", volumeTypeID).set("payload.provider", map[string]any{"host": "h2"}),
		volumeCreate("r3", t0).set("payload.size.type", volumeTypeID).set("payload.provider", nil),
		volumeCreate("r4", t0).set("payload.size.type", "0000"),
		volumeCreate("r5", t0).set("payload.size.type", "0000"),
	}
	if res := e.ingest(collector, items(batch...)...); res.Accepted != len(batch) {
		t.Fatalf("%+v", res)
	}
	sar := `"size_as_reported":{"type":"` + volumeTypeID + `"}`
	want := map[string][2]string{
		"r1": {`{"size_gb":100,"type":"ssd"}`, `{"oslo_event_type":"volume.create.end",` + sar + `}`},
		"r2": {`{"size_gb":100,"type":"ssd"}`, `{"host":"h2",` + sar + `}`},
		"r3": {`{"size_gb":100,"type":"ssd"}`, `{` + sar + `}`},
		"r4": {`{"size_gb":100,"type":"0000"}`, `{"oslo_event_type":"volume.create.end"}`},
		"r5": {`{"size_gb":100,"type":"0000"}`, `{"oslo_event_type":"volume.create.end"}`},
	}
	got := map[string][2]string{}
	for id := range want {
		evs, err := e.st.Projection().History(context.Background(), projection.Key{Cloud: "c1", ResourceType: "volume", ResourceID: "vol-" + id})
		if err != nil || len(evs) != 1 {
			t.Fatalf("History of %s: %v, %d events", id, err, len(evs))
		}
		got[id] = [2]string{string(evs[0].Payload.Size), string(evs[0].Payload.Provider)}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stored size and provider by event (-want +got):\n%s", diff)
	}
}

// "A member that is absent, is not a string, or matches no row stays as it
// arrived, and so does every member of an event whose pair has no rows."
// Also the second limit: "A cloud nothing reconciles has no rows. Its volume
// events keep the id" (otherCloud below).
func testNamesStay(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	e.names("c1", volumeTypeRow("c1", volumeTypeID, "ssd"), sizenames.Row{Cloud: "c1", ResourceType: "share", Member: "gb", Value: "7", Name: "seven"})
	unmatched := volumeCreate("a", t0).set("payload.size.type", "not-a-known-id")
	otherCloud := volumeCreate("b", t0).set("cloud", "c2").set("payload.size.type", volumeTypeID)
	notString := volumeCreate("c", t0).set("resource_type", "share").set("payload.size", jsontext.Value(`{"gb":7,"exact":1.000000000000000000001}`))
	absent := volumeCreate("d", t0).set("resource_type", "share").set("payload.size", map[string]any{"other": "7"})
	batch := items(unmatched, otherCloud, notString, absent)
	if res := e.ingest(syncRun, batch...); res.Accepted != 4 {
		t.Fatalf("%+v", res)
	}
	var want []eventForm
	for _, raw := range batch {
		want = append(want, expected(t, raw, event.SourceReconciliation))
	}
	if diff := cmp.Diff(want, storedEvents(t, e.st)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// "The size schema validates the size after the replacement, so the size it
// accepts is the size that is stored and folded. An item it refuses is
// dead-lettered as it arrived."
func testNamesBeforeSchema(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	e.names("c1", volumeTypeRow("c1", volumeTypeID, "ssd"))
	names := jsontext.Value(`{"type":"object","properties":{"size_gb":{"type":"number","exclusiveMinimum":0},"type":{"enum":["ssd","hdd"]}},"required":["size_gb","type"]}`)
	if _, err := e.svc.PutResourceType(context.Background(), "openstack", "volume", names); err != nil {
		t.Fatal(err)
	}
	resolved := volumeCreate("a", t0).set("payload.size.type", volumeTypeID)
	unresolved := volumeCreate("b", t0).set("payload.size.type", "11111111-2222-3333-4444-555555555555")
	res := e.ingest(collector, resolved.bytes(), unresolved.bytes())
	if res.Accepted != 1 || len(res.Rejected) != 1 || res.Rejected[0].Index != 1 || !strings.HasPrefix(res.Rejected[0].Reason, "size_schema: /payload/size/type: enum: ") {
		t.Fatalf("%+v, want the resolved item accepted and the other refused by enum", res)
	}
	dls := allDeadLetters(t, e.st)
	if len(dls) != 1 || !bytes.Equal(dls[0].Raw, unresolved.bytes()) {
		t.Errorf("dead letters %+v, want the item as it arrived", dls)
	}
}

// "The pipeline owns that member: an item that brings one of its own and is
// resolved is stored with the pipeline's value." One that is not resolved
// keeps its own: the pipeline sets it "only when something was replaced".
func testNamesOwnsMember(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	e.names("c1", volumeTypeRow("c1", volumeTypeID, "ssd"))
	own := map[string]any{"type": "forged", "size_gb": 1}
	resolved := volumeCreate("a", t0).set("payload.size.type", volumeTypeID).set("payload.provider.size_as_reported", own).set("payload.provider.zz", jsontext.Value(`[1.50]`))
	kept := volumeCreate("b", t0).set("payload.provider.size_as_reported", own)
	noProvider := volumeCreate("c", t0).set("payload.size.type", volumeTypeID).set("payload.provider", nil)
	if res := e.ingest(collector, resolved.bytes(), kept.bytes(), noProvider.bytes()); res.Accepted != 3 {
		t.Fatalf("%+v", res)
	}
	wantA := expected(t, volumeCreate("a", t0).set("payload.provider.zz", jsontext.Value(`[1.50]`)).set("payload.provider.size_as_reported", map[string]any{"type": volumeTypeID}).bytes(), event.SourceCollector)
	wantB := expected(t, kept.bytes(), event.SourceCollector)
	wantC := expected(t, volumeCreate("c", t0).set("payload.provider", map[string]any{"size_as_reported": map[string]any{"type": volumeTypeID}}).bytes(), event.SourceCollector)
	if diff := cmp.Diff([]eventForm{wantA, wantB, wantC}, storedEvents(t, e.st)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// "The rule applies to every item that carries payload.size, whatever its
// source, after the scope check and before the size schema".
func testNamesWhateverSource(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	e.names("c1", volumeTypeRow("c1", volumeTypeID, "ssd"))
	e.names("c9", volumeTypeRow("c9", volumeTypeID, "ssd"))
	fromSync := volumeCreate("a", t0).set("payload.size.type", volumeTypeID).set("source", "reconciliation")
	outOfScope := volumeCreate("b", t0).set("cloud", "c9").set("payload.size.type", volumeTypeID)
	cs := &countingStore{ingestStore: e.st}
	svc := e.service(cs, ingest.Options{})
	res, err := svc.Ingest(context.Background(), collector, items(outOfScope))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rejected) != 1 || !strings.HasPrefix(res.Rejected[0].Reason, "scope: ") || cs.sizeNames.Load() != 0 {
		t.Errorf("out of scope: %+v, %d size-name reads; want refused before any read", res, cs.sizeNames.Load())
	}
	if res := e.ingest(syncRun, fromSync.bytes()); res.Accepted != 1 {
		t.Fatalf("%+v", res)
	}
	want := []eventForm{expected(t, volumeCreate("a", t0).set("source", "reconciliation").set("payload.provider.size_as_reported", map[string]any{"type": volumeTypeID}).bytes(), event.SourceReconciliation)}
	if diff := cmp.Diff(want, storedEvents(t, e.st)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// "A reconciliation run writes the rows: every run of a cloud whose adapter
// lists names replaces that cloud's rows with the list in one transaction."
func testReplaceCloud(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	ctx := context.Background()
	e.names("c1", volumeTypeRow("c1", "id1", "ssd"), volumeTypeRow("c1", "id2", "hdd"),
		sizenames.Row{Cloud: "c1", ResourceType: "share", Member: "type", Value: "id1", Name: "nfs"})
	e.names("c2", volumeTypeRow("c2", "id1", "gold"))
	e.names("c1", volumeTypeRow("c1", "id3", "nvme"))
	read := func(cloud, rt string) []sizenames.Row {
		rows, err := e.st.SizeNames(ctx, cloud, rt)
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	if diff := cmp.Diff([]sizenames.Row{volumeTypeRow("c1", "id3", "nvme")}, read("c1", "volume")); diff != "" {
		t.Errorf("c1 volume (-want +got):\n%s", diff)
	}
	if got := read("c1", "share"); len(got) != 0 {
		t.Errorf("c1 share rows %v, want none after the replace", got)
	}
	if diff := cmp.Diff([]sizenames.Row{volumeTypeRow("c2", "id1", "gold")}, read("c2", "volume")); diff != "" {
		t.Errorf("c2 untouched (-want +got):\n%s", diff)
	}
	err := sizenames.ReplaceCloud(ctx, e.st, "c2", []sizenames.Row{volumeTypeRow("c2", "x", "a"), volumeTypeRow("c2", "x", "b")})
	if !errors.Is(err, event.ErrInvalid) {
		t.Errorf("duplicate key: %v, want an *event.ValidationError", err)
	}
	if diff := cmp.Diff([]sizenames.Row{volumeTypeRow("c2", "id1", "gold")}, read("c2", "volume")); diff != "" {
		t.Errorf("c2 after a refused replace (-want +got):\n%s", diff)
	}
	e.names("c1")
	if got := read("c1", "volume"); len(got) != 0 {
		t.Errorf("c1 rows %v after an empty replace, want none", got)
	}
	// The store itself refuses a row of another cloud (the contract says
	// every row's Cloud equals cloud), and changes nothing.
	if err := e.st.ReplaceSizeNames(ctx, "c2", []sizenames.Row{volumeTypeRow("c3", "x", "a")}); err == nil {
		t.Errorf("ReplaceSizeNames with a row of another cloud succeeded")
	}
	if diff := cmp.Diff([]sizenames.Row{volumeTypeRow("c2", "id1", "gold")}, read("c2", "volume")); diff != "" {
		t.Errorf("c2 after a refused store replace (-want +got):\n%s", diff)
	}
	// A cancelled context changes nothing.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := e.st.ReplaceSizeNames(cctx, "c2", nil); err == nil {
		t.Errorf("ReplaceSizeNames with a cancelled context succeeded")
	}
	if diff := cmp.Diff([]sizenames.Row{volumeTypeRow("c2", "id1", "gold")}, read("c2", "volume")); diff != "" {
		t.Errorf("c2 after a cancelled replace (-want +got):\n%s", diff)
	}
}

// "Stored events are never rewritten, so an event stored before its names
// existed keeps the id." Also the first limit: "An event that arrives before
// the first run of its cloud stored names ... is stored with the id."
func testNeverRewritten(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	it := volumeCreate("a", t0).set("payload.size.type", volumeTypeID)
	e.ingest(collector, it.bytes())
	e.names("c1", volumeTypeRow("c1", volumeTypeID, "ssd"))
	e.ingest(collector, it.bytes()) // a replay is a duplicate, not a rewrite
	want := []eventForm{expected(t, it.bytes(), event.SourceCollector)}
	if diff := cmp.Diff(want, storedEvents(t, e.st)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// "The body of POST /api/v1/events is one event or an array of at most 1000
// of them. A longer array is answered 413 and none of it is stored."
func testBatchTooLarge(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	batch := make([][]byte, ingest.MaxBatch+1)
	for i := range batch {
		batch[i] = volumeCreate(fmt.Sprintf("e%d", i), t0).bytes()
	}
	batch[3] = []byte("not json")
	if _, err := e.svc.Ingest(context.Background(), collector, batch); !errors.Is(err, ingest.ErrBatchTooLarge) {
		t.Fatalf("Ingest of %d items: %v, want ErrBatchTooLarge", len(batch), err)
	}
	if n := len(storedEvents(t, e.st)) + len(allDeadLetters(t, e.st)) + len(allAudit(t, e.st)); n != 0 {
		t.Errorf("%d rows stored, want none", n)
	}
	if res := e.ingest(collector, batch[:ingest.MaxBatch]...); res.Accepted != ingest.MaxBatch-1 {
		t.Errorf("a batch of exactly %d: %d accepted", ingest.MaxBatch, res.Accepted)
	}
}

// "It carries accepted, duplicates and rejected as IngestResult declares
// them." rejected is always a list, in index order; event_id is whatever id
// the item carried, "" if none.
func testResultShape(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	empty := e.ingest(collector)
	b, err := json.Marshal(empty)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"accepted":0,"duplicates":0,"rejected":[]}`; got != want {
		t.Errorf("empty batch encodes as %s, want %s", got, want)
	}
	e.ingest(collector, volumeCreate("old", t0).bytes())
	batch := [][]byte{
		[]byte(`42`),
		volumeCreate("ok", t0).bytes(),
		[]byte(`{"event_id":"broken", "timestamp": `),
		volumeCreate("old", t0).bytes(),
		volumeCreate("typo", t0).set("Platform", "openstack").bytes(),
		volumeCreate("far", t0).set("cloud", "c7").bytes(),
		[]byte(`{"payload":{}}`),
	}
	res := e.ingest(collector, batch...)
	want := ingest.Result{Accepted: 1, Duplicates: 1, Rejected: []ingest.Rejection{
		{Index: 0, EventID: "", Reason: schemaReason(t, batch[0])},
		{Index: 2, EventID: "broken", Reason: schemaReason(t, batch[2])},
		{Index: 4, EventID: "typo", Reason: schemaReason(t, batch[4])},
		{Index: 5, EventID: "far", Reason: `scope: /cloud: scope: cloud "c7" is outside this credential's openstack/c1`},
		{Index: 6, EventID: "", Reason: schemaReason(t, batch[6])},
	}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if r := res.Rejected[0].Reason; r != "schema: : type: the item must be a JSON object, not a number" {
		t.Errorf("non-object reason %q", r)
	}
	if r := res.Rejected[4].Reason; !strings.Contains(r, "event_id") || !strings.Contains(r, "; ") {
		t.Errorf("reason %q does not list every problem", r)
	}
}

// "A batch lands whole or not at all, and a batch of nothing but refused
// items still commits."
func testOnlyRefusals(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	res := e.ingest(collector, []byte(`{}`), volumeCreate("x", t0).set("cloud", "elsewhere").bytes(), []byte(`[]`))
	if res.Accepted != 0 || len(res.Rejected) != 3 {
		t.Fatalf("%+v", res)
	}
	if got := len(allDeadLetters(t, e.st)); got != 2 {
		t.Errorf("%d dead letters, want 2", got)
	}
	if got := len(allAudit(t, e.st)); got != 1 {
		t.Errorf("%d audit rows, want 1", got)
	}
}

// "An item this API refuses is kept server-side with the reason it was
// refused and named in rejected with its index and its event id." The raw
// bytes are kept exactly, NUL and invalid JSON included, up to the cap;
// beyond it only the size.
func testDeadLetterRaw(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{MaxDeadLetterBytes: 1024})
	big := volumeCreate("big", t0).set("payload.provider.blob", strings.Repeat("x", 2000)).set("platform", "meta").bytes()
	batch := [][]byte{
		[]byte("{\"event_id\":\"nul\",\"x\":\"a\x00b\"}"),
		[]byte(`{"event_id":"nul2","payload":{"state":"a\u0000b"}}`),
		[]byte("{\"event_id\":\"utf8\",\"resource_id\":\"\xff\xfe\"}"),
		[]byte(`{"event_id": "trunc`),
		[]byte("  not json at all \n"),
		{},
		big,
		[]byte("[1,2]"),
		[]byte(`{"event_id":"nulname","a\u0000b":1}`),
		[]byte("{\"event_id\":\"longname\",\"" + strings.Repeat("n", 9000) + "\":1}"),
	}
	clockAt := t0.Add(3 * time.Hour)
	e.clock.Advance(3 * time.Hour)
	res := e.ingest(collector, batch...)
	if len(res.Rejected) != len(batch) {
		t.Fatalf("%+v, want every item refused", res)
	}
	var want []ingest.DeadLetter
	for i, raw := range batch {
		dl := ingest.DeadLetter{Raw: raw, RawSize: len(raw), Reason: res.Rejected[i].Reason, EventID: res.Rejected[i].EventID, ReceivedAt: clockAt}
		if i == 6 || i == 9 {
			dl.Raw = nil
		}
		want = append(want, dl)
	}
	got := allDeadLetters(t, e.st)
	uuids := map[string]bool{}
	for i := range got {
		if i > 0 && got[i].ID <= got[i-1].ID {
			t.Errorf("dead letter ids not increasing: %d then %d", got[i-1].ID, got[i].ID)
		}
		// Each has its own random UUID (version 4, lower case), the id
		// Tally's clients read.
		if u, err := uuid.Parse(got[i].UUID); err != nil || u.Version() != 4 || u.String() != got[i].UUID || uuids[got[i].UUID] {
			t.Errorf("dead letter %d: uuid %q (%v): want a distinct lower-case version 4 UUID", i, got[i].UUID, err)
		}
		uuids[got[i].UUID] = true
		got[i].ID, got[i].UUID = 0, ""
	}
	opts := cmp.Comparer(func(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) })
	if diff := cmp.Diff(want, got, opts); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	wantIDs := []string{"nul", "nul2", "utf8", "", "", "", "big", "", "nulname", "longname"}
	for i, id := range wantIDs {
		if res.Rejected[i].EventID != id {
			t.Errorf("item %d: event_id %q, want %q", i, res.Rejected[i].EventID, id)
		}
	}
	// A reason can name a member of the item: it is kept storable as text
	// (no NUL, valid UTF-8) and bounded.
	for i, r := range res.Rejected {
		if strings.IndexByte(r.Reason, 0) >= 0 || !utf8.ValidString(r.Reason) || len(r.Reason) > ingest.MaxReasonBytes {
			t.Errorf("item %d: reason %q is not storable text within %d bytes", i, r.Reason[:min(len(r.Reason), 80)], ingest.MaxReasonBytes)
		}
	}
}

// "An item outside the credential's scope is the exception. It leaves an
// audit row of action events.scope_violation and no dead-letter row, so it
// is found in the audit log rather than in that view."
func testScope(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	otherCloud := volumeCreate("a", t0).set("cloud", "c2")
	otherPlatform := volumeCreate("b", t0).set("platform", "vmware")
	inScope := volumeCreate("c", t0)
	res := e.ingest(collector, otherCloud.bytes(), otherPlatform.bytes(), inScope.bytes())
	// docs/decisions.md, Refusal reasons: "A scope refusal names the member and
	// the credential's scope."
	want := ingest.Result{Accepted: 1, Rejected: []ingest.Rejection{
		{Index: 0, EventID: "a", Reason: `scope: /cloud: scope: cloud "c2" is outside this credential's openstack/c1`},
		{Index: 1, EventID: "b", Reason: `scope: /platform: scope: platform "vmware" is outside this credential's openstack/c1`},
	}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if dls := allDeadLetters(t, e.st); len(dls) != 0 {
		t.Errorf("dead letters %+v, want none", dls)
	}
	got := allAudit(t, e.st)
	for i := range got {
		got[i].ID = 0
	}
	wantAudit := []ingest.AuditEntry{
		{At: t0, Action: ingest.ActionScopeViolation, Credential: "collector-c1", EventID: "a", Platform: "openstack", Cloud: "c2"},
		{At: t0, Action: ingest.ActionScopeViolation, Credential: "collector-c1", EventID: "b", Platform: "vmware", Cloud: "c1"},
	}
	if diff := cmp.Diff(wantAudit, got); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
	// A caller with no scope checks none.
	if res := e.ingest(syncRun, volumeCreate("d", t0).set("cloud", "c2").bytes()); res.Accepted != 1 {
		t.Errorf("unscoped caller: %+v", res)
	}
	// The schema is checked before the scope: a virtual platform out of
	// scope is a schema refusal (docs/decisions.md).
	virt := volumeCreate("v", t0).set("platform", "meta")
	if res := e.ingest(collector, virt.bytes()); len(res.Rejected) != 1 || !strings.HasPrefix(res.Rejected[0].Reason, "schema: ") {
		t.Errorf("virtual platform: %+v, want a schema refusal", res)
	}
	if _, err := e.svc.Ingest(context.Background(), ingest.Caller{Platform: "openstack"}, nil); !errors.Is(err, ingest.ErrInvalidCaller) {
		t.Errorf("half a scope: %v, want ErrInvalidCaller", err)
	}
	// X1: an audit row names the credential and its scope, which
	// PostgreSQL cannot store with NUL or invalid UTF-8: pgstore failed the
	// whole batch (SQLSTATE 22021) where memstore stored it. Both refuse
	// such a caller alike, before any item, nothing written.
	for _, c := range []struct {
		name   string
		caller ingest.Caller
	}{
		{"NUL in credential", ingest.Caller{Credential: "c\x00", Platform: "openstack", Cloud: "c1"}},
		{"invalid UTF-8 in credential", ingest.Caller{Credential: "c\xff", Platform: "openstack", Cloud: "c1"}},
		{"NUL in cloud", ingest.Caller{Credential: "c", Platform: "openstack", Cloud: "c\x00"}},
		{"invalid UTF-8 in platform", ingest.Caller{Credential: "c", Platform: "open\xffstack", Cloud: "c1"}},
	} {
		if _, err := e.svc.Ingest(context.Background(), c.caller, items(volumeCreate("nul-"+c.name, t0).set("cloud", "c2"))); !errors.Is(err, ingest.ErrInvalidCaller) {
			t.Errorf("%s: %v, want ErrInvalidCaller", c.name, err)
		}
	}
	if got := allAudit(t, e.st); len(got) != 2 {
		t.Errorf("audit rows %+v, want only the two scope violations above", got)
	}
}

// "Any store failure rolls back everything and returns an error; nothing is
// half-written" (the lifecycle ingestion rules): a context cancelled while Commit runs leaves no
// event, dead letter or audit row of the batch, and a retry succeeds.
func testFaultCancelledCommit(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	batch := items(volumeCreate("a", t0), volumeCreate("b", t0), volumeCreate("c", t0).set("cloud", "c2"))
	batch = append(batch, []byte(`{"event_id":"bad"}`))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc := e.service(&cancellingStore{ingestStore: e.st, cancel: cancel}, ingest.Options{})
	if _, err := svc.Ingest(ctx, collector, batch); err == nil {
		t.Fatal("Ingest with its context cancelled during Commit succeeded")
	}
	if n := len(storedEvents(t, e.st)) + len(allDeadLetters(t, e.st)) + len(allAudit(t, e.st)); n != 0 {
		t.Fatalf("%d rows of the failed batch stored, want none", n)
	}
	res := e.ingest(collector, batch...)
	if res.Accepted != 2 || len(res.Rejected) != 2 {
		t.Errorf("retry: %+v", res)
	}
	if len(storedEvents(t, e.st)) != 2 || len(allDeadLetters(t, e.st)) != 1 || len(allAudit(t, e.st)) != 1 {
		t.Errorf("retry stored %d events, %d dead letters, %d audit rows; want 2, 1, 1",
			len(storedEvents(t, e.st)), len(allDeadLetters(t, e.st)), len(allAudit(t, e.st)))
	}
}

// "What was kept is read back through GET /api/v1/rejected-events": a time
// window on when refused, limit 1..1000, an opaque cursor, oldest first.
func testDeadLetterPaging(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	ctx := context.Background()
	// 3 batches an hour apart, 3 refusals each.
	for b := range 3 {
		e.ingest(collector, []byte(fmt.Sprintf(`{"event_id":"b%d-0"}`, b)), []byte(fmt.Sprintf(`{"event_id":"b%d-1"}`, b)), []byte(fmt.Sprintf(`{"event_id":"b%d-2"}`, b)))
		e.clock.Advance(time.Hour)
	}
	var got []string
	page := ingest.Page{Limit: 2}
	for range 10 {
		p, err := e.svc.DeadLetters(ctx, page)
		if err != nil {
			t.Fatal(err)
		}
		for _, dl := range p.Items {
			got = append(got, dl.EventID)
		}
		if p.NextCursor == nil {
			break
		}
		page.Cursor = *p.NextCursor
	}
	want := []string{"b0-0", "b0-1", "b0-2", "b1-0", "b1-1", "b1-2", "b2-0", "b2-1", "b2-2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("all pages (-want +got):\n%s", diff)
	}
	// The window [From, To) selects the middle batch.
	p, err := e.svc.DeadLetters(ctx, ingest.Page{From: t0.Add(time.Hour), To: t0.Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, dl := range p.Items {
		got = append(got, dl.EventID)
	}
	if diff := cmp.Diff([]string{"b1-0", "b1-1", "b1-2"}, got); diff != "" || p.NextCursor != nil {
		t.Errorf("window (-want +got):\n%s next %v", diff, p.NextCursor)
	}
	// An exact last page has no next cursor.
	p, err = e.svc.DeadLetters(ctx, ingest.Page{Limit: 9})
	if err != nil || len(p.Items) != 9 || p.NextCursor != nil {
		t.Errorf("exact page: %v, %d items, next %v", err, len(p.Items), p.NextCursor)
	}
	empty, err := e.svc.DeadLetters(ctx, ingest.Page{From: t0.Add(10 * time.Hour)})
	if err != nil || empty.Items == nil || len(empty.Items) != 0 {
		t.Errorf("empty window: %v %#v", err, empty.Items)
	}
	for _, bad := range []ingest.Page{{Cursor: "nonsense"}, {Cursor: "djIuMS4y"}, {Cursor: "djEuMS4"}, {Cursor: "!!"}} {
		if _, err := e.svc.DeadLetters(ctx, bad); !errors.Is(err, event.ErrInvalid) {
			t.Errorf("cursor %q: %v, want a /cursor problem (event.ErrInvalid)", bad.Cursor, err)
		}
	}
	for _, l := range []int{-1, 1001} {
		if _, err := e.svc.DeadLetters(ctx, ingest.Page{Limit: l}); !errors.Is(err, event.ErrInvalid) {
			t.Errorf("limit %d: %v, want a /limit problem (event.ErrInvalid)", l, err)
		}
	}
}

// Audit rows are listed by action with the same paging.
func testAuditPaging(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	ctx := context.Background()
	for i := range 5 {
		e.ingest(collector, volumeCreate(fmt.Sprintf("a%d", i), t0).set("cloud", "c2").bytes())
		e.clock.Advance(time.Minute)
	}
	var got []string
	page := ingest.Page{Limit: 2}
	for range 10 {
		p, err := e.svc.Audit(ctx, ingest.ActionScopeViolation, page)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range p.Items {
			got = append(got, a.EventID)
		}
		if p.NextCursor == nil {
			break
		}
		page.Cursor = *p.NextCursor
	}
	if diff := cmp.Diff([]string{"a0", "a1", "a2", "a3", "a4"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	other, err := e.svc.Audit(ctx, "credentials.created", ingest.Page{})
	if err != nil || len(other.Items) != 0 || other.Items == nil {
		t.Errorf("another action: %v %#v", err, other.Items)
	}
	all, err := e.svc.Audit(ctx, "", ingest.Page{From: t0.Add(time.Minute), To: t0.Add(3 * time.Minute)})
	if err != nil || len(all.Items) != 2 {
		t.Errorf("every action in a window: %v, %d items, want 2", err, len(all.Items))
	}
	if _, err := e.svc.Audit(ctx, "", ingest.Page{Cursor: "x"}); !errors.Is(err, event.ErrInvalid) {
		t.Errorf("bad cursor: %v", err)
	}
}

// The observer counts what a committed batch did.
func testObserver(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	e.ingest(collector, volumeCreate("a", t0).bytes())
	e.ingest(collector,
		volumeCreate("a", t0).bytes(), volumeCreate("b", t0).bytes(), volumeCreate("b", t0).bytes(),
		[]byte(`{}`), volumeCreate("c", t0).set("cloud", "c2").bytes(),
		instanceCreate("d", t0).set("payload.size.vcpus", 0).bytes())
	e.obs.mu.Lock()
	defer e.obs.mu.Unlock()
	if e.obs.ingested != 2 || e.obs.duplicates != 2 {
		t.Errorf("ingested %d duplicates %d, want 2 and 2", e.obs.ingested, e.obs.duplicates)
	}
	if diff := cmp.Diff(map[ingest.Kind]int{ingest.KindSchema: 1, ingest.KindScope: 1, ingest.KindSizeSchema: 1}, e.obs.rejected); diff != "" {
		t.Errorf("rejected (-want +got):\n%s", diff)
	}
	e.obs.mu.Unlock()
	// The existing-clients rules, /metrics: the counters are labelled by cloud. Accepted
	// events count under their cloud (the caller's scope) and pipeline;
	// refusals under the caller's scope, whatever cloud the item named, so
	// the label stays bounded by the credentials' scopes ("" without one).
	e.ingest(syncRun, volumeCreate("e", t0).set("cloud", "c3").bytes(), []byte(`{}`))
	e.obs.mu.Lock()
	if diff := cmp.Diff(map[string]int{"c1/collector": 2, "c3/reconciliation": 1}, e.obs.ingestedBy); diff != "" {
		t.Errorf("ingested by cloud/source (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"c1/schema": 1, "c1/scope": 1, "c1/size_schema": 1, "/schema": 1}, e.obs.rejectedBy); diff != "" {
		t.Errorf("rejected by cloud/kind (-want +got):\n%s", diff)
	}
}

// "Ingestion is idempotent": 8 goroutines ingesting overlapping batches of
// the same events at once store every event once, the accepted counts add up
// to the distinct events, and no call fails.
func testConcurrent(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	const n, workers, batchSize = 200, 8, 50
	all := GenerateBatch(0, n)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		accepted int
		errs     []error
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each worker walks all events from its own offset, in
			// overlapping batches.
			for start := 0; start < n; start += batchSize {
				var batch [][]byte
				for k := range batchSize {
					batch = append(batch, all[(w*25+start+k)%n])
				}
				res, err := e.svc.Ingest(context.Background(), syncRun, batch)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				accepted += res.Accepted
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d calls failed, first: %v", len(errs), errs[0])
	}
	if accepted != n {
		t.Errorf("accepted %d across all calls, want %d", accepted, n)
	}
	if got := len(storedEvents(t, e.st)); got != n {
		t.Errorf("%d events stored, want %d", got, n)
	}
}

// "event_id is the provider's own event or action id where one exists ...
// Where none exists it is the deterministic hash": the pipeline stores the
// id the item carries and computes none.
func testEventIDKept(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	det := event.DeterministicID("openstack", "c1", "vol-x", "volume.create.end", t0)
	own := volumeCreate("req-5f1c0a2e-oslo-message-id", t0)
	hashed := volumeCreate(det, t0).set("resource_id", "vol-x")
	if res := e.ingest(collector, own.bytes(), hashed.bytes()); res.Accepted != 2 {
		t.Fatalf("%+v", res)
	}
	want := []eventForm{expected(t, hashed.bytes(), event.SourceCollector), expected(t, own.bytes(), event.SourceCollector)}
	if want[0].EventID > want[1].EventID {
		want[0], want[1] = want[1], want[0]
	}
	if diff := cmp.Diff(want, storedEvents(t, e.st)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// "project_id is the project owning the resource at or after the event. On
// an ownership transfer the event names the new owner, and the previous one
// stays implicit in the earlier history."
func testProjectTransfer(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	create := volumeCreate("a", t0)
	transfer := volumeCreate("b", t0.Add(time.Hour)).set("event_type", "volume.transfer.accept.end").set("project_id", "p2").set("payload.size", nil)
	transfer["resource_id"] = create["resource_id"]
	e.ingest(collector, transfer.bytes(), create.bytes())
	d, err := projService(t, e.st, e.svc).Get(context.Background(), projection.Key{Cloud: "c1", ResourceType: "volume", ResourceID: "vol-a"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range d.Events {
		got = append(got, ev.EventID+":"+ev.ProjectID)
	}
	if diff := cmp.Diff([]string{"a:p1", "b:p2"}, got); diff != "" {
		t.Errorf("history ordered by timestamp (-want +got):\n%s", diff)
	}
}
