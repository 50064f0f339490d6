package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/url"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// testCaller is the caller of the tests' creates.
var testCaller = correlate.Caller{Organization: "org-1", User: "user-1"}

// keyedRecord is a planned create (step 2, recorded as sent) of testCaller
// with idempotency key and metadata as given, at now.
func keyedRecord(key, metadata string, now time.Time) correlate.Create {
	return correlate.Create{
		Caller: testCaller, IdempotencyKey: key, Step: correlate.StepRecord, Now: now,
		Event: correlate.Event{
			ID: uuid.Must(uuid.NewV7()).String(), Organization: testCaller.Organization, User: testCaller.User,
			Category: "connection", Action: "failed", Severity: correlate.SeverityError,
			Status: correlate.StatusUnread, Metadata: []byte(metadata), CreatedAt: now, UpdatedAt: now,
		},
	}
}

// An idempotent create whose write fails inside its transaction (here a
// metadata value PostgreSQL refuses as json, which the service's validation
// would have refused first) leaves nothing behind: no event and no binding
// of the key ("nothing half-written"), and the pool's one connection still
// serves the retry, which records the event and binds the key once
// (event-correlation.md, step 1 and step 5: "in the same transaction as the
// effect").
func TestIdempotentCreateFailedWriteLeavesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := pgtest.Open(t, pgtest.URL(t), pgstore.Options{MaxConns: 1})
	store := db.Correlate()
	now := time.Now().UTC().Truncate(time.Microsecond)
	create := func(metadata string) correlate.Create { return keyedRecord("key-1", metadata, now) }
	if _, _, err := store.Create(ctx, create(`{"broken":`)); err == nil {
		t.Fatal("a create whose metadata is not JSON succeeded")
	}
	l, err := store.List(ctx, testCaller, correlate.Query{PageSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	if l.Total != 0 {
		t.Fatalf("after the failed create, %d events are stored, want 0", l.Total)
	}
	for i, want := range []correlate.Disposition{correlate.Created, correlate.Replayed} {
		_, d, err := store.Create(ctx, create(`{"ok":true}`))
		if err != nil {
			t.Fatalf("create %d after the failed one: %v", i+1, err)
		}
		if d != want {
			t.Errorf("create %d after the failed one: disposition %q, want %q", i+1, d, want)
		}
	}
}

// freezeProxy forwards TCP connections to target until a client sends a
// message holding trigger: from then on that connection is frozen (nothing
// more is forwarded either way, and nothing is closed), as a database that
// stops answering mid-conversation looks to the client. frozen is closed
// then. Connections opened later are forwarded normally. cut closes every
// connection (also run on cleanup).
func freezeProxy(t *testing.T, target string, trigger []byte) (addr string, frozen <-chan struct{}, cut func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		once  sync.Once
		done  = make(chan struct{})
	)
	cut = func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	}
	t.Cleanup(cut)
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				_ = client.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, client, server)
			mu.Unlock()
			var stop atomic.Bool
			pump := func(dst, src net.Conn, watch bool) {
				buf := make([]byte, 64<<10)
				for {
					n, err := src.Read(buf)
					if n > 0 && watch && bytes.Contains(buf[:n], trigger) {
						fired := false
						once.Do(func() { fired = true })
						if fired {
							stop.Store(true)
							close(done)
						}
					}
					if n > 0 && !stop.Load() {
						if _, err := dst.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}
			go pump(server, client, true)
			go pump(client, server, false)
		}
	}()
	return ln.Addr().String(), done, cut
}

// The ROLLBACK that ends an idempotent create's failed transaction is
// bounded: when the database stops answering it (here a proxy freezes the
// connection as the ROLLBACK passes; the caller has given up), Create still
// returns, the connection is discarded rather than held checked out, and
// the pool's one connection slot serves the next create. (The ROLLBACK ran
// under context.WithoutCancel with no bound: Create never returned, and
// the pool's connection was gone for as long as TCP kept the peer.)
func TestIdempotentCreateRollbackIsBounded(t *testing.T) {
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	addr, frozen, cut := freezeProxy(t, u.Host, []byte("ROLLBACK"))
	u.Host = addr
	// No acquire timeout: pgx itself waits up to 15 s for a peer that does
	// not close before it frees the discarded connection's slot.
	db := pgtest.Open(t, u.String(), pgstore.Options{MaxConns: 1, AcquireTimeout: -1})
	store := db.Correlate()
	now := time.Now().UTC().Truncate(time.Microsecond)
	create := func(metadata string) correlate.Create { return keyedRecord("key-1", metadata, now) }
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan error, 1)
	go func() {
		// A write PostgreSQL refuses (metadata not JSON) aborts the
		// transaction; ending it sends the ROLLBACK the proxy freezes.
		_, _, err := store.Create(ctx, create(`{"broken":`))
		returned <- err
	}()
	select {
	case <-frozen:
	case err := <-returned:
		t.Fatalf("Create returned (%v) without sending a ROLLBACK", err)
	}
	cancel() // the caller gives up
	select {
	case err := <-returned:
		if err == nil {
			t.Fatal("a create whose metadata is not JSON succeeded")
		}
	case <-time.After(30 * time.Second): // a bound for a hang, not a measurement
		cut() // let the stuck ROLLBACK fail, so that cleanup can close the pool
		t.Fatal("Create did not return: its ROLLBACK waits, unbounded, on a database that does not answer")
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	if _, d, err := store.Create(ctx2, create(`{"ok":true}`)); err != nil || d != correlate.Created {
		t.Fatalf("next create on the pool's one connection slot: %q, %v; want created", d, err)
	}
}

