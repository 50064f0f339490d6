package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/internal/seed"
	"github.com/tallyhq/tally/sizenames"
	"github.com/tallyhq/tally/store"
	"github.com/tallyhq/tally/store/pgstore"
	"github.com/tallyhq/tally/store/storetest"
)

// stores returns the stores of db, and a second pool on its database for
// the suite's concurrency cases.
func stores(db *pgstore.DB, url string) storetest.Stores {
	return storetest.Stores{
		Ingest: db.Ingest(), Projection: db.Projection(), SizeNames: db.SizeNames(), Correlate: db.Correlate(), Usage: db.Ingest(), Reconcile: db.Reconcile(),
		Reopen: func(tb testing.TB) storetest.Stores { return stores(pgtest.Open(tb, url, pgstore.Options{}), url) },
	}
}

// openStores returns the stores of a fresh, migrated schema.
func openStores(tb testing.TB) storetest.Stores {
	u := pgtest.URL(tb)
	return stores(pgtest.Open(tb, u, pgstore.Options{}), u)
}

// TestConformance runs the conformance suite, the one memstore passes,
// against PostgreSQL over a real connection, each case on a fresh schema;
// the concurrency cases create through two pools, as two processes sharing
// one database would.
func TestConformance(t *testing.T) { storetest.Run(t, openStores) }

// BenchmarkUsage runs storetest.BenchUsage on 2,000 resources, or on
// TALLY_BENCH_USAGE_RESOURCES of them (docs/performance.md: 100,000).
func BenchmarkUsage(b *testing.B) {
	storetest.BenchUsage(b, openStores, storetest.UsageBenchResources(b, os.Getenv("TALLY_BENCH_USAGE_RESOURCES")))
}

// BenchmarkStore runs the suite's benchmarks (see storetest.Bench):
//
//	go test -run='^$' -bench=BenchmarkStore ./store/pgstore
func BenchmarkStore(b *testing.B) { storetest.Bench(b, openStores) }

// BenchmarkStoreUnpartitioned is BenchmarkStore on the unpartitioned
// layout (pgtest.UnpartitionedURL), the baseline of the partitioned
// table's cost (docs/performance.md):
//
//	go test -run='^$' -bench='BenchmarkStore(Unpartitioned)?/(Ingest|Commit)/fresh' ./store/pgstore
func BenchmarkStoreUnpartitioned(b *testing.B) {
	storetest.Bench(b, func(tb testing.TB) storetest.Stores {
		u := pgtest.UnpartitionedURL(tb)
		return stores(pgtest.Open(tb, u, pgstore.Options{}), u)
	})
}

// t0 is the store clock of these tests.
var t0 = time.Date(2026, 11, 30, 9, 0, 0, 123456000, time.UTC)

// clock returns a store clock that starts at t0 and moves one second per
// call, safe for concurrent use.
func clock() func() time.Time {
	var (
		mu sync.Mutex
		n  int
	)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		n++
		return t0.Add(time.Duration(n-1) * time.Second)
	}
}

// open returns the ingestion store of a fresh schema and a plain connection
// to the same schema, for looking at the tables directly.
func open(t *testing.T, opts pgstore.Options) (*pgstore.Ingest, *pgx.Conn) {
	t.Helper()
	db, conn := openDB(t, opts)
	return db.Ingest(), conn
}

// openDB is open, returning the whole DB.
func openDB(t *testing.T, opts pgstore.Options) (*pgstore.DB, *pgx.Conn) {
	t.Helper()
	u := pgtest.URL(t)
	ctx := context.Background()
	db := pgtest.Open(t, u, opts)
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return db, conn
}

// ev returns a valid instance create event.
func ev(id string, ts time.Time) event.Event {
	return event.Event{
		EventID:      id,
		Timestamp:    ts,
		EventType:    "compute.instance.create.end",
		Platform:     "openstack",
		Cloud:        "east",
		ResourceType: "instance",
		ResourceID:   "vm-" + id,
		ProjectID:    "p1",
		Source:       event.SourceCollector,
		Payload: event.PayloadEnvelope{
			State: event.StateOf("active"),
			Size:  jsontext.Value(`{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"}`),
		},
	}
}

