package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/internal/pgtest"
)

// The end-to-end test builds the real binary, starts it on both stores with
// a credentials file, and drives it over HTTP only: real OpenStack
// notifications through the collector's mapping, the 413, the 401, a scope
// violation read back from the audit log, a dead letter read back from
// rejected-events, the four dispositions with their header, and a graceful
// shutdown on SIGTERM.

var (
	buildMu  sync.Mutex
	binaries = map[string]string{} // package → built binary
	buildDir string
)

// buildBinary builds the command in pkg (relative to the repository root,
// such as ./cmd/tallyd) once per test binary and returns its path.
func buildBinary(t testing.TB, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := binaries[pkg]; ok {
		return p
	}
	if buildDir == "" {
		dir, err := os.MkdirTemp("", "tallyd-e2e-")
		if err != nil {
			t.Fatal(err)
		}
		buildDir = dir
	}
	out := filepath.Join(buildDir, filepath.Base(pkg))
	// go test puts the running toolchain's GOROOT/bin first in PATH.
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = repoRoot(t)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	binaries[pkg] = out
	return out
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

func tallydBinary(t testing.TB) string { return buildBinary(t, "./cmd/tallyd") }

// repoRoot is the directory holding go.mod.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// corpusPath is testdata/openstack/notifications.jsonl below the repository
// root. The corpus is part of the repository: without it the test fails.
func corpusPath(t *testing.T) string {
	t.Helper()
	p := filepath.Join(repoRoot(t), "testdata", "openstack", "notifications.jsonl")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the OpenStack corpus is part of the repository: %v", err)
	}
	return p
}

// corpus returns the canonical events the collector sends for the corpus,
// as the collector's golden file (testdata/openstack/notifications.golden.json,
// pinned by the oslo package's tests) holds them, moved to cloud: the
// server's tests read the mapping's result, not the mapping.
func corpus(t *testing.T, cloud string) (events []event.Event, unmappable int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(corpusPath(t)), "notifications.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var entries []struct {
		Event      *event.Event `json:"event"`
		Unmappable []string     `json:"unmappable"`
	}
	if err := json.Unmarshal(b, &entries); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Event == nil {
			unmappable++
			continue
		}
		e.Event.Cloud = cloud
		events = append(events, *e.Event)
	}
	return events, unmappable
}

const (
	tokIngest   = "e2e-ingest-token"
	tokOther    = "e2e-other-cloud-token"
	tokAdmin    = "e2e-admin-token-1"
	tokEvents   = "e2e-events-token"
	e2eCloud    = "os-e2e"
	otherCloud  = "os-other"
	e2eOrg      = "e2e-org"
	unknownTok  = "not-a-known-token"
	startupWait = 3 * time.Minute
)

