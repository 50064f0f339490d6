package ingest_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/internal/seed"
	"github.com/tallyhq/tally/store"
	"github.com/tallyhq/tally/store/memstore"
)

func TestNewValidatesOptions(t *testing.T) {
	_, err := ingest.New(nil, ingest.Options{MaxDeadLetterBytes: -1})
	if err == nil || !strings.Contains(err.Error(), "store is required") || !strings.Contains(err.Error(), "MaxDeadLetterBytes") {
		t.Errorf("New: %v, want both problems", err)
	}
	if _, err := ingest.New(memIngest(t), ingest.Options{}); err != nil {
		t.Errorf("zero Options: %v", err)
	}
}

// The seeded documents are the files under internal/seed/schemas, which the
// PostgreSQL migration must insert byte for byte, and each compiles.
func TestSeedResourceTypesAreTheFiles(t *testing.T) {
	seeds := seed.ResourceTypes()
	var names []string
	for _, rt := range seeds {
		names = append(names, rt.ResourceType)
		b, err := os.ReadFile(filepath.Join("..", "internal", "seed", "schemas", rt.ResourceType+".json"))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(rt.SizeSchema), strings.TrimSpace(string(b)); got != want {
			t.Errorf("%s: SizeSchema differs from its file", rt.ResourceType)
		}
		if rt.Platform != "openstack" || rt.Version != 1 {
			t.Errorf("%s: %+v", rt.ResourceType, rt)
		}
		if _, err := ingest.CompileSizeSchema(rt.SizeSchema); err != nil {
			t.Errorf("%s does not compile: %v", rt.ResourceType, err)
		}
	}
	if diff := cmp.Diff([]string{"floating_ip", "image", "instance", "loadbalancer", "volume"}, names); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	files, _ := filepath.Glob("../internal/seed/schemas/*.json")
	if len(files) != len(seeds) {
		t.Errorf("%d schema files, %d seeds", len(files), len(seeds))
	}
}