func count(t *testing.T, conn *pgx.Conn, table string) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// "Unknown fields survive a decode/encode round-trip untouched, which keeps
// an event byte-faithful to what the provider sent" (canonical-event.md,
// Members), and docs/decisions.md: numbers in payload are exact.
func TestCommitKeepsPayloadsByteFaithful(t *testing.T) {
	s, conn := open(t, pgstore.Options{Now: clock()})
	ctx := context.Background()
	raw := `{"event_id":"e1","timestamp":"2026-11-30T08:00:00.123456Z","event_type":"compute.instance.create.end",` +
		`"platform":"openstack","cloud":"east","resource_type":"instance","resource_id":"vm1","project_id":"p1",` +
		`"source":"collector","payload":{"state":"active","size":{"vcpus":2,"ram_gb":0.1,"disk_gb":12345678901234567890,"flavor":"m1","zz":1,"aa":[1.50,2e10]},` +
		`"provider":{"b":{"x":"é"},"a":-0.0},"unknown_z":{"n":12345678901234567890},"unknown_a":null}}`
	e, err := event.Decode([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	committed, err := s.Commit(ctx, ingest.Batch{Events: []event.Event{e}})
	inserted := committed.Inserted
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]bool{true}, inserted); diff != "" {
		t.Errorf("inserted (-want +got):\n%s", diff)
	}
	got := storetest.Events(t, s)
	if len(got) != 1 {
		t.Fatalf("stored %d events, want 1", len(got))
	}
	want, _ := e.MarshalJSON()
	back, err := got[0].MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(back)); diff != "" {
		t.Errorf("event read back re-encodes differently (-want +got):\n%s", diff)
	}
	// raw is written as event.Event encodes (compact, no escapes it would
	// rewrite), so the stored event must also match it exactly.
	if diff := cmp.Diff(raw, string(back)); diff != "" {
		t.Errorf("event read back differs from what arrived (-want +got):\n%s", diff)
	}
	var category string
	var receivedAt time.Time
	if err := conn.QueryRow(ctx, "SELECT category, received_at FROM events").Scan(&category, &receivedAt); err != nil {
		t.Fatal(err)
	}
	if category != string(event.CategoryCreate) || !receivedAt.Equal(t0) {
		t.Errorf("category, received_at = %q, %v; want create, %v", category, receivedAt, t0)
	}
}

// "A duplicate is the same (event_id, timestamp) pair. Ingestion is
// idempotent, so replaying a batch stores nothing twice. Reusing an event_id
// with another timestamp is a provider bug the API does not detect"
// (canonical-event.md, Rules).
func TestCommitDuplicates(t *testing.T) {
	ts := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		before  []event.Event
		batch   []event.Event
		want    []bool
		wantAll int
	}{
		{
			name:    "new events are inserted, in the caller's order",
			batch:   []event.Event{ev("c", ts), ev("a", ts), ev("b", ts)},
			want:    []bool{true, true, true},
			wantAll: 3,
		},
		{
			name:    "replaying a batch stores nothing twice",
			before:  []event.Event{ev("c", ts), ev("a", ts), ev("b", ts)},
			batch:   []event.Event{ev("c", ts), ev("a", ts), ev("b", ts)},
			want:    []bool{false, false, false},
			wantAll: 3,
		},
		{
			name:    "the same pair twice in one batch: the first is inserted",
			batch:   []event.Event{ev("b", ts), ev("a", ts), ev("b", ts)},
			want:    []bool{true, true, false},
			wantAll: 2,
		},
		{
			name:    "the same event_id at another timestamp is a new event",
			before:  []event.Event{ev("a", ts)},
			batch:   []event.Event{ev("a", ts.Add(time.Microsecond)), ev("a", ts)},
			want:    []bool{true, false},
			wantAll: 2,
		},
		{
			name:    "the same instant at another offset is the same pair",
			before:  []event.Event{ev("a", ts)},
			batch:   []event.Event{ev("a", ts.In(time.FixedZone("x", 3600)))},
			want:    []bool{false},
			wantAll: 1,
		},
		{
			name:    "partly stored batch",
			before:  []event.Event{ev("b", ts)},
			batch:   []event.Event{ev("a", ts), ev("b", ts), ev("c", ts)},
			want:    []bool{true, false, true},
			wantAll: 3,
		},
	}
	// More events than the duplicate probe's sample (write.go: a stored
	// event the sample misses fails the COPY, and the batch is redone with
	// the full probe), with stored ones off and on the sample's positions.
	var many, manyStored []event.Event
	var manyWant []bool
	for i := range 100 {
		e := ev(fmt.Sprintf("m%03d", i), ts)
		many = append(many, e)
		stored := i == 3 || i == 97 // the sample looks at 0, 6, 12, …
		if stored {
			manyStored = append(manyStored, e)
		}
		manyWant = append(manyWant, !stored)
	}
	tests = append(tests, struct {
		name    string
		before  []event.Event
		batch   []event.Event
		want    []bool
		wantAll int
	}{"a batch larger than the probe's sample, stored events missed by the sample", manyStored, many, manyWant, 100})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, conn := open(t, pgstore.Options{})
			ctx := context.Background()
			if len(tt.before) > 0 {
				if _, err := s.Commit(ctx, ingest.Batch{Events: tt.before}); err != nil {
					t.Fatal(err)
				}
			}
			committed, err := s.Commit(ctx, ingest.Batch{Events: tt.batch})
			got := committed.Inserted
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("inserted (-want +got):\n%s", diff)
			}
			if n := count(t, conn, "events"); n != tt.wantAll {
				t.Errorf("events stored: %d, want %d", n, tt.wantAll)
			}
		})
	}
}

