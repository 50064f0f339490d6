package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/pgtest"
)

// The operations proofs (docs/operations.md, docs/testing.md) share this harness:
// replicas of tallyd on one database, clients that retry as a collector or
// a Meshery Server would, and checks on the database at the end. Every loop
// is bounded by a count and a deadline, and all traffic goes to loopback.

// longOps selects the longer forms of the proofs (TALLY_TEST_LONG=1); the
// ordinary `go test` run (and CI) runs the short ones.
func longOps() bool { return os.Getenv("TALLY_TEST_LONG") != "" }

// replicas holds the current base URL of each replica; a restarted replica
// listens on a new port.
type replicas struct {
	mu    sync.Mutex
	bases []string
}

func (r *replicas) base(i int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bases[i%len(r.bases)]
}

func (r *replicas) set(i int, base string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bases[i] = base
}

// opsPlan is what the clients send: events in overlapping batches (every
// event in two batches), and createEvents on a few correlation keys, each
// with its own idempotency key.
type opsPlan struct {
	events  [][]byte // raw canonical events
	ids     []string
	batches [][]int // indices into events
	creates []opsCreate
	perKey  map[string]int64 // creates sent per correlation key
}

type opsCreate struct{ key, idem string }

// newOpsPlan builds a plan over resources volumes, each with a create, then
// updates and, for every third, a delete; batches of batchSize events, each
// event in two batches, shuffled so late events reach the projection.
func newOpsPlan(resources, updates, batchSize, creates, keys int) opsPlan {
	rng := rand.New(rand.NewPCG(12, 13))
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var p opsPlan
	add := func(id, typ string, r int, at time.Time, payload string) {
		p.ids = append(p.ids, id)
		p.events = append(p.events, fmt.Appendf(nil,
			`{"event_id":%q,"event_type":%q,"timestamp":%q,"platform":"openstack","cloud":%q,"resource_type":"volume","resource_id":"v-%04d","project_id":"p-%d","source":"collector","payload":%s}`,
			id, typ, at.Format(time.RFC3339Nano), e2eCloud, r, r%5, payload))
	}
	for r := range resources {
		at := t0.Add(time.Duration(r) * time.Second)
		add(fmt.Sprintf("ops-%04d-c", r), "volume.create.end", r, at, `{"state":"available","size":{"size_gb":1,"type":"ssd"}}`)
		for u := range updates {
			state := []string{"in-use", "available"}[u%2]
			add(fmt.Sprintf("ops-%04d-u%d", r, u), "volume.attach.end", r, at.Add(time.Duration(u+1)*time.Minute),
				fmt.Sprintf(`{"state":%q,"size":{"size_gb":%d,"type":"ssd"}}`, state, u+2))
		}
		if r%3 == 0 {
			add(fmt.Sprintf("ops-%04d-d", r), "volume.delete.end", r, at.Add(time.Hour), `{"state":"deleted"}`)
		}
	}
	for pass := range 2 {
		order := rng.Perm(len(p.events))
		_ = pass
		for i := 0; i < len(order); i += batchSize {
			p.batches = append(p.batches, order[i:min(i+batchSize, len(order))])
		}
	}
	rng.Shuffle(len(p.batches), func(i, j int) { p.batches[i], p.batches[j] = p.batches[j], p.batches[i] })
	p.perKey = map[string]int64{}
	for i := range creates {
		k := fmt.Sprintf("db-%d/connection", i%keys)
		p.creates = append(p.creates, opsCreate{key: k, idem: fmt.Sprintf("ops-create-%05d", i)})
		p.perKey[k]++
	}
	return p
}

// opsStats counts what the clients saw.
type opsStats struct {
	attempts, retries, unavailable atomic.Int64
	// A 503 answer must carry a problem body and Retry-After.
	bad503 atomic.Int64
}

// sendWithRetry sends one request to replica pick, retrying on a transport
// error, 5xx or 429 (as a collector does), up to maxAttempts or the
// deadline. A 503 must carry Retry-After and a problem body. It returns the
// final status and body, or an error when it gave up.
func sendWithRetry(ctx context.Context, rs *replicas, pick int, st *opsStats, method, path, token string, body []byte, hdr ...string) (int, []byte, error) {
	const maxAttempts = 600
	client := &http.Client{Timeout: 30 * time.Second}
	var last error
	for attempt := range maxAttempts {
		if ctx.Err() != nil {
			return 0, nil, fmt.Errorf("%s %s: gave up at the deadline after %d attempts: %v", method, path, attempt, last)
		}
		if attempt > 0 {
			st.retries.Add(1)
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
		st.attempts.Add(1)
		req, err := http.NewRequestWithContext(ctx, method, rs.base(pick+attempt)+path, bytes.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			last = err
			continue
		}
		if resp.StatusCode == http.StatusServiceUnavailable {
			st.unavailable.Add(1)
			if resp.Header.Get("Retry-After") == "" || resp.Header.Get("Content-Type") != "application/problem+json" {
				st.bad503.Add(1)
			}
		}
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
			last = fmt.Errorf("%d %s", resp.StatusCode, b)
			continue
		}
		return resp.StatusCode, b, nil
	}
	return 0, nil, fmt.Errorf("%s %s: gave up after %d attempts: %v", method, path, maxAttempts, last)
}