func TestCompileSizeSchemaFormatAsserted(t *testing.T) {
	sch, err := ingest.CompileSizeSchema(jsontext.Value(`{"properties":{"at":{"type":"string","format":"date-time"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(map[string]any{"at": "yesterday"}); err == nil {
		t.Error("format date-time not asserted")
	}
	if err := sch.Validate(map[string]any{"at": "2026-03-01T12:00:00Z"}); err != nil {
		t.Errorf("valid date-time refused: %v", err)
	}
}

func TestBestEffortEventID(t *testing.T) {
	tests := []struct{ raw, want string }{
		{`{"event_id":"a"}`, "a"},
		{`{"x":{"event_id":"nested"},"event_id":"top"}`, "top"},
		{`{"event_id":"first","event_id":"second"}`, "first"},
		{`{"event_id":"broken", "timestamp":`, "broken"},
		{`{"timestamp":"x", "event_id"`, ""},
		{`{"event_id":7}`, ""},
		{`{"event_id":"a\u0000b"}`, ""},
		{"{\"event_id\":\"a\xffb\"}", ""},
		{"{\"event_id\":\"ok\",\"x\":\"\xff\"}", "ok"},
		{`[{"event_id":"a"}]`, ""},
		{``, ""},
		{`not json`, ""},
		// docs/decisions.md, Echoed event_id in rejected: "The id as sent, or
		// absent when the item has none; never truncated."
		{`{"event_id":"` + strings.Repeat("x", 20000) + `"}`, strings.Repeat("x", 20000)},
		{`{"event_id":"` + strings.Repeat("x", 255) + `€€"}`, strings.Repeat("x", 255) + "€€"},
		{`{"event_id":"\u0041\/"}`, "A/"},
	}
	for _, tt := range tests {
		if got := ingest.BestEffortEventID([]byte(tt.raw)); got != tt.want {
			t.Errorf("BestEffortEventID(%q) = %q, want %q", tt.raw, got, tt.want)
		}
	}
}

func TestCursorRoundTrip(t *testing.T) {
	p := ingest.Position{At: time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC), ID: 42}
	got, err := ingest.DecodeCursor(ingest.EncodeCursor(p))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, c := range []string{"", "x", "djEuMS4y=", "djEuYS4y", "djEuMS4tMQ"} {
		if _, err := ingest.DecodeCursor(c); !errors.Is(err, event.ErrInvalid) {
			t.Errorf("DecodeCursor(%q) = %v, want event.ErrInvalid", c, err)
		}
	}
}

func FuzzDecodeCursor(f *testing.F) {
	f.Add(ingest.EncodeCursor(ingest.Position{At: time.Unix(1, 0), ID: 3}))
	f.Add("djEuMS4y")
	f.Fuzz(func(t *testing.T, c string) {
		p, err := ingest.DecodeCursor(c)
		if err != nil {
			if !errors.Is(err, event.ErrInvalid) {
				t.Fatalf("error %v does not match event.ErrInvalid", err)
			}
			return
		}
		again, err := ingest.DecodeCursor(ingest.EncodeCursor(p))
		if err != nil || !again.At.Equal(p.At) || again.ID != p.ID {
			t.Fatalf("round trip of %+v: %+v, %v", p, again, err)
		}
	})
}

// A size_schema reason names each member and rule, one problem per leaf,
// in a stable order, and is bounded.
func TestSizeSchemaReason(t *testing.T) {
	st := memIngest(t)
	svc, err := ingest.New(st, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	item := `{"event_id":"e","timestamp":"2026-03-01T12:00:00Z","event_type":"compute.instance.create.end","platform":"openstack","cloud":"c","resource_type":"instance","resource_id":"r","project_id":"p","payload":{"state":"active","size":{"vcpus":0,"ram_gb":"4","disk_gb":-1}}}`
	res, err := svc.Ingest(ctx, ingest.Caller{}, [][]byte{[]byte(item)})
	if err != nil {
		t.Fatal(err)
	}
	want := "size_schema: /payload/size/disk_gb: minimum: must be at least 0, is -1; " +
		"/payload/size/flavor: required: is required; " +
		"/payload/size/ram_gb: type: must be number, is string; " +
		"/payload/size/vcpus: minimum: must be at least 1, is 0"
	if len(res.Rejected) != 1 {
		t.Fatalf("%+v", res)
	}
	if diff := cmp.Diff(want, res.Rejected[0].Reason); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	// Many problems are cut at ten.
	many := `{"type":"object","properties":{` + strings.Repeat(`"x":{"type":"string"},`, 0)
	for i := range 15 {
		if i > 0 {
			many += ","
		}
		many += `"m` + string(rune('a'+i)) + `":{"type":"string"}`
	}
	many += `}}`
	if _, err := svc.PutResourceType(ctx, "openstack", "many", jsontext.Value(many)); err != nil {
		t.Fatal(err)
	}
	size := "{"
	for i := range 15 {
		if i > 0 {
			size += ","
		}
		size += `"m` + string(rune('a'+i)) + `":1`
	}
	size += "}"
	item = strings.Replace(strings.Replace(item, `"resource_type":"instance"`, `"resource_type":"many"`, 1), `{"vcpus":0,"ram_gb":"4","disk_gb":-1}`, size, 1)
	res, err = svc.Ingest(ctx, ingest.Caller{}, [][]byte{[]byte(item)})
	if err != nil || len(res.Rejected) != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	if r := res.Rejected[0].Reason; strings.Count(r, "; ") != 10 || !strings.HasSuffix(r, "; and 5 more") {
		t.Errorf("reason %q, want ten problems and a count of the rest", r)
	}
}

type failCommit struct{ *memstore.Ingest }

func (failCommit) Commit(context.Context, ingest.Batch) (ingest.Committed, error) {
	return ingest.Committed{}, errors.New("commit failed")
}

type countAll struct{ calls int }

func (c *countAll) Ingested(string, event.Source, int)  { c.calls++ }
func (c *countAll) Duplicates(int)                      { c.calls++ }
func (c *countAll) Rejected(string, ingest.Kind, int)   { c.calls++ }
func (c *countAll) UnvalidatedSize(string, string, int) { c.calls++ }
func (c *countAll) ProjectionReplays(string, int)       { c.calls++ }

// The observer counts only what was committed.
func TestObserverNotCalledOnFailure(t *testing.T) {
	obs := &countAll{}
	svc, err := ingest.New(failCommit{memIngest(t)}, ingest.Options{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Ingest(context.Background(), ingest.Caller{}, [][]byte{[]byte(`{}`)}); err == nil {
		t.Fatal("Ingest succeeded over a failing commit")
	}
	if obs.calls != 0 {
		t.Errorf("observer called %d times, want 0", obs.calls)
	}
}

// The dead-letter cap keeps an item of exactly MaxDeadLetterBytes and
// drops the raw bytes of one byte more.
func TestDeadLetterCapBoundary(t *testing.T) {
	st := memIngest(t)
	svc, err := ingest.New(st, ingest.Options{MaxDeadLetterBytes: 16})
	if err != nil {
		t.Fatal(err)
	}
	at, over := []byte(`{"x":"12345678"}`), []byte(`{"x":"123456789"}`)
	if len(at) != 16 {
		t.Fatalf("test item is %d bytes", len(at))
	}
	if _, err := svc.Ingest(context.Background(), ingest.Caller{}, [][]byte{at, over}); err != nil {
		t.Fatal(err)
	}
	dls, err := st.DeadLetters(context.Background(), ingest.DeadLetterQuery{})
	if err != nil || len(dls) != 2 {
		t.Fatalf("%v %d", err, len(dls))
	}
	if string(dls[0].Raw) != string(at) || dls[1].Raw != nil || dls[1].RawSize != len(over) {
		t.Errorf("dead letters %+v", dls)
	}
}

// A schema with a member given twice is refused, naming it, and nothing is
// stored: the registry keeps no document it would read differently.
func TestPutResourceTypeRefusesDuplicateMembers(t *testing.T) {
	st := memIngest(t)
	svc, err := ingest.New(st, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{
		`{"type":"object","required":["a"],"type":"array"}`,
		`{"properties":{"a":{"minimum":1,"minimum":2}}}`,
		`{"type":"object"} {}`,
	} {
		_, err := svc.PutResourceType(context.Background(), "dup", "thing", jsontext.Value(doc))
		if !errors.Is(err, event.ErrInvalid) {
			t.Errorf("PutResourceType(%s): %v, want event.ErrInvalid", doc, err)
		}
	}
	if _, err := svc.ResourceType(context.Background(), "dup", "thing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused schema was stored: %v", err)
	}
}

// memIngest returns the ingestion store of a new in-memory database.
func memIngest(t testing.TB) *memstore.Ingest {
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return db.Ingest()
}

// recordCommits keeps every batch it committed and what Checked said of it, and
// rewrites the size of each event when rewrite is set (code between the
// pipeline and the store).
type recordCommits struct {
	*memstore.Ingest
	rewrite bool
	checked []bool
	batches []ingest.Batch
}

func (r *recordCommits) Commit(ctx context.Context, b ingest.Batch) (ingest.Committed, error) {
	if r.rewrite {
		for i := range b.Events {
			b.Events[i].Payload.Size = jsontext.Value(`{"vcpus":1,"vcpus":2}`)
		}
	}
	r.checked = append(r.checked, b.Checked())
	r.batches = append(r.batches, b)
	return r.Ingest.Commit(ctx, b)
}

// A batch the pipeline decoded and checked says so (a store may then write
// its payloads without checking them again); one built by other code
// cannot, nor one whose payloads code between the pipeline and the store
// replaced, so a store checks what it did not see decoded.
func TestBatchCheckedOnlyFromThePipeline(t *testing.T) {
	st := &recordCommits{Ingest: memIngest(t)}
	svc, err := ingest.New(st, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	item := `{"event_id":"e","timestamp":"2026-03-01T12:00:00Z","event_type":"compute.instance.create.end","platform":"openstack","cloud":"c","resource_type":"instance","resource_id":"r","project_id":"p","payload":{"state":"active","size":{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"},"x":[1]}}`
	if res, err := svc.Ingest(ctx, ingest.Caller{}, [][]byte{[]byte(item)}); err != nil || res.Accepted != 1 {
		t.Fatalf("%+v, %v; want the item accepted", res, err)
	}
	if _, _, err := svc.Sync(ctx, ingest.Caller{Platform: "openstack", Cloud: "c"}, [][]byte{[]byte(item)}, ingest.SyncWrite{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Commit(ctx, ingest.Batch{}); err != nil {
		t.Fatal(err)
	}
	st.rewrite = true
	if _, err := svc.Ingest(ctx, ingest.Caller{}, [][]byte{[]byte(strings.Replace(item, `"e"`, `"e2"`, 1))}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]bool{true, true, false, false}, st.checked); diff != "" {
		t.Errorf("Checked of the Ingest, the Sync, a batch built by hand and a rewritten one (-want +got):\n%s", diff)
	}
}

// A Store between the pipeline and the store that changes a payload of
// the batch it forwards (a new value, or its bytes in place) forwards a
// batch that is no longer Checked; one that forwards it unchanged, or
// changes only what the payload is not written from, keeps it.
func TestBatchCheckedLostWhenAPayloadChanges(t *testing.T) {
	st := &recordCommits{Ingest: memIngest(t)}
	svc, err := ingest.New(st, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	item := `{"event_id":"e","timestamp":"2026-03-01T12:00:00Z","event_type":"compute.instance.create.end","platform":"openstack","cloud":"c","resource_type":"instance","resource_id":"r","project_id":"p","payload":{"state":"active","size":{"vcpus":1,"ram_gb":2,"disk_gb":3,"flavor":"f"},"provider":{"p":1},"x":[1]}}`
	if res, err := svc.Ingest(ctx, ingest.Caller{}, [][]byte{[]byte(item)}); err != nil || res.Accepted != 1 {
		t.Fatal(res, err)
	}
	b := st.batches[0]
	if !b.Checked() {
		t.Fatal("the pipeline's batch is not Checked")
	}
	for name, change := range map[string]func(p *event.PayloadEnvelope){
		"state":           func(p *event.PayloadEnvelope) { p.State = event.StateOf("other") },
		"size":            func(p *event.PayloadEnvelope) { p.Size = jsontext.Value(`{"vcpus":1,"vcpus":2}`) },
		"size in place":   func(p *event.PayloadEnvelope) { p.Size[len(p.Size)-3] = 'g' },
		"provider":        func(p *event.PayloadEnvelope) { p.Provider = nil },
		"unknown":         func(p *event.PayloadEnvelope) { p.Unknown = jsontext.Value(`{"state":"x"}`) },
		"unknown emptied": func(p *event.PayloadEnvelope) { p.Unknown = jsontext.Value{} },
	} {
		c := b
		c.Events = slices.Clone(b.Events)
		p := &c.Events[0].Payload
		p.Size, p.Provider, p.Unknown = bytes.Clone(p.Size), bytes.Clone(p.Provider), bytes.Clone(p.Unknown)
		change(p)
		if c.Checked() {
			t.Errorf("%s changed: still Checked", name)
		}
	}
	c := b
	c.Events = slices.Clone(b.Events)
	c.Events[0].ResourceID = "other"
	if !c.Checked() {
		t.Error("a change outside the payload: no longer Checked")
	}
	c.Events = c.Events[:0]
	if !c.Checked() {
		t.Error("its events dropped (a store's expired ones): no longer Checked")
	}
}