// "An item this API refuses is kept server-side with the reason it was
// refused" (canonical-event.md, Delivery); docs/decisions.md: the dead-letter body
// is the item's raw bytes exactly as received, even invalid JSON or NUL.
func TestCommitDeadLettersKeepRawBytes(t *testing.T) {
	s, _ := open(t, pgstore.Options{Now: clock()})
	ctx := context.Background()
	at := time.Date(2026, 11, 30, 8, 0, 0, 1000, time.UTC)
	dls := []ingest.DeadLetter{
		{Raw: []byte("{\"a\":\x00\xff\xfe}"), RawSize: 8, Reason: "schema: /: invalid", EventID: "", ReceivedAt: at},
		{Raw: []byte(`{"event_id":"x"}`), RawSize: 16, Reason: "size_schema: /size: bad", EventID: "x", ReceivedAt: at},
		{Raw: nil, RawSize: 1 << 21, Reason: "schema: too large", EventID: "big", ReceivedAt: at},
		{Raw: []byte{}, RawSize: 0, Reason: "schema: empty", EventID: ""}, // stamped by the store
	}
	committed, err := s.Commit(ctx, ingest.Batch{DeadLetters: dls})
	inserted := committed.Inserted
	if err != nil {
		t.Fatal(err)
	}
	if len(inserted) != 0 {
		t.Errorf("inserted = %v, want empty for a batch of no events", inserted)
	}
	got, err := s.DeadLetters(ctx, ingest.DeadLetterQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(dls)
	want[3].ReceivedAt = t0 // stamped by the store clock
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(ingest.DeadLetter{}, "ID", "UUID")); diff != "" {
		t.Errorf("dead letters (-want +got):\n%s", diff)
	}
	// The first three share ReceivedAt: their ids increase in batch order.
	for i := 1; i < min(3, len(got)); i++ {
		if got[i].ID <= got[i-1].ID {
			t.Errorf("ids not increasing in batch order: %d then %d", got[i-1].ID, got[i].ID)
		}
	}
}

