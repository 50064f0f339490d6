package storetest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/big"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/sizenames"
)

// ingestStore is what the ingestion suites need: both contracts of the
// ingestion area, as [Stores] pairs them with Stores.ingest.
type ingestStore interface {
	ingest.Store
	sizenames.Store
	// Projection is the projection store of the same database.
	Projection() projection.Store
}

// ingestPair joins a backend's ingest and size-name stores into one
// ingestStore. Both read the one size_names table; SizeNames is the
// ingest store's.
type ingestPair struct {
	ingest.Store
	names sizenames.Store
	proj  projection.Store
}

func (p ingestPair) Projection() projection.Store { return p.proj }

// projService returns the projection service over st's projection,
// reading histories through svc.
func projService(t testing.TB, st ingestStore, svc *ingest.Service) *projection.Service {
	t.Helper()
	ps, err := projection.New(st.Projection(), svc)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func (p ingestPair) ReplaceSizeNames(ctx context.Context, cloud string, rows []sizenames.Row) error {
	return p.names.ReplaceSizeNames(ctx, cloud, rows)
}

// t0 is the instant the suite's clocks start at.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// clock is a settable clock, safe for concurrent use.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: t0} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// counter is an ingest.Observer that counts, safe for concurrent use.
type counter struct {
	mu          sync.Mutex
	ingested    int
	duplicates  int
	rejected    map[ingest.Kind]int
	unvalidated map[string]int // "platform/resource_type"
	ingestedBy  map[string]int // "cloud/source"
	rejectedBy  map[string]int // "cloud/kind"
}

func newCounter() *counter {
	return &counter{rejected: map[ingest.Kind]int{}, unvalidated: map[string]int{},
		ingestedBy: map[string]int{}, rejectedBy: map[string]int{}}
}

func (c *counter) Ingested(cloud string, source event.Source, n int) {
	c.mu.Lock()
	c.ingested += n
	c.ingestedBy[cloud+"/"+string(source)] += n
	c.mu.Unlock()
}
func (c *counter) Duplicates(n int) { c.mu.Lock(); c.duplicates += n; c.mu.Unlock() }
func (c *counter) Rejected(cloud string, k ingest.Kind, n int) {
	c.mu.Lock()
	c.rejected[k] += n
	c.rejectedBy[cloud+"/"+string(k)] += n
	c.mu.Unlock()
}
func (c *counter) UnvalidatedSize(p, rt string, n int) {
	c.mu.Lock()
	c.unvalidated[p+"/"+rt] += n
	c.mu.Unlock()
}
func (c *counter) ProjectionReplays(string, int) {}

// countingStore counts the reads the pipeline makes.
type countingStore struct {
	ingestStore
	sizeNames     atomic.Int64
	resourceTypes atomic.Int64
}

func (s *countingStore) SizeNames(ctx context.Context, cloud, rt string) ([]sizenames.Row, error) {
	s.sizeNames.Add(1)
	return s.ingestStore.SizeNames(ctx, cloud, rt)
}

func (s *countingStore) ResourceType(ctx context.Context, p, rt string) (ingest.ResourceType, error) {
	s.resourceTypes.Add(1)
	return s.ingestStore.ResourceType(ctx, p, rt)
}

// cancellingStore cancels the batch's context as Commit starts, the fault
// every store can be driven into: the commit is under way when its context
// ends.
type cancellingStore struct {
	ingestStore
	cancel context.CancelFunc
}

func (s *cancellingStore) Commit(ctx context.Context, b ingest.Batch) (ingest.Committed, error) {
	s.cancel()
	return s.ingestStore.Commit(ctx, b)
}

// item is a JSON object under construction.
type item map[string]any

// volumeCreate is a valid volume create of cloud c1.
func volumeCreate(id string, ts time.Time) item {
	return item{
		"event_id":      id,
		"timestamp":     ts.Format(time.RFC3339Nano),
		"event_type":    "volume.create.end",
		"platform":      "openstack",
		"cloud":         "c1",
		"resource_type": "volume",
		"resource_id":   "vol-" + id,
		"project_id":    "p1",
		"payload": map[string]any{
			"state":    "available",
			"size":     map[string]any{"size_gb": 100, "type": "ssd"},
			"provider": map[string]any{"oslo_event_type": "volume.create.end"},
		},
	}
}

// instanceCreate is a valid instance create of cloud c1.
func instanceCreate(id string, ts time.Time) item {
	it := volumeCreate(id, ts)
	it["event_type"] = "compute.instance.create.end"
	it["resource_type"] = "instance"
	it["resource_id"] = "vm-" + id
	it.payload()["size"] = map[string]any{"vcpus": 2, "ram_gb": 4, "disk_gb": 20, "flavor": "m1.small"}
	it.payload()["state"] = "active"
	return it
}

func (it item) payload() map[string]any { return it["payload"].(map[string]any) }

// set sets a member by a dotted path ("payload.size.type"); a nil v deletes
// it. It returns it for chaining.
func (it item) set(path string, v any) item {
	parts := strings.Split(path, ".")
	m := map[string]any(it)
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	if v == nil {
		delete(m, parts[len(parts)-1])
	} else {
		m[parts[len(parts)-1]] = v
	}
	return it
}

func (it item) bytes() []byte {
	b, err := json.Marshal(map[string]any(it), json.Deterministic(true))
	if err != nil {
		panic(err)
	}
	return b
}

func items(its ...item) [][]byte {
	out := make([][]byte, len(its))
	for i, it := range its {
		out[i] = it.bytes()
	}
	return out
}

// GenerateBatch returns n valid, distinct instance creates of platform
// openstack and cloud "bench", numbered from first (event_id
// "bench-<number>"), whose sizes satisfy the seeded instance schema. It is
// the batch [Bench] ingests; the same arguments give
// the same bytes.
func GenerateBatch(first, n int) [][]byte {
	out := make([][]byte, n)
	for i := range n {
		k := first + i
		ts := t0.Add(time.Duration(k) * time.Millisecond)
		out[i] = fmt.Appendf(nil, `{"event_id":"bench-%d","timestamp":%q,"event_type":"compute.instance.create.end","platform":"openstack","cloud":"bench","resource_type":"instance","resource_id":"vm-%d","project_id":"project-%d","payload":{"state":"active","size":{"vcpus":%d,"ram_gb":%d,"disk_gb":40,"flavor":"m1.medium"},"provider":{"host":"compute-%d"}}}`,
			k, ts.Format(time.RFC3339Nano), k, k%50, 1+k%8, 2*(1+k%8), k%20)
	}
	return out
}

// normJSON decodes v into a comparable form: objects as maps, numbers as
// exact rationals in text, so two encodings of the same value compare
// equal whatever their member order, whitespace or number spelling.
func normJSON(v []byte) (any, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(v))
	x, err := normValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, fmt.Errorf("data after the value")
	}
	return x, nil
}

