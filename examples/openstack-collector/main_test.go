package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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
)

// corpusPath finds testdata/openstack/notifications.jsonl in the repository
// (below the directory holding go.mod); the test fails when it is missing.
func corpusPath(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
	p := filepath.Join(dir, "testdata", "openstack", "notifications.jsonl")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the OpenStack corpus is part of the repository: %v", err)
	}
	return p
}

// fakeIngest stands in for POST /api/v1/events: it checks the token,
// decodes each item strictly, refuses the items event.Validate refuses, and
// counts a repeated (event_id, timestamp) as a duplicate. Statuses, when
// set, are answered first, one per request.
type fakeIngest struct {
	t        *testing.T
	token    string
	statuses []int

	mu        sync.Mutex
	requests  int
	sizes     []int    // items per request
	bodies    []int    // bytes per request, decoded
	encodings []string // Content-Encoding per request
	seen      map[string]bool
}

func (f *fakeIngest) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests++
	if r.Method != http.MethodPost || r.URL.Path != "/api/v1/events" {
		f.t.Errorf("%s %s, want POST /api/v1/events", r.Method, r.URL.Path)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+f.token {
		w.Header().Set("WWW-Authenticate", "Bearer")
		http.Error(w, `{"status":401}`, http.StatusUnauthorized)
		return
	}
	if len(f.statuses) > 0 {
		st := f.statuses[0]
		f.statuses = f.statuses[1:]
		http.Error(w, fmt.Sprintf(`{"status":%d}`, st), st)
		return
	}
	var rd io.Reader = r.Body
	f.encodings = append(f.encodings, r.Header.Get("Content-Encoding"))
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			f.t.Error(err)
			return
		}
		rd = zr
	}
	body, err := io.ReadAll(rd)
	if err != nil {
		f.t.Error(err)
		return
	}
	f.bodies = append(f.bodies, len(body)) // decoded, as tally's cap counts
	var items []jsontext.Value
	if err := json.Unmarshal(body, &items); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.sizes = append(f.sizes, len(items))
	if f.seen == nil {
		f.seen = map[string]bool{}
	}
	res := ingest.Result{Rejected: []ingest.Rejection{}}
	for i, it := range items {
		ev, err := event.Decode(it)
		if err == nil {
			err = event.Validate(&ev)
		}
		if err != nil {
			res.Rejected = append(res.Rejected, ingest.Rejection{Index: i, EventID: ev.EventID, Reason: "schema: " + err.Error()})
			continue
		}
		key := ev.EventID + "@" + ev.Timestamp.Format(time.RFC3339Nano)
		if f.seen[key] {
			res.Duplicates++
			continue
		}
		f.seen[key] = true
		res.Accepted++
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.MarshalWrite(w, res)
}

type runResult struct {
	err            error
	stdout, stderr string
}

func runCollector(t *testing.T, stdin string, args ...string) runResult {
	t.Helper()
	var out, errOut bytes.Buffer
	getenv := func(string) string { return "" }
	err := run(context.Background(), args, getenv, strings.NewReader(stdin), &out, &errOut)
	return runResult{err, out.String(), errOut.String()}
}

func serve(t *testing.T, f *fakeIngest) string {
	t.Helper()
	f.t = t
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv.URL
}

// fast are the flags every sending test adds: tiny backoff.
var fast = []string{"--retry-delay", "1ms", "--timeout", "5s"}

func TestDryRunCorpus(t *testing.T) {
	r := runCollector(t, "", "--cloud", "os-demo", "--dry-run", corpusPath(t))
	if r.err != nil {
		t.Fatal(r.err, r.stderr)
	}
	var n int
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		n++
		ev, err := event.Decode(sc.Bytes())
		if err != nil {
			t.Fatalf("event %d: %v", n, err)
		}
		if err := event.Validate(&ev); err != nil {
			t.Errorf("event %d: %v", n, err)
		}
	}
	if n != 28 {
		t.Errorf("%d events printed, want 28", n)
	}
	for _, want := range []string{
		"notifications.jsonl:24: unmappable, not sent: state: payload.floatingip.status is missing",
		`notifications.jsonl:26: unmappable, not sent: timestamp: "2014-05-3107: 19: 43.463101"`,
		"summary: notifications 30, mapped 28, unmappable 2, invalid 0 (dry run, nothing sent)",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
}

// TestSendCorpus posts the 30 real notifications: 28 events in one batch;
// lines 19 and 20 share (message_id, timestamp), which "is the (event_id,
// timestamp) duplicate the spec describes: ingesting both stores one".
func TestSendCorpus(t *testing.T) {
	f := &fakeIngest{token: "tok"}
	url := serve(t, f)
	r := runCollector(t, "", append(fast, "--cloud", "os-demo", "--server", url, "--token", "tok", corpusPath(t))...)
	if r.err != nil {
		t.Fatal(r.err, r.stderr)
	}
	want := "batch 1: 28 events: accepted 27, duplicates 1, rejected 0\n" +
		"summary: notifications 30, mapped 28, unmappable 2, invalid 0; sent 28 in 1 batches (1 requests): accepted 27, duplicates 1, rejected 0\n"
	if diff := cmp.Diff(want, r.stdout); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	// Replaying the file stores nothing twice.
	r = runCollector(t, "", append(fast, "--cloud", "os-demo", "--server", url, "--token", "tok", corpusPath(t))...)
	if r.err != nil || !strings.Contains(r.stdout, "accepted 0, duplicates 28, rejected 0") {
		t.Errorf("replay: %v\n%s", r.err, r.stdout)
	}
}