func TestCommitAudit(t *testing.T) {
	s, _ := open(t, pgstore.Options{Now: clock()})
	ctx := context.Background()
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	entries := []ingest.AuditEntry{
		{At: at, Action: "events.scope_violation", Credential: "c1", EventID: "e1", Platform: "openstack", Cloud: "west"},
		{Action: "events.scope_violation", Credential: "c1", EventID: "", Platform: "openstack", Cloud: "north"},
		{At: at, Action: "other", Credential: "c2"},
	}
	if _, err := s.Commit(ctx, ingest.Batch{Audit: entries}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Audit(ctx, ingest.AuditQuery{Action: "events.scope_violation", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	want := []ingest.AuditEntry{entries[0], entries[1]}
	want[1].At = t0 // stamped by the store clock
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(ingest.AuditEntry{}, "ID")); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
	all, err := s.Audit(ctx, ingest.AuditQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 {
		t.Errorf("audit of every action: %d rows, want 3", len(all))
	}
}

// Listings page oldest first by (time, id), strictly after a position, in a
// half-open window [From, To).
func TestDeadLetterAndAuditPaging(t *testing.T) {
	s, _ := open(t, pgstore.Options{})
	ctx := context.Background()
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	var (
		dls     []ingest.DeadLetter
		entries []ingest.AuditEntry
	)
	// Two rows per instant, instants out of order, so that ids and times
	// disagree and ties need the id.
	for _, h := range []int{3, 1, 2, 0, 4} {
		for k := range 2 {
			at := base.Add(time.Duration(h) * time.Hour)
			dls = append(dls, ingest.DeadLetter{Raw: []byte{byte(h), byte(k)}, RawSize: 2, Reason: "schema: x", EventID: fmt.Sprintf("%d%d", h, k), ReceivedAt: at})
			entries = append(entries, ingest.AuditEntry{At: at, Action: "events.scope_violation", Credential: "c", EventID: fmt.Sprintf("%d%d", h, k)})
		}
	}
	if _, err := s.Commit(ctx, ingest.Batch{DeadLetters: dls, Audit: entries}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		from, to time.Time
		pageSize int
		want     []string // event ids in listing order
	}{
		{"everything, pages of 3", time.Time{}, time.Time{}, 3, []string{"00", "01", "10", "11", "20", "21", "30", "31", "40", "41"}},
		{"everything, one page", time.Time{}, time.Time{}, 1000, []string{"00", "01", "10", "11", "20", "21", "30", "31", "40", "41"}},
		{"window [1h, 3h), pages of 1", base.Add(time.Hour), base.Add(3 * time.Hour), 1, []string{"10", "11", "20", "21"}},
		{"from 3h", base.Add(3 * time.Hour), time.Time{}, 2, []string{"30", "31", "40", "41"}},
		{"to 1h", time.Time{}, base.Add(time.Hour), 5, []string{"00", "01"}},
		{"empty window", base.Add(10 * time.Hour), time.Time{}, 5, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotDL, gotAudit []string
			var after *ingest.Position
			for range 20 {
				page, err := s.DeadLetters(ctx, ingest.DeadLetterQuery{From: tt.from, To: tt.to, After: after, Limit: tt.pageSize})
				if err != nil {
					t.Fatal(err)
				}
				if len(page) > tt.pageSize {
					t.Fatalf("page of %d rows, limit %d", len(page), tt.pageSize)
				}
				if len(page) == 0 {
					break
				}
				for _, d := range page {
					gotDL = append(gotDL, d.EventID)
				}
				last := page[len(page)-1]
				after = &ingest.Position{At: last.ReceivedAt, ID: last.ID}
			}
			after = nil
			for range 20 {
				page, err := s.Audit(ctx, ingest.AuditQuery{Action: "events.scope_violation", From: tt.from, To: tt.to, After: after, Limit: tt.pageSize})
				if err != nil {
					t.Fatal(err)
				}
				if len(page) == 0 {
					break
				}
				for _, a := range page {
					gotAudit = append(gotAudit, a.EventID)
				}
				last := page[len(page)-1]
				after = &ingest.Position{At: last.At, ID: last.ID}
			}
			if diff := cmp.Diff(tt.want, gotDL); diff != "" {
				t.Errorf("dead letters (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, gotAudit); diff != "" {
				t.Errorf("audit (-want +got):\n%s", diff)
			}
		})
	}
}

// A positive Limit bounds a listing (ingest.Service asks for a page plus
// one, up to 1001); zero or less means no limit, as in memstore.
func TestListingLimits(t *testing.T) {
	s, _ := open(t, pgstore.Options{})
	ctx := context.Background()
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	var (
		dls     []ingest.DeadLetter
		entries []ingest.AuditEntry
	)
	for i := range 1002 {
		at := base.Add(time.Duration(i) * time.Millisecond)
		dls = append(dls, ingest.DeadLetter{Raw: []byte("x"), RawSize: 1, Reason: "schema: x", ReceivedAt: at})
		entries = append(entries, ingest.AuditEntry{At: at, Action: "a", Credential: "c"})
	}
	if _, err := s.Commit(ctx, ingest.Batch{DeadLetters: dls, Audit: entries}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ limit, want int }{{1, 1}, {1000, 1000}, {1001, 1001}, {0, 1002}, {-1, 1002}} {
		got, err := s.DeadLetters(ctx, ingest.DeadLetterQuery{Limit: c.limit})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != c.want {
			t.Errorf("DeadLetters with limit %d: %d rows, want %d", c.limit, len(got), c.want)
		}
		audit, err := s.Audit(ctx, ingest.AuditQuery{Limit: c.limit})
		if err != nil {
			t.Fatal(err)
		}
		if len(audit) != c.want {
			t.Errorf("Audit with limit %d: %d rows, want %d", c.limit, len(audit), c.want)
		}
	}
}

// "A batch lands whole or not at all, and a batch of nothing but refused
// items still commits" (canonical-event.md, Delivery). A failure in the
// middle of the batch, here the dead-letter insert raising an error after
// the events were inserted, leaves nothing of the batch; a retry once the
// fault is gone stores all of it.
func TestCommitFaultLeavesNothing(t *testing.T) {
	s, conn := open(t, pgstore.Options{})
	ctx := context.Background()
	ts := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	batch := ingest.Batch{
		Events:      []event.Event{ev("a", ts), ev("b", ts)},
		DeadLetters: []ingest.DeadLetter{{Raw: []byte("nope"), RawSize: 4, Reason: "schema: bad"}},
		Audit:       []ingest.AuditEntry{{Action: "events.scope_violation", Credential: "c", EventID: "z"}},
	}
	if _, err := conn.Exec(ctx, `
CREATE FUNCTION fail_dead_letter() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'injected fault'; END $$;
CREATE TRIGGER fail_dead_letter BEFORE INSERT ON dead_letters
FOR EACH ROW EXECUTE FUNCTION fail_dead_letter();`); err != nil {
		t.Fatal(err)
	}
	_, err := s.Commit(ctx, batch)
	if err == nil {
		t.Fatal("Commit with a failing dead-letter insert: no error")
	}
	t.Logf("error: %v", err)
	for _, table := range []string{"events", "dead_letters", "audit_log"} {
		if n := count(t, conn, table); n != 0 {
			t.Errorf("after the failed batch, %s holds %d rows, want 0", table, n)
		}
	}
	if _, err := conn.Exec(ctx, `DROP TRIGGER fail_dead_letter ON dead_letters`); err != nil {
		t.Fatal(err)
	}
	committed, err := s.Commit(ctx, batch)
	inserted := committed.Inserted
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if diff := cmp.Diff([]bool{true, true}, inserted); diff != "" {
		t.Errorf("retry inserted (-want +got):\n%s", diff)
	}
	for table, want := range map[string]int{"events": 2, "dead_letters": 1, "audit_log": 1} {
		if n := count(t, conn, table); n != want {
			t.Errorf("after the retry, %s holds %d rows, want %d", table, n, want)
		}
	}
}

// A dropped table fails the batch as a whole; and a cancelled context fails
// it before anything is written.
func TestCommitOtherFaults(t *testing.T) {
	ts := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	batch := ingest.Batch{
		Events:      []event.Event{ev("a", ts)},
		DeadLetters: []ingest.DeadLetter{{Raw: []byte("nope"), RawSize: 4, Reason: "schema: bad"}},
		Audit:       []ingest.AuditEntry{{Action: "events.scope_violation", Credential: "c"}},
	}
	t.Run("dropped dead_letters table", func(t *testing.T) {
		s, conn := open(t, pgstore.Options{})
		ctx := context.Background()
		if _, err := conn.Exec(ctx, `DROP TABLE dead_letters`); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Commit(ctx, batch); err == nil {
			t.Fatal("no error")
		}
		for _, table := range []string{"events", "audit_log"} {
			if n := count(t, conn, table); n != 0 {
				t.Errorf("%s holds %d rows, want 0", table, n)
			}
		}
		// The fault gone (a fresh store), the same batch commits.
		s2, conn2 := open(t, pgstore.Options{})
		if _, err := s2.Commit(ctx, batch); err != nil {
			t.Fatalf("retry: %v", err)
		}
		if n := count(t, conn2, "events"); n != 1 {
			t.Errorf("after the retry, events holds %d rows, want 1", n)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		s, conn := open(t, pgstore.Options{})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := s.Commit(ctx, batch)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		for _, table := range []string{"events", "dead_letters", "audit_log"} {
			if n := count(t, conn, table); n != 0 {
				t.Errorf("%s holds %d rows, want 0", table, n)
			}
		}
		if _, err := s.Commit(context.Background(), batch); err != nil {
			t.Fatalf("retry: %v", err)
		}
	})
}

func TestResourceTypes(t *testing.T) {
	s, _ := open(t, pgstore.Options{Now: clock()})
	ctx := context.Background()

	_, err := s.ResourceType(ctx, "openstack", "nothing")
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ResourceType of an unknown pair: err = %v, want store.ErrNotFound", err)
	}

	// Exact bytes: whitespace, member order and number spelling survive.
	schema := jsontext.Value("{ \"type\": \"object\",\n  \"properties\": {\"z\": {\"maximum\": 1.50}, \"a\": {\"minimum\": 12345678901234567890}} }")
	put, err := s.PutResourceType(ctx, ingest.ResourceType{Platform: "aws", ResourceType: "ec2", SizeSchema: schema, Version: 42})
	if err != nil {
		t.Fatal(err)
	}
	want := ingest.ResourceType{Platform: "aws", ResourceType: "ec2", SizeSchema: schema, Version: 1, UpdatedAt: t0}
	if diff := cmp.Diff(want, put); diff != "" {
		t.Errorf("first put (-want +got):\n%s", diff)
	}
	got, err := s.ResourceType(ctx, "aws", "ec2")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("get after first put (-want +got):\n%s", diff)
	}

	schema2 := jsontext.Value(`{"type":"object"}`)
	put2, err := s.PutResourceType(ctx, ingest.ResourceType{Platform: "aws", ResourceType: "ec2", SizeSchema: schema2})
	if err != nil {
		t.Fatal(err)
	}
	want2 := ingest.ResourceType{Platform: "aws", ResourceType: "ec2", SizeSchema: schema2, Version: 2, UpdatedAt: t0.Add(time.Second)}
	if diff := cmp.Diff(want2, put2); diff != "" {
		t.Errorf("second put (-want +got):\n%s", diff)
	}

	all, err := s.ResourceTypes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var pairs []string
	for _, rt := range all {
		pairs = append(pairs, rt.Platform+"/"+rt.ResourceType)
	}
	wantPairs := []string{"aws/ec2", "openstack/floating_ip", "openstack/image", "openstack/instance", "openstack/loadbalancer", "openstack/volume"}
	if diff := cmp.Diff(wantPairs, pairs); diff != "" {
		t.Errorf("ResourceTypes order (-want +got):\n%s", diff)
	}

	if _, err := s.PutResourceType(ctx, ingest.ResourceType{Platform: "aws", ResourceType: "x", SizeSchema: jsontext.Value(`{not json`)}); err == nil {
		t.Errorf("put of a schema that is not JSON: no error")
	}
}

// Concurrent puts of one pair each add one to the version.
func TestPutResourceTypeConcurrent(t *testing.T) {
	s, _ := open(t, pgstore.Options{})
	ctx := context.Background()
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := s.PutResourceType(ctx, ingest.ResourceType{Platform: "p", ResourceType: "r", SizeSchema: jsontext.Value(`{}`)})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	rt, err := s.ResourceType(ctx, "p", "r")
	if err != nil {
		t.Fatal(err)
	}
	if rt.Version != n {
		t.Errorf("version after %d puts = %d", n, rt.Version)
	}
}

// "every run of a cloud whose adapter lists names replaces that cloud's rows
// with the list in one transaction" (canonical-event.md, Size names).
func TestReplaceSizeNames(t *testing.T) {
	db, _ := openDB(t, pgstore.Options{})
	s := db.SizeNames()
	ctx := context.Background()
	row := func(cloud, rt, member, value, name string) sizenames.Row {
		return sizenames.Row{Cloud: cloud, ResourceType: rt, Member: member, Value: value, Name: name}
	}
	east1 := []sizenames.Row{
		row("east", "volume", "type", "id-2", "hdd"),
		row("east", "volume", "type", "id-1", "ssd"),
		row("east", "image", "format", "f1", "qcow2"),
	}
	west := []sizenames.Row{row("west", "volume", "type", "id-1", "fast")}
	for cloud, rows := range map[string][]sizenames.Row{"east": east1, "west": west} {
		if err := s.ReplaceSizeNames(ctx, cloud, rows); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.SizeNames(ctx, "east", "volume")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]sizenames.Row{east1[1], east1[0]}, got); diff != "" {
		t.Errorf("east/volume (-want +got):\n%s", diff)
	}

	// Replacing east leaves exactly the new set, and west untouched.
	east2 := []sizenames.Row{row("east", "volume", "type", "id-3", "nvme")}
	if err := s.ReplaceSizeNames(ctx, "east", east2); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cloud, rt string
		want      []sizenames.Row
	}{
		{"east", "volume", east2},
		{"east", "image", []sizenames.Row{}},
		{"west", "volume", west},
	} {
		got, err := s.SizeNames(ctx, c.cloud, c.rt)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s/%s (-want +got):\n%s", c.cloud, c.rt, diff)
		}
	}

	// A refused replacement changes nothing.
	for name, rows := range map[string][]sizenames.Row{
		"duplicate key":        {row("east", "volume", "type", "x", "a"), row("east", "volume", "type", "x", "b")},
		"row of another cloud": {row("west", "volume", "type", "x", "a")},
	} {
		if err := s.ReplaceSizeNames(ctx, "east", rows); err == nil {
			t.Errorf("%s: no error", name)
		}
		got, err := s.SizeNames(ctx, "east", "volume")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(east2, got); diff != "" {
			t.Errorf("%s: east/volume changed (-want +got):\n%s", name, diff)
		}
	}

	// An empty list empties the cloud.
	if err := s.ReplaceSizeNames(ctx, "east", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := s.SizeNames(ctx, "east", "volume"); err != nil || len(got) != 0 {
		t.Errorf("after an empty replacement: %v, %v", got, err)
	}
}