func normValue(dec *jsontext.Decoder) (any, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case '{':
		m := map[string]any{}
		for dec.PeekKind() != '}' {
			name, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			key := name.String()
			v, err := normValue(dec)
			if err != nil {
				return nil, err
			}
			m[key] = v
		}
		_, err := dec.ReadToken()
		return m, err
	case '[':
		a := []any{}
		for dec.PeekKind() != ']' {
			v, err := normValue(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.ReadToken()
		return a, err
	case '0':
		r, ok := new(big.Rat).SetString(tok.String())
		if !ok {
			return nil, fmt.Errorf("number %s", tok.String())
		}
		return "#" + r.RatString(), nil
	case '"':
		return tok.String(), nil
	case 't', 'f':
		return tok.Bool(), nil
	default:
		return nil, nil
	}
}

// jsonDiff compares two JSON values by value (-want +got).
func jsonDiff(t *testing.T, want, got []byte) string {
	t.Helper()
	if len(want) == 0 && len(got) == 0 {
		return ""
	}
	w, err := normJSON(want)
	if err != nil {
		t.Fatalf("want %q: %v", want, err)
	}
	g, err := normJSON(got)
	if err != nil {
		return fmt.Sprintf("got invalid JSON %q: %v", got, err)
	}
	return cmp.Diff(w, g)
}

// eventForm is an event with its payload members as comparable values.
type eventForm struct {
	EventID, EventType, Platform, Cloud, ResourceType, ResourceID, ProjectID string
	Timestamp                                                                time.Time
	Source                                                                   event.Source
	Payload                                                                  any
}

func formOf(t *testing.T, ev event.Event) eventForm {
	t.Helper()
	p, err := json.Marshal(ev.Payload)
	if err != nil {
		t.Fatalf("encode payload: %v", err)
	}
	n, err := normJSON(p)
	if err != nil {
		t.Fatalf("payload %q: %v", p, err)
	}
	return eventForm{
		EventID: ev.EventID, EventType: ev.EventType, Platform: ev.Platform, Cloud: ev.Cloud,
		ResourceType: ev.ResourceType, ResourceID: ev.ResourceID, ProjectID: ev.ProjectID,
		Timestamp: ev.Timestamp, Source: ev.Source, Payload: n,
	}
}

// storedEvents returns every stored event of the store, ordered by
// (timestamp, event_id), in comparable form.
func storedEvents(t *testing.T, st ingest.Store) []eventForm {
	t.Helper()
	evs := Events(t, st)
	out := make([]eventForm, 0, len(evs))
	for _, ev := range evs {
		out = append(out, formOf(t, ev))
	}
	return out
}

// Events returns every event stored in st, ordered by (timestamp,
// event_id), each as stored: one unbounded [ingest.Store.Events]. Tests
// outside this package may use it too. It fails t on any error.
func Events(t testing.TB, st ingest.Store) []event.Event {
	t.Helper()
	items, err := st.Events(context.Background(), ingest.EventQuery{})
	if err != nil {
		t.Fatalf("storetest: list events: %v", err)
	}
	out := make([]event.Event, len(items))
	for i := range items {
		out[i] = items[i].Event
	}
	return out
}

// expected returns the stored form of an item as the pipeline stores it:
// decoded strictly, with the given source.
func expected(t *testing.T, it []byte, source event.Source) eventForm {
	t.Helper()
	ev, err := event.Decode(it)
	if err != nil {
		t.Fatalf("test item does not decode: %v", err)
	}
	ev.Source = source
	return formOf(t, ev)
}

func allDeadLetters(t *testing.T, st ingest.Store) []ingest.DeadLetter {
	t.Helper()
	dls, err := st.DeadLetters(context.Background(), ingest.DeadLetterQuery{Limit: 1000})
	if err != nil {
		t.Fatalf("DeadLetters: %v", err)
	}
	return dls
}

func allAudit(t *testing.T, st ingest.Store) []ingest.AuditEntry {
	t.Helper()
	as, err := st.Audit(context.Background(), ingest.AuditQuery{Limit: 1000})
	if err != nil {
		t.Fatalf("Audit: %v", err)
	}
	return as
}
