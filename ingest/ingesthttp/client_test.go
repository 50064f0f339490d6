package ingesthttp_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/ingesthttp"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// bothStores runs f on a fresh ingestion store of each backend.
func bothStores(t *testing.T, f func(t *testing.T, st stores)) {
	t.Run("memstore", func(t *testing.T) { f(t, memIngest(t)) })
	t.Run("pgstore", func(t *testing.T) { f(t, pgBackend(t)) })
}

// pgBackend returns the stores of a fresh PostgreSQL schema.
func pgBackend(t testing.TB) backend {
	db := pgtest.DB(t, pgstore.Options{})
	return backend{db.Ingest(), db.Projection(), db.Ingest(), db.Reconcile()}
}

// recorded is one request a proxy in front of the server saw.
type recorded struct {
	Items    int
	Encoding string
}

// proxy serves through to next, recording each request's item count, and
// lets a test break the attempt with fail (which returns true when it
// answered).
type proxy struct {
	next http.Handler
	fail func(n int, w http.ResponseWriter, r *http.Request) bool
	mu   sync.Mutex
	seen []recorded
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	plain := body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err == nil {
			plain, _ = io.ReadAll(zr)
		}
	}
	var items []json.RawMessage
	_ = json.Unmarshal(plain, &items)
	p.mu.Lock()
	p.seen = append(p.seen, recorded{Items: len(items), Encoding: r.Header.Get("Content-Encoding")})
	n := len(p.seen)
	p.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if p.fail != nil && p.fail(n, w, r) {
		return
	}
	p.next.ServeHTTP(w, r)
}