// synthetic returns n distinct wire notifications of volume updates.
func synthetic(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"message_id":"m-%d","timestamp":"2020-01-02 03:04:05.%06d","event_type":"volume.attach.end","publisher_id":"volume.h","_context_project_id":"p","payload":{"volume_id":"v-%d","tenant_id":"p","status":"in-use","size":1,"volume_type":"t"}}`+"\n", i, i%1000000, i)
	}
	return b.String()
}

func TestBatching(t *testing.T) {
	f := &fakeIngest{token: "tok"}
	url := serve(t, f)
	r := runCollector(t, synthetic(2001), append(fast, "--cloud", "c", "--server", url, "--token", "tok")...)
	if r.err != nil {
		t.Fatal(r.err, r.stderr)
	}
	if diff := cmp.Diff([]int{1000, 1000, 1}, f.sizes); diff != "" {
		t.Errorf("batch sizes (-want +got):\n%s", diff)
	}
	if !strings.Contains(r.stdout, "sent 2001 in 3 batches (3 requests): accepted 2001, duplicates 0, rejected 0") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
}

// Transport: "The OpenStack collector sends gzip by default,
// with a flag to turn it off."
func TestGzip(t *testing.T) {
	for _, tt := range []struct {
		flags []string
		want  string
	}{
		{nil, "gzip"},
		{[]string{"--gzip=false"}, ""},
	} {
		f := &fakeIngest{token: "tok"}
		url := serve(t, f)
		r := runCollector(t, synthetic(3), append(append(fast, "--cloud", "c", "--server", url, "--token", "tok"), tt.flags...)...)
		if r.err != nil {
			t.Fatal(r.err, r.stderr)
		}
		if diff := cmp.Diff([]string{tt.want}, f.encodings); diff != "" || !strings.Contains(r.stdout, "accepted 3") {
			t.Errorf("%v: Content-Encoding per request (-want +got):\n%s\n%s", tt.flags, diff, r.stdout)
		}
	}
}

func TestBatchBytes(t *testing.T) {
	f := &fakeIngest{token: "tok"}
	url := serve(t, f)
	// Each event encodes to roughly 400 bytes: 2 KiB holds a few.
	r := runCollector(t, synthetic(20), append(fast, "--cloud", "c", "--server", url, "--token", "tok", "--max-batch-bytes", "2048")...)
	if r.err != nil {
		t.Fatal(r.err, r.stderr)
	}
	var total int
	for i, n := range f.sizes {
		total += n
		if f.bodies[i] > 2048 {
			t.Errorf("request %d has %d bytes, over --max-batch-bytes 2048", i+1, f.bodies[i])
		}
	}
	if total != 20 || len(f.sizes) < 4 {
		t.Errorf("batch sizes %v, want 20 events in several batches", f.sizes)
	}
}

// TestRetry5xx: transport failures and 5xx are retried, with a bounded
// number of attempts.
func TestRetry5xx(t *testing.T) {
	t.Run("503 twice, then success", func(t *testing.T) {
		f := &fakeIngest{token: "tok", statuses: []int{503, 503}}
		url := serve(t, f)
		r := runCollector(t, synthetic(3), append(fast, "--cloud", "c", "--server", url, "--token", "tok")...)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if f.requests != 3 || !strings.Contains(r.stdout, "batch 1: 3 events: accepted 3, duplicates 0, rejected 0") {
			t.Errorf("%d requests, stdout:\n%s", f.requests, r.stdout)
		}
	})
	t.Run("500 every time: gives up after --max-attempts", func(t *testing.T) {
		f := &fakeIngest{token: "tok", statuses: []int{500, 500, 500, 500, 500}}
		url := serve(t, f)
		r := runCollector(t, synthetic(3), append(fast, "--cloud", "c", "--server", url, "--token", "tok", "--max-attempts", "3")...)
		if r.err == nil || !strings.Contains(r.err.Error(), "giving up after 3 attempts") {
			t.Fatalf("err = %v", r.err)
		}
		if f.requests != 3 {
			t.Errorf("%d requests, want 3", f.requests)
		}
	})
	t.Run("transport failure, then success", func(t *testing.T) {
		f := &fakeIngest{token: "tok", t: t}
		var mu sync.Mutex
		calls := 0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			calls++
			first := calls == 1
			mu.Unlock()
			if first { // drop the connection without an answer
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					conn.Close()
				}
				return
			}
			f.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		r := runCollector(t, synthetic(2), append(fast, "--cloud", "c", "--server", srv.URL, "--token", "tok")...)
		if r.err != nil {
			t.Fatal(r.err)
		}
		mu.Lock()
		n := calls
		mu.Unlock()
		if n != 2 || !strings.Contains(r.stdout, "accepted 2") {
			t.Errorf("%d calls, stdout:\n%s", n, r.stdout)
		}
	})
	t.Run("server unreachable", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		r := runCollector(t, synthetic(1), append(fast, "--cloud", "c", "--server", url, "--token", "tok", "--max-attempts", "2")...)
		if r.err == nil || !strings.Contains(r.err.Error(), "giving up after 2 attempts") {
			t.Fatalf("err = %v", r.err)
		}
	})
}

// TestNoRetry4xx: a 4xx is never retried, and the run fails.
func TestNoRetry4xx(t *testing.T) {
	for _, st := range []int{400, 401, 403} {
		t.Run(fmt.Sprint(st), func(t *testing.T) {
			f := &fakeIngest{token: "tok", statuses: []int{st, st, st}}
			url := serve(t, f)
			r := runCollector(t, synthetic(2), append(fast, "--cloud", "c", "--server", url, "--token", "tok")...)
			if r.err == nil || !strings.Contains(r.err.Error(), fmt.Sprintf("answered %d", st)) {
				t.Fatalf("err = %v", r.err)
			}
			if f.requests != 1 {
				t.Errorf("%d requests, want 1", f.requests)
			}
		})
	}
	t.Run("wrong token", func(t *testing.T) {
		f := &fakeIngest{token: "right"}
		url := serve(t, f)
		r := runCollector(t, synthetic(1), append(fast, "--cloud", "c", "--server", url, "--token", "wrong")...)
		if r.err == nil || !strings.Contains(r.err.Error(), "401") || f.requests != 1 {
			t.Fatalf("err = %v after %d requests", r.err, f.requests)
		}
	})
}

// TestHalvesOn413: a batch answered 413 is halved down to one event; an
// event still refused alone is reported too large, the rest sent.
func TestHalvesOn413(t *testing.T) {
	f := &fakeIngest{token: "tok", statuses: []int{413, 413, 413}}
	url := serve(t, f)
	r := runCollector(t, synthetic(4), append(fast, "--cloud", "c", "--server", url, "--token", "tok")...)
	if r.err != nil {
		t.Fatal(r.err)
	}
	// 4 → 413, 2 → 413, 1 → 413 (too large alone), then 1 and 2 fit.
	if diff := cmp.Diff([]int{1, 2}, f.sizes); diff != "" || f.requests != 5 {
		t.Errorf("%d requests; sizes of the answered ones (-want +got):\n%s", f.requests, diff)
	}
	want := "batch 1: 4 events: accepted 3, duplicates 0, rejected 0, too large 1\n"
	if !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "  too_large: <stdin>:1 (index 0, event_id m-0): too_large: ") {
		t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
	}
}

// TestRefusedNotRetried: "A collector may drop the whole batch from its
// buffer once the call returns, and must not retry a refused item."
func TestRefusedNotRetried(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"accepted":1,"duplicates":0,"rejected":[{"index":1,"event_id":"m-1","reason":"size_schema: /size_gb: must be > 0"}]}`)
	}))
	t.Cleanup(srv.Close)
	r := runCollector(t, synthetic(2), append(fast, "--cloud", "c", "--server", srv.URL, "--token", "tok")...)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d calls, want 1", n)
	}
	want := "  rejected: <stdin>:2 (index 1, event_id m-1): size_schema: /size_gb: must be > 0\n"
	if !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "rejected 1\n") {
		t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
	}
}

func TestFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string // substring of the error; "" for none
	}{
		{"cloud required", []string{"--dry-run"}, nil, "--cloud is required"},
		{"token required to send", []string{"--cloud", "c"}, nil, "a token is required"},
		{"token from TALLY_TOKEN", []string{"--cloud", "c"}, map[string]string{"TALLY_TOKEN": "t"}, ""},
		{"cloud from TALLY_CLOUD", []string{"--dry-run"}, map[string]string{"TALLY_CLOUD": "c"}, ""},
		{"batch size bounded", []string{"--cloud", "c", "--dry-run", "--batch-size", "1001"}, nil, "--batch-size must be 1 to 1000"},
		{"server must be a URL", []string{"--cloud", "c", "--dry-run", "--server", "localhost:8080"}, nil, "must be an http or https URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string { return tt.env[k] }
			cfg, err := parseFlags(tt.args, getenv, &bytes.Buffer{})
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if cfg.cloud != "c" {
					t.Errorf("cloud %q", cfg.cloud)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
	// The flag wins over the environment.
	env := map[string]string{"TALLY_TOKEN": "env", "TALLY_CLOUD": "env", "TALLY_SERVER": "http://env:1"}
	cfg, err := parseFlags([]string{"--cloud", "c", "--token", "flag"}, func(k string) string { return env[k] }, &bytes.Buffer{})
	if err != nil || cfg.token != "flag" || cfg.cloud != "c" || cfg.server != "http://env:1" {
		t.Errorf("cfg = %+v, err = %v", cfg, err)
	}
}