// runPlan sends the whole plan with workers clients, spread over the
// replicas; progress receives the number of jobs done after each one.
func runPlan(ctx context.Context, rs *replicas, plan opsPlan, workers int, st *opsStats, progress func(done int)) []error {
	type job struct {
		batch  []int
		create *opsCreate
	}
	var jobs []job
	for i := range max(len(plan.batches), len(plan.creates)) {
		if i < len(plan.batches) {
			jobs = append(jobs, job{batch: plan.batches[i]})
		}
		if i < len(plan.creates) {
			jobs = append(jobs, job{create: &plan.creates[i]})
		}
	}
	ch := make(chan int)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		done atomic.Int64
	)
	for range workers {
		wg.Go(func() {
			for i := range ch {
				j := jobs[i]
				var err error
				if j.create != nil {
					body := fmt.Appendf(nil, `{"category":"connection","action":"failed","severity":"error","description":"unreachable","correlationKey":%q}`, j.create.key)
					var status int
					var b []byte
					status, b, err = sendWithRetry(ctx, rs, i, st, "POST", "/api/events", tokEvents, body, "Idempotency-Key", j.create.idem)
					if err == nil && status != 200 && status != 201 {
						err = fmt.Errorf("createEvent %s: %d %s", j.create.idem, status, b)
					}
				} else {
					var buf bytes.Buffer
					buf.WriteByte('[')
					for k, e := range j.batch {
						if k > 0 {
							buf.WriteByte(',')
						}
						buf.Write(plan.events[e])
					}
					buf.WriteByte(']')
					var status int
					var b []byte
					status, b, err = sendWithRetry(ctx, rs, i, st, "POST", "/api/v1/events", tokIngest, buf.Bytes())
					if err == nil {
						var res ingestResult
						if status != 200 || json.Unmarshal(b, &res) != nil || len(res.Rejected) > 0 || res.Accepted+res.Duplicates != len(j.batch) {
							err = fmt.Errorf("ingest batch %d: %d %.300s", i, status, b)
						}
					}
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
				if progress != nil {
					progress(int(done.Add(1)))
				}
			}
		})
	}
	for i := range jobs {
		select {
		case ch <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(ch)
	wg.Wait()
	return errs
}

// checkDatabase proves the end state on the database at url: every
// event stored once, the projection equal to the fold of the events (a
// rebuild from the events changes nothing), one open event per
// (organization, user, correlationKey), occurrence counts equal to the
// creates sent.
func checkDatabase(t *testing.T, url string, plan opsPlan) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	rows, err := conn.Query(ctx, `SELECT event_id, count(*) FROM events GROUP BY event_id ORDER BY event_id`)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var id string
		var n int
		if err := r.Scan(&id, &n); err != nil {
			return "", err
		}
		if n != 1 {
			return id + fmt.Sprintf(" (×%d)", n), nil
		}
		return id, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := append([]string(nil), plan.ids...)
	slices.Sort(want)
	if diff := cmp.Diff(want, stored); diff != "" {
		t.Errorf("events stored (each once) (-sent +stored):\n%s", diff)
	}

	snapshot := func() string {
		var s string
		if err := conn.QueryRow(ctx, `SELECT coalesce(json_agg(c ORDER BY cloud, resource_type, resource_id)::text, '[]') FROM current_resources c`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := snapshot()
	if err := run(ctx, []string{"projection", "rebuild"}, env(map[string]string{"TALLY_DATABASE_URL": url}), io.Discard, io.Discard); err != nil {
		t.Fatalf("projection rebuild: %v", err)
	}
	if diff := cmp.Diff(snapshot(), before); diff != "" {
		t.Errorf("the projection differs from the fold of the events (-fold +projection):\n%s", diff)
	}

	type keyCount struct {
		Open        int64
		Occurrences int64
	}
	got := map[string]keyCount{}
	rows, err = conn.Query(ctx, `SELECT correlation_key, count(*) FILTER (WHERE resolved_at IS NULL), coalesce(sum(occurrence_count), 0)
		FROM correlated_events WHERE deleted_at IS NULL AND organization = $1 AND user_id = 'alice' GROUP BY correlation_key`, e2eOrg)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		var c keyCount
		if err := rows.Scan(&k, &c.Open, &c.Occurrences); err != nil {
			t.Fatal(err)
		}
		got[k] = c
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	wantKeys := map[string]keyCount{}
	for k, n := range plan.perKey {
		wantKeys[k] = keyCount{Open: 1, Occurrences: n}
	}
	if diff := cmp.Diff(wantKeys, got); diff != "" {
		t.Errorf("correlated events per key: one open, occurrences as sent (-want +got):\n%s", diff)
	}
}

// "Two replicas, one database": two tallyd processes start at the
// same moment on a fresh database (both migrate), overlapping ingest
// batches and same-key createEvents go to both, one replica is killed with
// SIGKILL mid-stream and restarted while clients retry. At the end every
// event is stored once, the projection equals the fold of the events, there
// is one open event per (organization, user, key), and occurrence counts
// equal what was sent. TALLY_TEST_LONG=1 runs the longer form.
func TestTwoReplicasOneDatabase(t *testing.T) {
	url := pgtest.EmptyURL(t)
	creds := writeCredentials(t)
	resources, updates, batch, creates, workers := 60, 3, 40, 120, 6
	if longOps() {
		resources, updates, batch, creates, workers = 1500, 5, 250, 3000, 16
	}
	plan := newOpsPlan(resources, updates, batch, creates, 5)

	args := []string{"--database-url", url, "--credentials-file", creds}
	// Both start at once: launch both, then wait for both.
	d := []*daemon{launchTallyd(t, args...), launchTallyd(t, args...)}
	for _, x := range d {
		x.waitListening(t)
	}
	rs := &replicas{bases: []string{d[0].base, d[1].base}}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var (
		st     opsStats
		killed = make(chan struct{})
		once   sync.Once
		jobs   = len(plan.batches) + len(plan.creates)
	)
	errs := runPlanWithKill(ctx, t, rs, plan, workers, &st, func(done int) {
		if done >= jobs/3 {
			once.Do(func() { close(killed) })
		}
	}, killed, func() {
		// SIGKILL replica 1 mid-stream, then restart it on the same
		// database while the clients retry.
		_ = syscall.Kill(-d[1].cmd.Process.Pid, syscall.SIGKILL)
		<-d[1].done
		d[1] = launchTallyd(t, args...)
		d[1].waitListening(t)
		rs.set(1, d[1].base)
	})
	for _, err := range errs {
		t.Error(err)
	}
	t.Logf("%d jobs, %d attempts, %d retries, %d answers 503", jobs, st.attempts.Load(), st.retries.Load(), st.unavailable.Load())
	if n := st.bad503.Load(); n > 0 {
		t.Errorf("%d answers 503 without Retry-After or a problem body", n)
	}
	checkDatabase(t, url, plan)
}

// runPlanWithKill runs the plan and, once killAt is closed, runs kill (in
// the test's goroutine, which may call t.Fatal).
func runPlanWithKill(ctx context.Context, t *testing.T, rs *replicas, plan opsPlan, workers int, st *opsStats, progress func(int), killAt <-chan struct{}, kill func()) []error {
	t.Helper()
	result := make(chan []error, 1)
	go func() { result <- runPlan(ctx, rs, plan, workers, st, progress) }()
	select {
	case <-killAt:
		kill()
	case errs := <-result:
		return append(errs, fmt.Errorf("the plan finished before the kill"))
	}
	return <-result
}

// launchTallyd starts the binary on a free port without waiting for it.
func launchTallyd(t *testing.T, args ...string) *daemon {
	t.Helper()
	cmd := exec.Command(tallydBinary(t), append([]string{"--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	return launch(t, cmd)
}

// blackhole listens on loopback and accepts connections that it never
// answers, as a firewalled or hung database host does.
func blackhole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never read or written
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// "Blackholed database": with a database address that accepts
// and never answers, start (and `tallyd migrate`) exits non-zero with a
// clear message within the connect timeout.
func TestBlackholedDatabase(t *testing.T) {
	url := "postgres://tally@" + blackhole(t) + "/tally?sslmode=disable"
	creds := writeCredentials(t)
	for _, args := range [][]string{
		{"--credentials-file", creds},
		{"migrate"},
	} {
		t.Run(args[0], func(t *testing.T) {
			cmd := exec.Command(tallydBinary(t), append(args, "--listen", "127.0.0.1:0", "--database-url", url, "--db-connect-timeout", "1s")...)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			start := time.Now()
			var err error
			select {
			case err = <-done:
			case <-time.After(time.Minute): // a bound, far above the 1 s timeout
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("tallyd still running a minute after start with a 1 s connect timeout\n%s", stderr.String())
			}
			t.Logf("exited after %s: %v", time.Since(start).Round(time.Millisecond), err)
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("exit: %v, want a non-zero status\n%s", err, stderr.String())
			}
			for _, want := range []string{"database unreachable", "connect timeout (1s; --db-connect-timeout)", "timeout"} {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
				}
			}
		})
	}
}