func newClient(t *testing.T, url string, opts ingesthttp.ClientOptions) *ingesthttp.Client {
	t.Helper()
	opts.Token = "ok"
	if opts.Backoff == 0 {
		opts.Backoff = time.Millisecond
	}
	c, err := ingesthttp.NewClient(url, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// stored counts the events the store holds.
func stored(t *testing.T, st ingest.Store) int {
	t.Helper()
	svc, err := ingest.New(st, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n, cursor := 0, ""
	for {
		p, err := svc.Events(context.Background(), ingest.EventFilter{Limit: 1000, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		n += len(p.Items)
		if p.NextCursor == nil {
			return n
		}
		cursor = *p.NextCursor
	}
}

func statuses(res ingesthttp.Result) map[ingesthttp.ItemStatus]int {
	m := map[ingesthttp.ItemStatus]int{}
	for _, it := range res.Items {
		m[it.Status]++
	}
	return m
}

// "batches at most 1000 items, with gzip" and "returns the
// per-item result"; every valid item is stored once, each mapped back to
// the caller's index.
func TestClientBatchesAndMapsItems(t *testing.T) {
	bothStores(t, func(t *testing.T, st stores) {
		s := newServer(t, st, 0)
		p := &proxy{next: s.Config.Handler}
		srv := httptest.NewServer(p)
		t.Cleanup(srv.Close)
		const n = 2100
		raw := make([][]byte, n)
		for i := range raw {
			raw[i] = []byte(volume(fmt.Sprintf("e%d", i), "c1"))
		}
		raw[1] = []byte(strings.Replace(volume("bad", "c1"), "volume.create.end", "nodot", 1)) // locally invalid
		raw[2] = []byte(volume("e2", "c2"))                                                    // out of scope: the server refuses it
		raw[1500] = raw[1499]                                                                  // repeats the item before it
		res, err := newClient(t, srv.URL, ingesthttp.ClientOptions{}).SendRaw(context.Background(), raw)
		if err != nil {
			t.Fatal(err)
		}
		want := map[int]ingesthttp.ItemResult{
			1: {Status: ingesthttp.StatusInvalid, EventID: "bad", Reason: `schema: /event_type: pattern: "nodot" must be two or more dot-separated parts of a-z, 0-9 and _ (^[a-z0-9_]+(\.[a-z0-9_]+)+$)`},
			2: {Status: ingesthttp.StatusRejected, EventID: "e2", Reason: `scope: /cloud: scope: cloud "c2" is outside this credential's openstack/c1`},
			// 1499 and 1500 travel in the second request; the repeat is a
			// duplicate, the rest of that request accepted.
			1500: {Status: ingesthttp.StatusDuplicate, EventID: "e1499"},
		}
		for i := range raw {
			w, ok := want[i]
			if !ok {
				w = ingesthttp.ItemResult{Status: ingesthttp.StatusAccepted, EventID: fmt.Sprintf("e%d", i)}
			}
			if diff := cmp.Diff(w, res.Items[i]); diff != "" {
				if _, listed := want[i]; listed || i < 3 || i > n-3 {
					t.Errorf("item %d (-want +got):\n%s", i, diff)
				} else {
					t.Fatalf("item %d (-want +got):\n%s", i, diff)
				}
			}
		}
		if diff := cmp.Diff([]recorded{{1000, "gzip"}, {1000, "gzip"}, {n - 1 - 2000, "gzip"}}, p.seen); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
		if got := stored(t, st); got != n-3 {
			t.Errorf("%d events stored, want %d", got, n-3)
		}
	})
}

// "retries transport errors and 5xx with backoff and jitter";
// a request whose answer was lost after it was stored comes back as
// duplicates, stored once.
func TestClientRetries(t *testing.T) {
	bothStores(t, func(t *testing.T, st stores) {
		s := newServer(t, st, 0)
		p := &proxy{next: s.Config.Handler}
		p.fail = func(n int, w http.ResponseWriter, r *http.Request) bool {
			switch n {
			case 1: // the first request: 503 before anything is stored
				w.Header().Set("Retry-After", "0")
				http.Error(w, "overloaded", http.StatusServiceUnavailable)
				return true
			case 3: // the second request: stored, then the connection drops
				s.Config.Handler.ServeHTTP(httptest.NewRecorder(), r)
				conn, _, err := w.(http.Hijacker).Hijack()
				if err != nil {
					t.Error(err)
					return true
				}
				conn.Close()
				return true
			}
			return false
		}
		srv := httptest.NewServer(p)
		t.Cleanup(srv.Close)
		raw := make([][]byte, 4)
		for i := range raw {
			raw[i] = []byte(volume(fmt.Sprintf("r%d", i), "c1"))
		}
		res, err := newClient(t, srv.URL, ingesthttp.ClientOptions{BatchSize: 2}).SendRaw(context.Background(), raw)
		if err != nil {
			t.Fatal(err)
		}
		want := []ingesthttp.ItemResult{
			{Status: ingesthttp.StatusAccepted, EventID: "r0"},
			{Status: ingesthttp.StatusAccepted, EventID: "r1"},
			{Status: ingesthttp.StatusDuplicate, EventID: "r2"},
			{Status: ingesthttp.StatusDuplicate, EventID: "r3"},
		}
		if diff := cmp.Diff(want, res.Items); diff != "" {
			t.Errorf("items (-want +got):\n%s", diff)
		}
		if res.Requests != 4 || len(p.seen) != 4 {
			t.Errorf("%d requests counted, %d seen, want 4", res.Requests, len(p.seen))
		}
		if got := stored(t, st); got != 4 {
			t.Errorf("%d events stored, want 4", got)
		}
	})
}

// "halves a batch on 413"; an item still 413 alone is reported
// too large, the others stored.
func TestClientHalvesOn413(t *testing.T) {
	bothStores(t, func(t *testing.T, st stores) {
		s := newServer(t, st, 2048) // about six events per body
		p := &proxy{next: s.Config.Handler}
		srv := httptest.NewServer(p)
		t.Cleanup(srv.Close)
		raw := make([][]byte, 20)
		for i := range raw {
			raw[i] = []byte(volume(fmt.Sprintf("h%d", i), "c1"))
		}
		big := strings.Replace(volume("big", "c1"), `"payload":{`, `"payload":{"note":"`+strings.Repeat("x", 3000)+`",`, 1)
		raw[7] = []byte(big)
		res, err := newClient(t, srv.URL, ingesthttp.ClientOptions{}).SendRaw(context.Background(), raw)
		if err != nil {
			t.Fatal(err)
		}
		got := statuses(res)
		if diff := cmp.Diff(map[ingesthttp.ItemStatus]int{ingesthttp.StatusAccepted: 19, ingesthttp.StatusTooLarge: 1}, got); diff != "" {
			t.Errorf("statuses (-want +got):\n%s", diff)
		}
		if it := res.Items[7]; it.Status != ingesthttp.StatusTooLarge || !strings.HasPrefix(it.Reason, "too_large: : maxLength: the item alone") {
			t.Errorf("item 7: %+v", it)
		}
		var sizes []int
		for _, r := range p.seen {
			sizes = append(sizes, r.Items)
		}
		// Item 7 is over the cap alone. 20 and 10 are refused, 5 (0-4)
		// fits; doubling back stays under the smallest refused: 9 (5-13)
		// is refused, 4 (5-8) too, 2 (5-6) fits, 3 (7-9) is refused, 1
		// (7) is refused alone, which lifts the ceiling; then 1 (8), 2,
		// 4 and the last 5 fit.
		want := []int{20, 10, 5, 9, 4, 2, 3, 1, 1, 2, 4, 5}
		if diff := cmp.Diff(want, sizes); diff != "" {
			t.Errorf("request sizes (-want +got):\n%s", diff)
		}
		if n := stored(t, st); n != 19 {
			t.Errorf("%d events stored, want 19", n)
		}
	})
}

// The wire format is what Tally's collector sender sends
// (B42Labs/tally internal/providers/openstack/sender.go): POST
// {base}/api/v1/events, Authorization: Bearer, Content-Type:
// application/json, a JSON array of the events as given; this client adds
// Content-Encoding: gzip unless NoGzip. A refused item is not sent again,
// and a final 4xx is not retried.
func TestClientWireFormat(t *testing.T) {
	a, b := volume("w1", "c1"), volume("w2", "c2")
	for _, noGzip := range []bool{false, true} {
		t.Run(fmt.Sprint("NoGzip=", noGzip), func(t *testing.T) {
			var got []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if r.Header.Get("Content-Encoding") == "gzip" {
					zr, err := gzip.NewReader(bytes.NewReader(body))
					if err != nil {
						t.Fatal(err)
					}
					body, _ = io.ReadAll(zr)
				}
				got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization")+" "+r.Header.Get("Content-Type")+" "+r.Header.Get("Content-Encoding"), string(body))
				io.WriteString(w, `{"accepted":1,"duplicates":0,"rejected":[{"index":1,"event_id":"w2","reason":"scope: …"}]}`)
			}))
			t.Cleanup(srv.Close)
			res, err := newClient(t, srv.URL+"/", ingesthttp.ClientOptions{NoGzip: noGzip}).SendRaw(context.Background(), [][]byte{[]byte(a), []byte(b)})
			if err != nil {
				t.Fatal(err)
			}
			enc := "gzip"
			if noGzip {
				enc = ""
			}
			want := []string{"POST /api/v1/events Bearer ok application/json " + enc, "[" + a + "," + b + "]"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			if res.Items[1].Status != ingesthttp.StatusRejected {
				t.Errorf("item 1: %+v", res.Items[1])
			}
		})
	}
}

// A whole-request refusal ends Send: not retried, every unanswered item
// unsent; a locally invalid item is never sent.
func TestClientRefusal(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	res, err := newClient(t, srv.URL, ingesthttp.ClientOptions{}).SendRaw(context.Background(), [][]byte{[]byte(volume("u1", "c1")), []byte(`[]`)})
	var se *ingesthttp.StatusError
	if !errors.As(err, &se) || se.StatusCode != 401 || calls.Load() != 1 {
		t.Errorf("err %v after %d calls, want one 401", err, calls.Load())
	}
	want := []ingesthttp.ItemResult{
		{Status: ingesthttp.StatusUnsent, EventID: "u1"},
		{Status: ingesthttp.StatusInvalid, Reason: "schema: : type: the item must be a JSON object, not an array"},
	}
	if diff := cmp.Diff(want, res.Items); diff != "" {
		t.Errorf("items (-want +got):\n%s", diff)
	}
}

// A cancelled context ends the wait between attempts.
func TestClientCancel(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	c := newClient(t, srv.URL, ingesthttp.ClientOptions{Backoff: time.Hour, MaxAttempts: 10,
		HTTPClient: &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			defer cancel()
			return http.DefaultTransport.RoundTrip(r)
		})}})
	res, err := c.SendRaw(ctx, [][]byte{[]byte(volume("x", "c1"))})
	if !errors.Is(err, context.Canceled) || res.Requests != 1 || res.Items[0].Status != ingesthttp.StatusUnsent {
		t.Errorf("err %v, %d requests, %+v; want a cancellation after 1, the item unsent", err, res.Requests, res.Items)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestNewClientValidates(t *testing.T) {
	_, err := ingesthttp.NewClient("", ingesthttp.ClientOptions{MaxAttempts: -1, Backoff: -1, BatchSize: 1001, MaxBatchBytes: -1})
	want := "ingesthttp: a base URL is required\ningesthttp: a token is required\ningesthttp: MaxAttempts must not be negative, is -1\n" +
		"ingesthttp: Backoff must not be negative, is -1ns\ningesthttp: BatchSize must be 0 to 1000, is 1001\ningesthttp: MaxBatchBytes must not be negative, is -1"
	if err == nil || err.Error() != want {
		t.Errorf("NewClient: %v, want\n%s", err, want)
	}
}
