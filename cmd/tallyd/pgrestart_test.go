package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// throwaway is a PostgreSQL cluster of the test's own, in a temporary
// directory, on its own loopback port, so that the test may stop and start
// it ("PostgreSQL restart under load").
type throwaway struct {
	bin, dir string
	port     int
	asUser   []string // the runuser prefix when the test runs as root
}

// newThrowaway initdbs and starts a cluster. Without PostgreSQL's server
// binaries it skips with a message, unless CI is set: then it fails.
func newThrowaway(t *testing.T) *throwaway {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if b := os.Getenv("TALLY_PG_BIN"); b != "" {
		bins = []string{filepath.Join(b, "pg_ctl")}
	}
	slices.Sort(bins)
	if len(bins) == 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("the PostgreSQL restart test needs initdb and pg_ctl (/usr/lib/postgresql/*/bin or TALLY_PG_BIN), and CI is set")
		}
		t.Skip("the PostgreSQL restart test needs initdb and pg_ctl (/usr/lib/postgresql/*/bin or TALLY_PG_BIN); skipping")
	}
	c := &throwaway{bin: filepath.Dir(bins[len(bins)-1])}
	dir, err := os.MkdirTemp("", "tally-pg-")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		// initdb refuses root: run the cluster as the postgres user.
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, the cluster needs the postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		c.asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.port = ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()

	c.run(t, "initdb", "-D", c.data(), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
	c.start(t)
	t.Cleanup(func() { _, _ = c.cmd("pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "stop").CombinedOutput() })
	return c
}

func (c *throwaway) data() string { return filepath.Join(c.dir, "data") }

func (c *throwaway) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

func (c *throwaway) cmd(name string, args ...string) *exec.Cmd {
	argv := append(append(slices.Clone(c.asUser), filepath.Join(c.bin, name)), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = c.dir
	return cmd
}

func (c *throwaway) run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := c.cmd(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// start starts the cluster and waits until it accepts connections.
func (c *throwaway) start(t *testing.T) {
	t.Helper()
	c.run(t, "pg_ctl", "-D", c.data(), "-l", filepath.Join(c.dir, "log"), "-w", "-t", "60",
		"-o", fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -k %s -c fsync=off", c.port, c.dir), "start")
}

// stop stops it (fast shutdown: sessions are ended, as in a restart).
func (c *throwaway) stop(t *testing.T) {
	t.Helper()
	c.run(t, "pg_ctl", "-D", c.data(), "-m", "fast", "-w", "-t", "60", "stop")
}

// "PostgreSQL restart under load": a throwaway cluster is stopped
// and started while clients send ingest batches and createEvents. While it
// is down, requests get 503 with a problem body and Retry-After, and
// readiness is 503; afterwards tallyd recovers without a restart (the first
// request succeeds), and after the clients' retries nothing is lost or
// doubled.
func TestPostgresRestartUnderLoad(t *testing.T) {
	pg := newThrowaway(t)
	url := pg.url()
	creds := writeCredentials(t)
	d := startTallyd(t, "--database-url", url, "--credentials-file", creds, "--db-connect-timeout", "2s")
	rs := &replicas{bases: []string{d.base}}

	resources, creates, workers := 40, 80, 4
	if longOps() {
		resources, creates, workers = 800, 2000, 12
	}
	plan := newOpsPlan(resources, 3, 40, creates, 4)
	probe := plan.events[0] // sent alone while the database is down

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var (
		st   opsStats
		down = make(chan struct{})
		once sync.Once
		jobs = len(plan.batches) + len(plan.creates)
	)
	errs := runPlanWithKill(ctx, t, rs, plan, workers, &st, func(done int) {
		if done >= jobs/3 {
			once.Do(func() { close(down) })
		}
	}, down, func() {
		pg.stop(t)
		// While it is down: 503, a problem body, Retry-After; readiness 503.
		for _, r := range []struct{ method, path, token string }{
			{"POST", "/api/v1/events", tokIngest},
			{"POST", "/api/events", tokEvents},
			{"GET", "/readyz", ""},
		} {
			body := probe
			if r.path == "/api/events" {
				body = []byte(`{"category":"connection","action":"failed","correlationKey":"down-probe"}`)
			} else if r.method == "GET" {
				body = nil
			}
			status, hdr, b := call(t, r.method, d.base+r.path, r.token, body)
			if status != 503 || hdr.Get("Content-Type") != "application/problem+json" {
				t.Errorf("%s %s while PostgreSQL is down: %d %s %s, want 503 with a problem body", r.method, r.path, status, hdr.Get("Content-Type"), b)
			}
			if r.path != "/readyz" && hdr.Get("Retry-After") == "" {
				t.Errorf("%s %s while PostgreSQL is down: no Retry-After", r.method, r.path)
			}
		}
		if status, _, _ := call(t, "GET", d.base+"/healthz", "", nil); status != 200 {
			t.Errorf("/healthz while PostgreSQL is down: %d, want 200 (liveness does not depend on the store)", status)
		}
		pg.start(t)
		// The first request after the database is back succeeds.
		if status, _, b := call(t, "POST", d.base+"/api/v1/events", tokIngest, probe); status != 200 {
			t.Errorf("the first ingest after the restart: %d %s", status, b)
		}
		if status, _, b := call(t, "GET", d.base+"/readyz", "", nil); status != 200 {
			t.Errorf("readiness after the restart: %d %s", status, b)
		}
	})
	for _, err := range errs {
		t.Error(err)
	}
	t.Logf("%d jobs, %d attempts, %d retries, %d answers 503", jobs, st.attempts.Load(), st.retries.Load(), st.unavailable.Load())
	if n := st.bad503.Load(); n > 0 {
		t.Errorf("%d answers 503 without Retry-After or a problem body", n)
	}
	if err := syscall.Kill(d.cmd.Process.Pid, 0); err != nil {
		t.Errorf("tallyd is gone: %v", err)
	}
	checkDatabase(t, url, plan)
}