// The transaction a failed idempotent create leaves open is ended on its
// connection, so the pool keeps that connection instead of discarding it
// (pgxpool destroys a connection released inside a transaction) and
// opening another: the one backend of a one-connection pool is the same
// before and after the failure. TestIdempotentCreateFailedWriteLeavesNothing
// passes either way, as the retry runs on a new connection.
func TestIdempotentCreateFailedWriteKeepsTheConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const app = "tally_keep_conn_test"
	u := pgtest.URL(t) + "&application_name=" + app
	db := pgtest.Open(t, u, pgstore.Options{MaxConns: 1})
	store := db.Correlate()
	admin, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	backends := func() []int {
		var pids []int
		rows, err := admin.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid() ORDER BY pid`, app)
		if err != nil {
			t.Fatal(err)
		}
		pids, err = pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			t.Fatal(err)
		}
		return pids
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	create := func(key, metadata string) correlate.Create { return keyedRecord(key, metadata, now) }
	if _, _, err := store.Create(ctx, create("key-0", `{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	before := backends()
	if _, _, err := store.Create(ctx, create("key-1", `{"broken":`)); err == nil {
		t.Fatal("a create whose metadata is not JSON succeeded")
	}
	if _, _, err := store.Create(ctx, create("key-2", `{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, backends()); diff != "" || len(before) != 1 {
		t.Errorf("the pool's backends around a failed idempotent create (-before +after):\n%s(before: %v, want one)", diff, before)
	}
}

// A pipeline whose connection freezes mid-write (a proxy stops forwarding
// as the pipeline's Bind passes, as a database that stops answering looks)
// holds no create past its context: each answers its context's error when
// its caller gives up, nothing it sent reached the server so nothing is
// stored, the pipeline is cancelled once every caller has left, its
// connection is discarded, and the pool serves the next create.
func TestPipelineFrozenConnectionHoldsNoCreate(t *testing.T) {
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	addr, frozen, _ := freezeProxy(t, u.Host, []byte(`"freeze-here"`))
	u.Host = addr
	db := pgtest.Open(t, u.String(), pgstore.Options{MaxConns: 2, AcquireTimeout: -1})
	s := db.Correlate()
	now := time.Now().UTC().Truncate(time.Microsecond)
	if _, _, err := s.Create(context.Background(), occurrence("k0", `{}`, now)); err != nil {
		t.Fatal(err)
	}
	goroutines := runtime.NumGoroutine()
	ctxs := make([]context.Context, 2)
	for i := range ctxs {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		ctxs[i] = ctx
	}
	start := time.Now()
	_, errs := pgstore.PipeWrites(s, ctxs, []correlate.Create{occurrence("k1", `{"x":"freeze-here"}`, now), occurrence("k2", `{}`, now)})
	select {
	case <-frozen:
	default:
		t.Fatal("the proxy never froze")
	}
	for i, err := range errs {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("create %d on the frozen connection: %v; want its deadline", i, err)
		}
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the creates returned after %s, past their 500 ms", took)
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && runtime.NumGoroutine() > goroutines; {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > goroutines {
		t.Errorf("%d goroutines, %d before: the pipeline outlived its callers", n, goroutines)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, d, err := s.Create(ctx, occurrence("k3", `{}`, now)); err != nil || d != correlate.Created {
		t.Fatalf("next create: %q, %v; want created", d, err)
	}
	if d := cmp.Diff(map[string]int64{"k0": 1, "k3": 1}, openCounts(t, s)); d != "" {
		t.Errorf("open events' counts (-want +got):\n%s", d)
	}
}
