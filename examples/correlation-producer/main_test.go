package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/correlate/correlatehttp"
	"github.com/tallyhq/tally/route"
	"github.com/tallyhq/tally/store/memstore"
)

// server is the library's createEvent handler on the in-memory store, with
// one bearer token.
func server(t *testing.T, wrap func(http.Handler) http.Handler) *httptest.Server {
	t.Helper()
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := correlate.New(db.Correlate(), correlate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := correlatehttp.New(svc, correlatehttp.Options{
		CallerFrom: func(r *http.Request) (correlate.Caller, bool) {
			return correlate.Caller{Organization: "org", User: "u"}, r.Header.Get("Authorization") == "Bearer secret"
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	route.Mount(mux, h.Routes(), func(rt route.Route) http.Handler { return rt.Handler })
	var handler http.Handler = mux
	if wrap != nil {
		handler = wrap(mux)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return srv
}

func TestRunPrintsEachDisposition(t *testing.T) {
	srv := server(t, nil)
	var out bytes.Buffer
	err := run(context.Background(), []string{"--server", srv.URL, "--occurrences", "3"},
		func(k string) string { return map[string]string{"TALLY_TOKEN": "secret"}[k] }, &out)
	if err != nil {
		t.Fatal(err)
	}
	want := `occurrence 1: created (occurrenceCount 1)
occurrence 2: incremented (occurrenceCount 2)
occurrence 3: incremented (occurrenceCount 3)
resolution: resolved (occurrenceCount 3)
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	// Once closed, the next occurrence opens a new condition.
	out.Reset()
	if err := run(context.Background(), []string{"--server", srv.URL, "--token", "secret", "--occurrences", "1"}, func(string) string { return "" }, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "occurrence 1: created (occurrenceCount 1)\n") {
		t.Errorf("after a resolution the next occurrence must open a new event; got %q", out.String())
	}
}

func TestRetryOf5xxIsReplayedNotCountedTwice(t *testing.T) {
	var calls atomic.Int32
	// The first answer is lost on the way back: the create took effect, the
	// producer sees a 503 and retries with the same idempotency key.
	srv := server(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) == 1 {
				next.ServeHTTP(httptest.NewRecorder(), r)
				http.Error(w, "unavailable", http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	var out bytes.Buffer
	err := run(context.Background(), []string{"--server", srv.URL, "--token", "secret", "--occurrences", "1"}, func(string) string { return "" }, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "occurrence 1: replayed (occurrenceCount 1)\n") {
		t.Errorf("retried create printed %q, want it replayed with count 1", out.String())
	}
}

func TestRefusalsAreNotRetried(t *testing.T) {
	var calls atomic.Int32
	srv := server(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1); next.ServeHTTP(w, r) })
	})
	err := run(context.Background(), []string{"--server", srv.URL, "--token", "wrong"}, func(string) string { return "" }, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("run with a wrong token: %v, want a 401 error", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d requests, want 1 (no retry of a 4xx)", n)
	}
}

// TALLY_SERVER names the server when --server is not given, as in the
// collector; --server wins over it (the producer ignored it).
func TestRunReadsTallyServer(t *testing.T) {
	srv := server(t, nil)
	env := func(k string) string {
		return map[string]string{"TALLY_SERVER": srv.URL, "TALLY_TOKEN": "secret"}[k]
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--occurrences", "1", "--key", "env"}, env, &out); err != nil {
		t.Fatalf("run with TALLY_SERVER: %v", err)
	}
	if !strings.HasPrefix(out.String(), "occurrence 1: created") {
		t.Errorf("run with TALLY_SERVER printed %q", out.String())
	}
	// The flag wins: a server that refuses the connection proves it was used.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	err := run(context.Background(), []string{"--server", dead.URL, "--occurrences", "1", "--key", "flag"}, env, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(dead.URL, "http://")) {
		t.Errorf("--server %s with TALLY_SERVER set: %v, want an error naming %s", dead.URL, err, dead.URL)
	}
}

func TestRunNeedsAToken(t *testing.T) {
	err := run(context.Background(), nil, func(string) string { return "" }, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "no token") {
		t.Errorf("run without a token: %v", err)
	}
}