// Migrations are idempotent: a second run on a current schema applies
// nothing.
func TestMigrateTwiceAppliesNothing(t *testing.T) {
	db := pgtest.DB(t, pgstore.Options{}) // migrated once already
	applied, err := db.Migrate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != 0 {
		t.Errorf("second Migrate applied %v, want nothing", applied)
	}
}

// raw returns the JSON of e, as a collector would send it.
func raw(t testing.TB, e event.Event) []byte {
	t.Helper()
	b, err := e.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Concurrency on PostgreSQL: "8 goroutines ingesting overlapping
// batches of the same 1000 events at once → every event stored once, counts
// add up, no deadlock, no error". Each goroutine sends the 1000 events
// through its own ingest.Service in batches of 250, each in its own order.
func TestIngestConcurrentOverlappingBatches(t *testing.T) {
	s, conn := open(t, pgstore.Options{})
	ctx := context.Background()
	ts := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	items := make([][]byte, 1000)
	for i := range items {
		items[i] = raw(t, ev(fmt.Sprintf("ev-%04d", i), ts.Add(time.Duration(i%7)*time.Second)))
	}
	const workers = 8
	var (
		wg                   sync.WaitGroup
		mu                   sync.Mutex
		accepted, duplicates int
		errs                 []error
	)
	for w := range workers {
		wg.Go(func() {
			svc, err := ingest.New(s, ingest.Options{})
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			// Worker w sends the items rotated by w*125 and, for odd w,
			// reversed: batches of 250 that overlap every other worker's.
			mine := make([][]byte, len(items))
			for i := range items {
				mine[i] = items[(i+w*125)%len(items)]
			}
			if w%2 == 1 {
				slices.Reverse(mine)
			}
			for chunk := range slices.Chunk(mine, 250) {
				res, err := svc.Ingest(ctx, ingest.Caller{Credential: "c"}, chunk)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				if len(res.Rejected) > 0 {
					errs = append(errs, fmt.Errorf("rejected: %+v", res.Rejected))
				}
				accepted += res.Accepted
				duplicates += res.Duplicates
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if accepted != 1000 || duplicates != (workers-1)*1000 {
		t.Errorf("accepted %d, duplicates %d; want 1000, %d", accepted, duplicates, (workers-1)*1000)
	}
	if n := count(t, conn, "events"); n != 1000 {
		t.Errorf("events stored: %d, want 1000", n)
	}
	var distinct int
	if err := conn.QueryRow(ctx, "SELECT count(DISTINCT (event_id, timestamp)) FROM events").Scan(&distinct); err != nil {
		t.Fatal(err)
	}
	if distinct != 1000 {
		t.Errorf("distinct pairs stored: %d, want 1000", distinct)
	}
}

// Fault: "a store failure in the middle of a batch ... leaves no
// event, dead letter or audit row of that batch, and a retry then succeeds".
// The batch holds valid events, a schema refusal (a dead letter) and a scope
// refusal (an audit row); the dead-letter insert fails after the events were
// inserted in the same transaction.
func TestIngestFaultLeavesNothing(t *testing.T) {
	s, conn := open(t, pgstore.Options{})
	ctx := context.Background()
	svc, err := ingest.New(s, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	outside := ev("c", ts)
	outside.Cloud = "west"
	items := [][]byte{raw(t, ev("a", ts)), []byte("{\"not\": \x00 json"), raw(t, outside), raw(t, ev("b", ts))}
	caller := ingest.Caller{Credential: "cred", Platform: "openstack", Cloud: "east"}

	if _, err := conn.Exec(ctx, `
CREATE FUNCTION fail_dead_letter() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'injected fault'; END $$;
CREATE TRIGGER fail_dead_letter BEFORE INSERT ON dead_letters
FOR EACH ROW EXECUTE FUNCTION fail_dead_letter();`); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Ingest(ctx, caller, items); err == nil {
		t.Fatal("Ingest with a failing dead-letter insert: no error")
	} else {
		t.Logf("error: %v", err)
	}
	for _, table := range []string{"events", "dead_letters", "audit_log"} {
		if n := count(t, conn, table); n != 0 {
			t.Errorf("after the failed batch, %s holds %d rows, want 0", table, n)
		}
	}

	if _, err := conn.Exec(ctx, `DROP TRIGGER fail_dead_letter ON dead_letters`); err != nil {
		t.Fatal(err)
	}
	res, err := svc.Ingest(ctx, caller, items)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if res.Accepted != 2 || res.Duplicates != 0 || len(res.Rejected) != 2 {
		t.Errorf("retry result %+v, want 2 accepted and 2 rejected", res)
	}
	for table, want := range map[string]int{"events": 2, "dead_letters": 1, "audit_log": 1} {
		if n := count(t, conn, table); n != want {
			t.Errorf("after the retry, %s holds %d rows, want %d", table, n, want)
		}
	}
}

// "Five pairs ride the migration chain, so every database the chain reaches
// knows them without an operator registering anything" (canonical-event.md,
// Size schemas): the seeded rows are seed.ResourceTypes, byte for byte.
func TestSeededResourceTypes(t *testing.T) {
	s, _ := open(t, pgstore.Options{})
	got, err := s.ResourceTypes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i].UpdatedAt.IsZero() {
			t.Errorf("%s/%s: zero updated_at", got[i].Platform, got[i].ResourceType)
		}
		got[i].UpdatedAt = time.Time{}
	}
	want := seed.ResourceTypes()
	if len(want) != 5 {
		t.Fatalf("seed.ResourceTypes returns %d rows, want 5", len(want))
	}
	// Compare the schemas as strings so that a difference shows as text.
	str := cmp.Transformer("string", func(v jsontext.Value) string { return string(v) })
	if diff := cmp.Diff(want, got, str); diff != "" {
		t.Errorf("seeded resource types (-want +got):\n%s", diff)
	}
}

// Every migration can be rolled back and applied again: the Down sections
// are valid, and Up after Down gives a working schema.
func TestMigrationsDownAndUpAgain(t *testing.T) {
	u := pgtest.URL(t)
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, os.DirFS("migrations"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 0); err != nil {
		t.Fatalf("down: %v", err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
	s, err := pgstore.Open(ctx, u, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rts, err := s.Ingest().ResourceTypes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rts) != len(seed.ResourceTypes()) {
		t.Errorf("after down and up: %d resource types, want the %d seeds", len(rts), len(seed.ResourceTypes()))
	}
}
