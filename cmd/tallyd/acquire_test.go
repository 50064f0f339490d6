package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/pgtest"
)

// Timeouts: "A default statement or request timeout,
// configurable, answered 503 (or 504) with a problem body, nothing
// half-written", for a request that cannot get a pool connection too.
// tallyd runs with one connection and no statement timeout; an ingest
// request holds that connection behind a lock on events. A further ingest
// and a read of another table (resource types) are then answered 503
// store_unavailable with Retry-After while the lock is still held (only
// --db-acquire-timeout can end their wait), readiness stays 200 (it has its
// own connection), and nothing of the shed ingest is stored. Once the lock
// is released the held request succeeds and the shed one, sent again, too.
func TestAcquireTimeoutAnswers503(t *testing.T) {
	const app = "tally_acquire_e2e"
	u := pgtest.URL(t) + "&application_name=" + app
	d := startTallyd(t, "--credentials-file", writeCredentials(t), "--database-url", u,
		"--db-max-conns", "1", "--db-statement-timeout", "-1s", "--db-acquire-timeout", "300ms")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	admin, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	lock, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(context.Background()) }()
	if _, err := lock.Exec(ctx, "LOCK TABLE events IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	// An event of the current month, whose partition the migration made:
	// one of a month without a partition would make it first, which the
	// lock on events holds past lock_timeout (503, TestPartitionLockTimeoutAnswers503).
	// (Dated 2026-11-01, this test failed once the calendar left November.)
	stamp := time.Now().UTC().Format(time.RFC3339)
	ingestBody := func(id string) []byte {
		return fmt.Appendf(nil, `{"event_id":%q,"event_type":"volume.create.end","timestamp":%q,"platform":"openstack","cloud":%q,`+
			`"resource_type":"volume","resource_id":"v-%s","project_id":"p","source":"collector","payload":{"state":"available","size":{"size_gb":1,"type":"ssd"}}}`, id, stamp, e2eCloud, id)
	}

	type answer struct {
		status int
		body   []byte
	}
	held := make(chan answer, 1)
	go func() {
		status, _, b := call(t, "POST", d.base+"/api/v1/events", tokIngest, ingestBody("acq-held"))
		held <- answer{status, b}
	}()
	// The held request waits on the lock, holding the pool's one connection
	// (bounded wait for it to get there).
	waitForLockWait(ctx, t, admin, app)

	for _, r := range []struct{ method, path, token string }{
		{"POST", "/api/v1/events", tokIngest},
		{"GET", "/api/v1/resource-types", tokAdmin},
	} {
		var body []byte
		if r.method == "POST" {
			body = ingestBody("acq-shed")
		}
		status, hdr, b := call(t, r.method, d.base+r.path, r.token, body)
		var problem struct{ Code string }
		_ = json.Unmarshal(b, &problem)
		if status != 503 || hdr.Get("Content-Type") != "application/problem+json" || problem.Code != "store_unavailable" || hdr.Get("Retry-After") == "" {
			t.Errorf("%s %s with the pool's connection held: %d %q Retry-After %q %s; want 503 store_unavailable, a problem body and Retry-After",
				r.method, r.path, status, hdr.Get("Content-Type"), hdr.Get("Retry-After"), b)
		}
	}
	if status, _, b := call(t, "GET", d.base+"/readyz", "", nil); status != 200 {
		t.Errorf("/readyz with the pool's connection held: %d %s, want 200 (the pool is busy, the store reachable)", status, b)
	}

	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if a := <-held; a.status != 200 || !bytes.Contains(a.body, []byte(`"accepted":1`)) {
		t.Errorf("the held ingest after the lock: %d %s, want 200 accepting it", a.status, a.body)
	}
	if got, want := storedEventIDs(ctx, t, admin), []string{"acq-held"}; !cmp.Equal(want, got) {
		t.Errorf("events after the lock (-want +got):\n%s", cmp.Diff(want, got))
	}
	if status, _, b := call(t, "POST", d.base+"/api/v1/events", tokIngest, ingestBody("acq-shed")); status != 200 || !bytes.Contains(b, []byte(`"accepted":1`)) {
		t.Errorf("the shed ingest sent again: %d %s, want 200 accepting it", status, b)
	}
	if status, _, b := call(t, "GET", d.base+"/api/v1/resource-types", tokAdmin, nil); status != 200 {
		t.Errorf("GET /api/v1/resource-types after the lock: %d %s, want 200", status, b)
	}
	if got, want := storedEventIDs(ctx, t, admin), []string{"acq-held", "acq-shed"}; !cmp.Equal(want, got) {
		t.Errorf("events after the retry (-want +got):\n%s", cmp.Diff(want, got))
	}
}

// waitForLockWait waits (bounded by ctx and 500 polls) until a session
// whose application_name is app waits on a lock.
func waitForLockWait(ctx context.Context, t *testing.T, admin *pgx.Conn, app string) {
	t.Helper()
	for i := 0; ; i++ {
		var waiting int
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return
		}
		if i == 500 {
			t.Fatal("no request waited on the lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// storedEventIDs returns the event_id of every stored event, in order.
func storedEventIDs(ctx context.Context, t *testing.T, admin *pgx.Conn) []string {
	t.Helper()
	rows, err := admin.Query(ctx, `SELECT event_id FROM events ORDER BY event_id`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}