func writeCredentials(t *testing.T) string {
	t.Helper()
	// token_sha256 for two entries, plain token for the others: both forms.
	file := fmt.Sprintf(`{"credentials":[
	  {"name":"collector-e2e","token_sha256":%q,"roles":["ingest"],"platform":"openstack","cloud":%q},
	  {"name":"collector-other","token":%q,"roles":["ingest"],"platform":"openstack","cloud":%q},
	  {"name":"operator","token_sha256":%q,"roles":["admin","read"]},
	  {"name":"app","token":%q,"roles":["events"],"organization":%q,"user":"alice"}
	]}`, shaHexOf(tokIngest), e2eCloud, tokOther, otherCloud, shaHexOf(tokAdmin), tokEvents, e2eOrg)
	p := filepath.Join(t.TempDir(), "credentials.json")
	if err := os.WriteFile(p, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// daemon is a running tallyd.
type daemon struct {
	cmd    *exec.Cmd
	base   string
	stdout *lockedBuffer
	stderr *lockedBuffer
	done   chan error  // receives the exit once; see exit
	addr   chan string // the announced base URL, once
}

// startTallyd starts the binary on a free port (--listen 127.0.0.1:0),
// with --store memory unless args give --database-url or --store, and
// waits for the line announcing where it listens.
func startTallyd(t *testing.T, args ...string) *daemon {
	t.Helper()
	if !slices.Contains(args, "--database-url") && !slices.Contains(args, "--store") && !slices.Contains(args, "--dev") {
		args = append([]string{"--store", "memory"}, args...)
	}
	cmd := exec.Command(tallydBinary(t), append([]string{"--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	return startCommand(t, cmd)
}

// startCommand starts cmd, a tallyd, in its own process group (so that a
// `go run` and the program it runs are stopped together) and waits for the
// line announcing where it listens.
func startCommand(t testing.TB, cmd *exec.Cmd) *daemon {
	t.Helper()
	d := launch(t, cmd)
	d.waitListening(t)
	return d
}

// launch starts cmd, a tallyd, in its own process group without waiting
// for it to listen (see waitListening); the process group is killed when
// the test ends.
func launch(t testing.TB, cmd *exec.Cmd) *daemon {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{cmd: cmd, stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan error, 1), addr: make(chan string, 1)}
	cmd.Stderr = d.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		re := regexp.MustCompile(`^tallyd listening on (https?://\S+)$`)
		for sc.Scan() {
			_, _ = d.stdout.Write(append(sc.Bytes(), '\n'))
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				d.addr <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { d.done <- cmd.Wait() }()
	t.Cleanup(func() {
		// The whole group: a no-op when it has exited.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-d.done:
		case <-time.After(10 * time.Second):
		}
		if t.Failed() {
			t.Logf("tallyd stderr:\n%s", d.stderr.String())
		}
	})
	return d
}

// waitListening waits for the line announcing where d listens and sets
// d.base.
func (d *daemon) waitListening(t testing.TB) {
	t.Helper()
	select {
	case d.base = <-d.addr:
	case err := <-d.done:
		d.done <- err
		t.Fatalf("tallyd exited before listening: %v\n%s", err, d.stderr.String())
	case <-time.After(startupWait):
		t.Fatalf("tallyd did not announce its address within %s\n%s", startupWait, d.stderr.String())
	}
}

// lockedBuffer is a bytes.Buffer safe for the writer goroutine of exec and
// the test reading it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// call sends one request and returns the status, headers and body.
func call(t *testing.T, method, url, token string, body []byte, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decodeInto[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

type ingestResult struct {
	Accepted   int `json:"accepted"`
	Duplicates int `json:"duplicates"`
	Rejected   []struct {
		Index   int    `json:"index"`
		EventID string `json:"event_id"`
		Reason  string `json:"reason"`
	} `json:"rejected"`
}

// metric reads one sample of the Prometheus text output, 0 when absent.
func metric(t *testing.T, base, series string) float64 {
	t.Helper()
	status, _, body := call(t, "GET", base+"/metrics", "", nil)
	if status != 200 {
		t.Fatalf("GET /metrics: %d", status)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metric %s: %v", line, err)
			}
			return f
		}
	}
	return 0
}

func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Run("memstore", func(t *testing.T) {
		t.Parallel()
		endToEnd(t)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		url := pgtest.URL(t)
		// The schema is migrated already: `tallyd migrate` says so.
		var out bytes.Buffer
		if err := run(context.Background(), []string{"migrate", "--database-url", url}, env(nil), &out, io.Discard); err != nil {
			t.Fatalf("tallyd migrate: %v", err)
		}
		if got := out.String(); got != "schema is current; no migration applied\n" {
			t.Errorf("tallyd migrate printed %q", got)
		}
		endToEnd(t, "--database-url", url)
	})
}

func endToEnd(t *testing.T, args ...string) {
	d := startTallyd(t, append([]string{"--credentials-file", writeCredentials(t), "--log-level", "debug"}, args...)...)
	base := d.base

	// Probes.
	for _, p := range []string{"/healthz", "/readyz", "/openapi.yaml"} {
		if status, _, body := call(t, "GET", base+p, "", nil); status != 200 {
			t.Errorf("GET %s: %d %s", p, status, body)
		}
	}

	// 401 before the body is read: no token, and an unknown token.
	for _, tok := range []string{"", unknownTok} {
		status, h, body := call(t, "POST", base+"/api/v1/events", tok, []byte(`not even json`))
		if status != 401 || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") ||
			!strings.HasPrefix(h.Get("Content-Type"), "application/problem+json") {
			t.Errorf("POST /api/v1/events with token %q: %d %q %s; want 401 with WWW-Authenticate: Bearer", tok, status, h.Get("WWW-Authenticate"), body)
		}
	}
	// 403: a credential without the route's role.
	if status, _, body := call(t, "POST", base+"/api/v1/events", tokEvents, []byte(`[]`)); status != 403 {
		t.Errorf("events credential on POST /api/v1/events: %d %s, want 403", status, body)
	}

	// Real notifications through the collector's mapping.
	events, unmappable := corpus(t, e2eCloud)
	t.Logf("corpus: %d events mapped, %d notifications unmappable", len(events), unmappable)
	if len(events) == 0 {
		t.Fatal("the corpus mapped to no event")
	}
	// "Idempotency is keyed on (event_id, timestamp)": the corpus repeats a
	// notification, which is then a duplicate within the batch.
	distinct := map[string]bool{}
	for _, e := range events {
		distinct[e.EventID+"|"+e.Timestamp.UTC().Format(time.RFC3339Nano)] = true
	}
	stored := len(distinct)
	// The collector itself posts them, twice: the second run stores nothing.
	collect := func() (accepted, duplicates, rejected int) {
		t.Helper()
		cmd := exec.Command(buildBinary(t, "./examples/openstack-collector"),
			"--cloud", e2eCloud, "--server", base, "--token", tokIngest, corpusPath(t))
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("openstack-collector: %v\n%s%s", err, out.String(), errOut.String())
		}
		m := regexp.MustCompile(`(?m)^summary: .*accepted (\d+), duplicates (\d+), rejected (\d+)$`).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("openstack-collector printed no summary:\n%s", out.String())
		}
		a, _ := strconv.Atoi(m[1])
		d, _ := strconv.Atoi(m[2])
		r, _ := strconv.Atoi(m[3])
		return a, d, r
	}
	// Lines 19 and 20 share (message_id, timestamp) but name two volumes: a
	// stored key whose event names another resource is not a duplicate, so
	// line 20 is refused as a conflict (and kept as a dead letter), on every
	// run.
	conflicts := len(events) - stored
	if a, d, r := collect(); a != stored || d != 0 || r != conflicts {
		t.Errorf("first collector run over %d mapped events (%d distinct): accepted %d, duplicates %d, rejected %d; want every distinct one accepted, %d conflict refused",
			len(events), stored, a, d, r, conflicts)
	}
	if a, d, r := collect(); a != 0 || d != stored || r != conflicts {
		t.Errorf("second collector run: accepted %d, duplicates %d, rejected %d; want %d duplicates, %d conflict", a, d, r, stored, conflicts)
	}
	if got := metric(t, base, "tally_ingest_events_ingested_total"); got != float64(stored) {
		t.Errorf("tally_ingest_events_ingested_total = %v, want %d", got, stored)
	}
	if got := metric(t, base, "tally_ingest_events_duplicate_total"); got != float64(stored) {
		t.Errorf("tally_ingest_events_duplicate_total = %v, want %d", got, stored)
	}

	// The projection holds one row per resource the stored events name, each
	// the in-order fold of its history.
	// Only the first of the pair sharing a key is stored (lines 19 and 20
	// share (message_id, timestamp); line 20 is a conflict, so its volume has
	// no row).
	keys, seen := map[string]bool{}, map[string]bool{}
	for _, e := range events {
		if pair := e.EventID + "|" + e.Timestamp.UTC().Format(time.RFC3339Nano); !seen[pair] {
			seen[pair] = true
			keys[e.Cloud+"/"+e.ResourceType+"/"+e.ResourceID] = true
		}
	}
	status, _, body := call(t, "GET", base+"/api/v1/resources?status=all&limit=1000", tokAdmin, nil)
	type resourcePage struct {
		Items []struct {
			Cloud        string `json:"cloud"`
			ResourceType string `json:"resource_type"`
			ResourceID   string `json:"resource_id"`
		} `json:"items"`
	}
	rows := map[string]bool{}
	for _, r := range decodeInto[resourcePage](t, body).Items {
		rows[r.Cloud+"/"+r.ResourceType+"/"+r.ResourceID] = true
	}
	if diff := cmp.Diff(keys, rows); status != 200 || diff != "" {
		t.Errorf("GET /api/v1/resources: %d; rows (-stored resources +rows):\n%s", status, diff)
	}
	// The versioned nova instance (lines 1-9) ends deleted.
	status, _, body = call(t, "GET", base+"/api/v1/resources/"+e2eCloud+"/instance/178b0921-8f85-4257-88b6-2e743b5a975c", tokAdmin, nil)
	if status != 200 || !bytes.Contains(body, []byte(`"state":"deleted"`)) || !bytes.Contains(body, []byte(`"events":[`)) {
		t.Errorf("GET the nova instance's row: %d %s; want it deleted, with its history", status, body)
	}

	// 413: 1001 items, nothing stored.
	fresh := make([]event.Event, 1001)
	for i := range fresh {
		e := events[0]
		e.EventID = fmt.Sprintf("e2e-413-%d", i)
		fresh[i] = e
	}
	if status, _, body := call(t, "POST", base+"/api/v1/events", tokIngest, mustJSON(t, fresh)); status != 413 {
		t.Errorf("1001 items: %d %s, want 413", status, body)
	}
	if got := metric(t, base, "tally_ingest_events_ingested_total"); got != float64(stored) {
		t.Errorf("after the 413, tally_ingest_events_ingested_total = %v, want still %d", got, stored)
	}

	// A scope violation: the other cloud's collector posts an os-e2e event.
	stray := events[0]
	stray.EventID = "e2e-stray"
	status, _, body = call(t, "POST", base+"/api/v1/events", tokOther, mustJSON(t, stray))
	res := decodeInto[ingestResult](t, body)
	if status != 200 || len(res.Rejected) != 1 || res.Rejected[0].Reason != `scope: /cloud: scope: cloud "os-e2e" is outside this credential's openstack/os-other` {
		t.Errorf("out-of-scope post: %d %s; want one item refused scope", status, body)
	}
	status, _, body = call(t, "GET", base+"/api/v1/audit?action=events.scope_violation", tokAdmin, nil)
	type auditPage struct {
		Items []struct {
			Action     string `json:"action"`
			Credential string `json:"credential"`
			EventID    string `json:"event_id"`
			Platform   string `json:"platform"`
			Cloud      string `json:"cloud"`
		} `json:"items"`
		NextCursor *string `json:"next_cursor"`
	}
	audit := decodeInto[auditPage](t, body)
	if status != 200 || len(audit.Items) != 1 {
		t.Fatalf("GET /api/v1/audit: %d %s; want one scope violation", status, body)
	}
	if a := audit.Items[0]; a.Action != "events.scope_violation" || a.Credential != "collector-other" ||
		a.EventID != "e2e-stray" || a.Cloud != e2eCloud || a.Platform != "openstack" {
		t.Errorf("audit row %+v", a)
	}
	if status, _, _ := call(t, "GET", base+"/api/v1/audit", tokIngest, nil); status != 403 {
		t.Errorf("ingest credential on GET /api/v1/audit: %d, want 403", status)
	}

	// A dead letter: an item that is not a canonical event.
	bad := `{"event_id":"e2e-bad","timestamp":"yesterday"}`
	status, _, body = call(t, "POST", base+"/api/v1/events", tokIngest, []byte(`[`+bad+`]`))
	res = decodeInto[ingestResult](t, body)
	if status != 200 || len(res.Rejected) != 1 || !strings.HasPrefix(res.Rejected[0].Reason, "schema: ") || res.Rejected[0].EventID != "e2e-bad" {
		t.Fatalf("invalid item: %d %s; want one item refused schema", status, body)
	}
	status, _, body = call(t, "GET", base+"/api/v1/rejected-events?limit=10", tokAdmin, nil)
	type deadLetterPage struct {
		Items []struct {
			ID         string          `json:"id"`
			Raw        json.RawMessage `json:"raw"`
			Reason     string          `json:"reason"`
			ReceivedAt time.Time       `json:"received_at"`
		} `json:"items"`
		NextCursor *string `json:"next_cursor"`
	}
	dl := decodeInto[deadLetterPage](t, body)
	// The two conflicts of the collector's runs, then the invalid item.
	if status != 200 || len(dl.Items) != 2*conflicts+1 {
		t.Fatalf("GET /api/v1/rejected-events: %d %s; want %d dead letters", status, body, 2*conflicts+1)
	}
	for _, it := range dl.Items[:2*conflicts] {
		if !strings.HasPrefix(it.Reason, "conflict: /event_id: ") {
			t.Errorf("dead letter %s: reason %q, want a conflict", it.ID, it.Reason)
		}
	}
	if it := dl.Items[2*conflicts]; it.Reason != res.Rejected[0].Reason || !bytes.Contains(it.Raw, []byte("e2e-bad")) || it.ReceivedAt.IsZero() {
		t.Errorf("dead letter %s", body)
	}
	if status, _, body := call(t, "GET", base+"/api/v1/rejected-events?cursor=%21%21", tokAdmin, nil); status != 400 {
		t.Errorf("malformed cursor: %d %s, want 400", status, body)
	}
	if got := metric(t, base, `tally_ingest_events_rejected_total{reason="scope"}`); got != 1 {
		t.Errorf(`tally_ingest_events_rejected_total{reason="scope"} = %v, want 1`, got)
	}
	if got := metric(t, base, `tally_ingest_events_rejected_total{reason="schema"}`); got != 1 {
		t.Errorf(`tally_ingest_events_rejected_total{reason="schema"} = %v, want 1`, got)
	}

	// The four dispositions, each with its header.
	type created struct {
		ID              string     `json:"id"`
		OccurrenceCount *int64     `json:"occurrenceCount"`
		ResolvedAt      *time.Time `json:"resolvedAt"`
	}
	post := func(payload string, hdr ...string) (int, string, created) {
		t.Helper()
		status, h, body := call(t, "POST", base+"/api/events", tokEvents, []byte(payload), hdr...)
		if status/100 != 2 {
			t.Fatalf("POST /api/events %s: %d %s", payload, status, body)
		}
		return status, h.Get("Event-Disposition"), decodeInto[created](t, body)
	}
	type answer struct {
		Status      int
		Disposition string
	}
	var got []answer
	s1, d1, e1 := post(`{"category":"connection","action":"fail","severity":"error","description":"db unreachable","correlationKey":"db-1"}`)
	got = append(got, answer{s1, d1})
	s2, d2, e2 := post(`{"category":"connection","action":"fail","severity":"error","description":"db unreachable","correlationKey":"db-1"}`)
	got = append(got, answer{s2, d2})
	s3, d3, e3 := post(`{"category":"connection","action":"fail","severity":"informational","description":"db back","correlationKey":"db-1","resolvedAt":"2026-01-02T03:04:05Z"}`)
	got = append(got, answer{s3, d3})
	s4, d4, e4 := post(`{"category":"deploy","action":"start","description":"rollout"}`, "Idempotency-Key", "deploy-7")
	got = append(got, answer{s4, d4})
	s5, d5, e5 := post(`{"category":"deploy","action":"start","description":"rollout"}`, "Idempotency-Key", "deploy-7")
	got = append(got, answer{s5, d5})
	want := []answer{{201, "created"}, {200, "incremented"}, {200, "resolved"}, {201, "created"}, {200, "replayed"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("createEvent answers (-want +got):\n%s", d)
	}
	if e1.ID != e2.ID || e2.ID != e3.ID || e2.OccurrenceCount == nil || *e2.OccurrenceCount != 2 {
		t.Errorf("the occurrence was not counted on the open event: %+v %+v %+v", e1, e2, e3)
	}
	if e4.ID != e5.ID {
		t.Errorf("the replay returned event %s, want %s", e5.ID, e4.ID)
	}
	for _, d := range []string{"created", "incremented", "resolved", "replayed"} {
		w := 1.0
		if d == "created" {
			w = 2
		}
		if got := metric(t, base, `tally_correlate_dispositions_total{disposition="`+d+`"}`); got != w {
			t.Errorf("tally_correlate_dispositions_total{disposition=%q} = %v, want %v", d, got, w)
		}
	}
	status, _, body = call(t, "GET", base+"/api/events/list?pageSize=10", tokEvents, nil)
	type page struct {
		TotalCount int64             `json:"totalCount"`
		Data       []json.RawMessage `json:"data"`
	}
	if p := decodeInto[page](t, body); status != 200 || p.TotalCount != 2 || len(p.Data) != 2 {
		t.Errorf("GET /api/events/list: %d %s; want the caller's 2 events", status, body)
	}
	if status, _, body := call(t, "PUT", base+"/api/events/"+e4.ID+"/status", tokEvents, []byte(`{"status":"read"}`)); status != 200 {
		t.Errorf("PUT status: %d %s", status, body)
	}
	if status, _, body := call(t, "DELETE", base+"/api/events/"+e4.ID, tokEvents, nil); status != 204 {
		t.Errorf("DELETE: %d %s", status, body)
	}
	if status, _, _ := call(t, "DELETE", base+"/api/events/"+e4.ID, tokEvents, nil); status != 404 {
		t.Errorf("second DELETE: %d, want 404", status)
	}
	if got := metric(t, base, `tally_http_request_duration_seconds_count{code="201",route="POST /api/events"}`); got != 2 {
		t.Errorf("request duration count of POST /api/events 201 = %v, want 2", got)
	}

	// Graceful shutdown: SIGTERM, exit status 0.
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-d.done:
		d.done <- err // for the cleanup
		if err != nil {
			t.Errorf("tallyd after SIGTERM: %v, want exit status 0\n%s", err, d.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("tallyd did not exit within 30s of SIGTERM")
	}
	if !strings.Contains(d.stderr.String(), "stopped") {
		t.Errorf("tallyd did not log its shutdown:\n%s", d.stderr.String())
	}
}

func shaHexOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
