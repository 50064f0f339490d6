package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
)

func testConfig() genConfig {
	return genConfig{Seed: 7, Prefix: "t", Clouds: 3, Events: 4000, BatchSize: 500,
		LateShare: 0.01, DupShare: 0.05, InvalidShare: 0.03}
}

// The generator's items are what the issue asks for: every valid item is a
// canonical event (event.DecodeValidate) whose size the seeded schema
// accepts, every invalid item is refused with the kind it was made for,
// every duplicate repeats an item sent before in its cloud, batches hold
// one cloud each, the shares are near the configured ones, and 1 % of the
// events arrive after a newer event of their resource.
func TestGeneratorValidity(t *testing.T) {
	cfg := testConfig()
	w := generate(cfg)
	if w.Valid != cfg.Events || len(w.Events) != cfg.Events {
		t.Fatalf("valid items %d, events %d; want %d", w.Valid, len(w.Events), cfg.Events)
	}
	items := w.Valid + w.Dups + w.Invalid
	near := func(name string, got int, share float64) {
		t.Helper()
		want := share * float64(items)
		if float64(got) < 0.6*want || float64(got) > 1.4*want {
			t.Errorf("%s: %d of %d items, want about %.0f", name, got, items, want)
		}
	}
	near("duplicates", w.Dups, cfg.DupShare)
	near("invalid", w.Invalid, cfg.InvalidShare)
	if want := cfg.LateShare * float64(cfg.Events); float64(w.Late) < 0.6*want || float64(w.Late) > 1.4*want {
		t.Errorf("late events %d, want about %.0f", w.Late, want)
	}

	svc, err := ingest.New(newMemory(), ingest.Options{RequireSizeSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	types := map[string]bool{}
	sent := map[string]bool{}
	newest := map[resKey]time.Time{}
	late := 0
	for bi, b := range w.Batches {
		r := renderBatches([]batch{b})[0]
		if len(b.Items) > cfg.BatchSize {
			t.Fatalf("batch %d holds %d items", bi, len(b.Items))
		}
		for i, it := range b.Items {
			if it.Ev.Cloud != b.Cloud {
				t.Fatalf("batch %d of %s holds an item of %s", bi, b.Cloud, it.Ev.Cloud)
			}
			raw := r.Items[i]
			_, err := event.DecodeValidate(raw)
			switch it.Kind {
			case itemValid, itemDup, itemInvalidSize:
				if err != nil {
					t.Errorf("batch %d item %d (kind %d) is not a canonical event: %v\n%s", bi, i, it.Kind, err, raw)
				}
			case itemInvalidSchema:
				if err == nil {
					t.Errorf("batch %d item %d should break the canonical schema:\n%s", bi, i, raw)
				}
			}
			id := it.Ev.EventID + it.Ev.Timestamp.String()
			switch it.Kind {
			case itemDup:
				if !sent[id] {
					t.Errorf("batch %d item %d repeats an item not sent before", bi, i)
				}
			case itemValid:
				if sent[id] {
					t.Errorf("batch %d item %d: valid item sent twice", bi, i)
				}
				sent[id] = true
				types[it.Ev.ResourceType] = true
				k := resKey{it.Ev.Cloud, it.Ev.ResourceType, it.Ev.ResourceID}
				if it.Ev.Timestamp.Before(newest[k]) {
					late++
				} else {
					newest[k] = it.Ev.Timestamp
				}
			}
		}
		res, err := svc.Ingest(ctx, ingest.Caller{Credential: "c", Platform: "openstack", Cloud: b.Cloud}, r.Items)
		if err != nil {
			t.Fatal(err)
		}
		var rejected []int
		for _, x := range res.Rejected {
			rejected = append(rejected, x.Index)
			want := ingest.KindSchema
			if b.Items[x.Index].Kind == itemInvalidSize {
				want = ingest.KindSizeSchema
			}
			if got := ingest.Kind(x.Reason[:len(want)]); got != want {
				t.Errorf("batch %d item %d refused as %q, want kind %s", bi, x.Index, x.Reason, want)
			}
		}
		if _, _, pr := checkAnswer(b, res.Accepted, res.Duplicates, rejected); pr != "" {
			t.Errorf("batch %d: %s", bi, pr)
		}
	}
	if len(types) != 5 {
		t.Errorf("resource types %v, want five", types)
	}
	if late != w.Late {
		t.Errorf("%d events arrive after a newer event of their resource; the generator says %d", late, w.Late)
	}
}

func TestGeneratorIsDeterministic(t *testing.T) {
	join := func(rs []rendered) []byte {
		var out []byte
		for _, r := range rs {
			out = append(out, r.Cloud...)
			for _, it := range r.Items {
				out = append(append(out, '\n'), it...)
			}
		}
		return out
	}
	a, b := join(renderBatches(generate(testConfig()).Batches)), join(renderBatches(generate(testConfig()).Batches))
	if !bytes.Equal(a, b) {
		t.Errorf("two workloads of one seed differ")
	}
	other := testConfig()
	other.Seed++
	if bytes.Equal(a, join(renderBatches(generate(other).Batches))) {
		t.Errorf("two seeds give one workload")
	}
}

func ts(s int) time.Time { return time.Date(2026, 1, 1, 0, 0, s, 0, time.UTC) }

func tp(s int) *time.Time { t := ts(s); return &t }

// The bench's fold follows the projection rules, including the two wrong
// shortcuts the projection rules rule out: an absent size keeps the old one, an update
// after a delete changes nothing, created_at comes from the last create.
func TestFoldModel(t *testing.T) {
	mk := func(id string, sec int, c category, typ, state, size string) *genEvent {
		e := &genEvent{EventID: id, Timestamp: ts(sec), Category: c, EventType: typ, Cloud: "c", ResourceType: "volume", ResourceID: "v", ProjectID: "p-" + id, State: state}
		if size != "" {
			e.SizeWant = []byte(size)
		}
		return e
	}
	k := resKey{"c", "volume", "v"}
	for _, tc := range []struct {
		name string
		evs  []*genEvent
		want row
	}{
		{"absent size keeps the old one", []*genEvent{
			mk("a", 1, catCreate, "volume.create.end", "available", `{"size_gb":1}`),
			mk("b", 2, catUpdate, "volume.attach.end", "in-use", ""),
		}, row{Platform: "openstack", ProjectID: "p-b", State: "in-use", Size: []byte(`{"size_gb":1}`), CreatedAt: tp(1),
			FirstEventAt: ts(1), LastEventAt: ts(2), LastEventType: "volume.attach.end", LastEventID: "b"}},
		{"an update after a delete changes nothing but the last event", []*genEvent{
			mk("c", 3, catUpdate, "volume.resize.end", "available", `{"size_gb":9}`),
			mk("b", 2, catDelete, "volume.delete.end", "", ""),
			mk("a", 1, catCreate, "volume.create.end", "available", `{"size_gb":1}`),
		}, row{Platform: "openstack", ProjectID: "p-c", State: "deleted", Size: []byte(`{"size_gb":1}`), CreatedAt: tp(1), DeletedAt: tp(2),
			FirstEventAt: ts(1), LastEventAt: ts(3), LastEventType: "volume.resize.end", LastEventID: "c"}},
		{"created_at from the last create, which revives", []*genEvent{
			mk("a", 1, catCreate, "volume.create.end", "available", `{"size_gb":1}`),
			mk("b", 2, catDelete, "volume.delete.end", "", ""),
			mk("c", 3, catCreate, "volume.create.end", "creating", `{"size_gb":2}`),
		}, row{Platform: "openstack", ProjectID: "p-c", State: "creating", Size: []byte(`{"size_gb":2}`), CreatedAt: tp(3),
			FirstEventAt: ts(1), LastEventAt: ts(3), LastEventType: "volume.create.end", LastEventID: "c"}},
		{"equal timestamps: create < update < delete, then event_id", []*genEvent{
			mk("z", 1, catDelete, "volume.delete.end", "", ""),
			mk("y", 1, catUpdate, "volume.attach.end", "in-use", ""),
			mk("x", 1, catCreate, "volume.create.end", "available", `{"size_gb":1}`),
		}, row{Platform: "openstack", ProjectID: "p-z", State: "deleted", Size: []byte(`{"size_gb":1}`), CreatedAt: tp(1), DeletedAt: tp(1),
			FirstEventAt: ts(1), LastEventAt: ts(1), LastEventType: "volume.delete.end", LastEventID: "z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := foldModel(tc.evs)[k]
			if d := diffRow(tc.want, got); len(d) > 0 {
				t.Errorf("fold differs (want → got): %v", d)
			}
		})
	}
}

// The bench's fold and the product's projection.Fold, written independently,
// agree on every resource of a generated workload.
func TestFoldModelAgreesWithIngestFold(t *testing.T) {
	w := generate(testConfig())
	want := foldModel(w.Events)
	by := map[resKey][]event.Event{}
	for _, e := range w.Events {
		raw := render(nil, item{Kind: itemValid, Ev: e})
		ev, err := event.DecodeValidate(raw)
		if err != nil {
			t.Fatal(err)
		}
		if e.SizeWant != nil {
			ev.Payload.Size = e.SizeWant
		}
		k := resKey{e.Cloud, e.ResourceType, e.ResourceID}
		by[k] = append(by[k], ev)
	}
	got := map[resKey]row{}
	for k, h := range by {
		r := projection.Fold(h)
		got[k] = row{Platform: r.Platform, ProjectID: r.ProjectID, State: r.State, Size: r.Size, CreatedAt: r.CreatedAt, DeletedAt: r.DeletedAt,
			FirstEventAt: r.FirstEventAt, LastEventAt: r.LastEventAt, LastEventType: r.LastEventType, LastEventID: r.LastEventID}
	}
	if pr := compareProjection(want, got, 5); len(pr) > 0 {
		t.Errorf("the folds disagree:\n%v", pr)
	}
}

// compareProjection reports a missing row, an extra row, and each member
// that differs; sizes compare as JSON values.
func TestCompareProjection(t *testing.T) {
	a, b, c := resKey{"c", "volume", "a"}, resKey{"c", "volume", "b"}, resKey{"c", "volume", "c"}
	base := row{Platform: "openstack", ProjectID: "p", State: "available", Size: []byte(`{"size_gb":1,"type":"ssd"}`), FirstEventAt: ts(1), LastEventAt: ts(1)}
	respaced := base
	respaced.Size = []byte(`{ "type": "ssd", "size_gb": 1 }`)
	other := base
	other.State, other.DeletedAt = "deleted", tp(2)
	got := compareProjection(map[resKey]row{a: base, b: base}, map[resKey]row{a: respaced, c: other}, 10)
	want := []string{
		"projection: c/volume/b missing",
		"projection: c/volume/c is not in the fold",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	got = compareProjection(map[resKey]row{a: base}, map[resKey]row{a: other}, 10)
	want = []string{`projection: c/volume/a differs from the fold: [state: want available, got deleted deleted_at: want null, got 2026-01-01T00:00:02Z]`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// checkCorrelation holds the store to the answers: a lost occurrence, a
// second open event, an event no create answered for, and a retry that did
// not replay are each reported.
func TestCheckCorrelation(t *testing.T) {
	cc := corrConfig{Org: "o", Prefix: "p", Keys: 2, Users: 1}
	occ := corrOp{User: 0, Key: 0}
	res := corrOp{User: 0, Key: 0, Resolve: true}
	keyed := corrOp{User: 0, Key: 1, IdemKey: "k1"}
	answers := []corrAnswer{
		{Op: occ, Disposition: "created", ID: "e1"},
		{Op: occ, Disposition: "incremented", ID: "e1"},
		{Op: res, Disposition: "resolved", ID: "e1"},
		{Op: occ, Disposition: "created", ID: "e2"},
		{Op: keyed, Disposition: "created", ID: "e3"},
		{Op: keyed, Retry: true, Disposition: "replayed", ID: "e3"},
	}
	p0, p1 := corrPair{"user-1", "p/connection-000"}, corrPair{"user-1", "p/connection-001"}
	good := map[corrPair]corrAgg{p0: {Events: 2, Open: 1, Resolved: 1, SumCount: 3}, p1: {Events: 1, Open: 1, SumCount: 1}}
	if pr := checkCorrelation(cc, answers, good); len(pr) > 0 {
		t.Fatalf("a consistent store is reported: %v", pr)
	}
	for _, tc := range []struct {
		name    string
		got     map[corrPair]corrAgg
		answers []corrAnswer
		want    []string
	}{
		{"lost occurrence", map[corrPair]corrAgg{p0: {Events: 2, Open: 1, Resolved: 1, SumCount: 2}, p1: good[p1]}, answers,
			[]string{"correlation: {user-1 p/connection-000} counts 2 occurrences, 3 were sent (3 occurrences, 0 resolutions recorded new)"}},
		{"two open events", map[corrPair]corrAgg{p0: good[p0], p1: {Events: 2, Open: 2, SumCount: 2}}, answers,
			[]string{
				"correlation: {user-1 p/connection-001} has 2 open events (at most one)",
				"correlation: {user-1 p/connection-001} counts 2 occurrences, 1 were sent (1 occurrences, 0 resolutions recorded new)",
				"correlation: {user-1 p/connection-001} holds 2 events, 1 creates answered created",
			}},
		{"retry not replayed", good, append(slices.Clone(answers[:5]), corrAnswer{Op: keyed, Retry: true, Disposition: "created", ID: "e4"}),
			[]string{"correlation: the retry of k1 answered created e4, want replayed e3"}},
		{"unexpected disposition", good, append(slices.Clone(answers), corrAnswer{Op: res, Disposition: "incremented", ID: "e1"}),
			[]string{`correlation: a create (resolution true) of {user-1 p/connection-000} answered "incremented"`}},
		{"an event no create answered for", map[corrPair]corrAgg{p0: good[p0], p1: good[p1], {"user-1", "p/connection-002"}: {Events: 1, Open: 1, SumCount: 1}}, answers,
			[]string{
				"correlation: {user-1 p/connection-002} counts 1 occurrences, 0 were sent (0 occurrences, 0 resolutions recorded new)",
				"correlation: {user-1 p/connection-002} holds 1 events, 0 creates answered created",
			}},
		{"a resolution lost", map[corrPair]corrAgg{p0: {Events: 2, Open: 1, SumCount: 3}, p1: good[p1]}, answers,
			[]string{"correlation: {user-1 p/connection-000} holds 0 resolved events, want 1"}},
		{"a resolution recorded new", map[corrPair]corrAgg{p0: {Events: 1, Resolved: 1, SumCount: 1}},
			[]corrAnswer{{Op: res, Disposition: "created", ID: "e9"}}, nil},
		{"at most ten problems, then their count", good, append(slices.Clone(answers), tooManyRetries(keyed, 12)...), tooManyRetriesWant(12)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, checkCorrelation(cc, tc.answers, tc.got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// tooManyRetries returns n retries of op that did not replay.
func tooManyRetries(op corrOp, n int) []corrAnswer {
	var out []corrAnswer
	for i := range n {
		out = append(out, corrAnswer{Op: op, Retry: true, Disposition: "created", ID: fmt.Sprintf("x%d", i)})
	}
	return out
}

// tooManyRetriesWant is what checkCorrelation reports of tooManyRetries(n).
func tooManyRetriesWant(n int) []string {
	var out []string
	for i := range 10 {
		out = append(out, fmt.Sprintf("correlation: the retry of k1 answered created x%d, want replayed e3", i))
	}
	return append(out, fmt.Sprintf("correlation: %d more problems", n-10))
}

// corrOps spreads the creates over producers with the configured shares,
// and the payloads are valid createEvent bodies.
func TestCorrOps(t *testing.T) {
	cc := corrConfig{Seed: 3, Org: "o", Prefix: "p", Creates: 10000, Keys: 200, Users: 4, Producers: 64, Resolve: 0.12, Retry: 0.10}
	ops := corrOps(cc)
	if len(ops) != 64 {
		t.Fatalf("%d producers", len(ops))
	}
	n, res, retry := 0, 0, 0
	for _, m := range ops {
		for _, op := range m {
			n++
			if op.Resolve {
				res++
			}
			if op.IdemKey != "" {
				retry++
			}
		}
	}
	if n != 10000 || res < 1000 || res > 1400 || retry < 800 || retry > 1200 {
		t.Errorf("creates %d, resolutions %d, retried %d", n, res, retry)
	}
	for _, op := range []corrOp{ops[0][0], {Resolve: true, IdemKey: "x"}} {
		b := cc.body(op, ts(0))
		p, err := correlate.DecodePayload(b)
		if err == nil {
			err = p.Validate()
		}
		if err != nil {
			t.Errorf("%s: %v", b, err)
		}
	}
}

func TestThousands(t *testing.T) {
	if got := fmt.Sprint(thousands(1234567.8), " ", thousands(12)); got != "1,234,568 12" {
		t.Errorf("got %q", got)
	}
}

// TestLayoutOrder: the partitioned-ingest phase alternates the layouts in
// pairs whose order turns, each layout run as often as asked.
func TestLayoutOrder(t *testing.T) {
	for _, tc := range []struct {
		runs int
		want []int
	}{
		{0, []int{}},
		{1, []int{0, 1}},
		{3, []int{0, 1, 1, 0, 0, 1}},
	} {
		if diff := cmp.Diff(tc.want, layoutOrder(tc.runs)); diff != "" {
			t.Errorf("layoutOrder(%d) (-want +got):\n%s", tc.runs, diff)
		}
	}
}
