package ingesthttp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tallyhq/tally/event"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/ingesthttp"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/route"
)

// feedServer serves the ingestion routes over a memstore; fail may break
// the n-th read of the feed (from 1) and returns true when it answered.
// reads records the query of every read of the feed.
type feedServer struct {
	*httptest.Server
	client *ingesthttp.Client
	svc    *ingest.Service
	mu     sync.Mutex
	reads  []url.Values
}

func newFeedServer(t *testing.T, fail func(n int, w http.ResponseWriter) bool) *feedServer {
	t.Helper()
	st := memIngest(t)
	svc, err := ingest.New(st, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	proj, err := projection.New(st.projection(), svc)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ingesthttp.New(svc, proj, ingesthttp.Options{
		CallerFrom: func(r *http.Request) (ingest.Caller, bool) {
			return ingest.Caller{Credential: "c1-collector", Platform: "openstack", Cloud: "c1"}, r.Header.Get("Authorization") == "Bearer ok"
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	route.Mount(mux, h.Routes(), func(rt route.Route) http.Handler { return rt.Handler })
	fs := &feedServer{svc: svc}
	fs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/events/feed" {
			fs.mu.Lock()
			fs.reads = append(fs.reads, r.URL.Query())
			n := len(fs.reads)
			fs.mu.Unlock()
			if fail != nil && fail(n, w) {
				return
			}
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(fs.Close)
	fs.client = newClient(t, fs.URL, ingesthttp.ClientOptions{})
	return fs
}

// send stores one volume event of cloud c1 per id, in order.
func (fs *feedServer) send(t *testing.T, ids ...string) {
	t.Helper()
	if err := fs.trySend(ids...); err != nil {
		t.Fatal(err)
	}
}

func (fs *feedServer) trySend(ids ...string) error {
	raw := make([][]byte, len(ids))
	for i, id := range ids {
		raw[i] = []byte(volume(id, "c1"))
	}
	res, err := fs.client.SendRaw(context.Background(), raw)
	if err != nil || res.Count(ingesthttp.StatusAccepted) != len(ids) {
		return fmt.Errorf("send %v: %+v, %v", ids, res, err)
	}
	return nil
}

func (fs *feedServer) readQueries() []url.Values {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return append([]url.Values(nil), fs.reads...)
}

// drop closes the connection without an answer.
func drop(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}

var errEnough = errors.New("enough")

// equateState compares event.State by value.
var equateState = cmpopts.EquateComparable(event.State{})

// Follow gives every item once, in order, across a 503 and a dropped
// connection (each retried with backoff, resuming from the last cursor),
// keeps following events stored while it waits, and stops when fn says so.
func TestClientFollow(t *testing.T) {
	fs := newFeedServer(t, func(n int, w http.ResponseWriter) bool {
		switch n {
		case 1:
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return true
		case 3: // after the first page
			drop(w)
			return true
		}
		return false
	})
	fs.send(t, "e1", "e2", "e3")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got, positions []string
	sent := make(chan error, 1)
	err := fs.client.Follow(ctx, ingest.FeedQuery{Limit: 2, Wait: 5 * time.Second, FeedFilter: ingest.FeedFilter{Cloud: "c1"}}, func(it ingest.FeedItem) error {
		got = append(got, it.Event.EventID)
		positions = append(positions, it.Position)
		if len(got) == 3 {
			go func() { // stored while Follow waits
				time.Sleep(100 * time.Millisecond)
				sent <- fs.trySend("e4", "e5")
			}()
		}
		if len(got) == 5 {
			return errEnough
		}
		return nil
	})
	if !errors.Is(err, errEnough) {
		t.Fatalf("Follow: %v after %v, want fn's error", err, got)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"e1", "e2", "e3", "e4", "e5"}, got); diff != "" {
		t.Errorf("items (-want +got):\n%s", diff)
	}
	reads := fs.readQueries()
	if len(reads) < 5 {
		t.Fatalf("%d reads of the feed, want at least 5 (a 503, a page, a drop, a page, a wait): %v", len(reads), reads)
	}
	// The retry of the 503 starts at the beginning, that of the dropped read
	// from the first page's last item; each read long-polls with q's wait,
	// limit and filter.
	wantAfter := []string{"", "", positions[1], positions[1]}
	for i, w := range wantAfter {
		q := reads[i]
		if q.Get("after") != w || q.Get("wait") != "5" || q.Get("limit") != "2" || q.Get("cloud") != "c1" {
			t.Errorf("read %d: %v, want after %q, wait 5, limit 2, cloud c1", i+1, q, w)
		}
	}
}

// A refusal stops Follow at once: a tampered cursor is 400, not retried.
func TestClientFollowStopsAt4xx(t *testing.T) {
	fs := newFeedServer(t, nil)
	fs.send(t, "e1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := fs.client.Feed(ctx, ingest.FeedQuery{})
	if err != nil || len(p.Items) != 1 {
		t.Fatalf("Feed: %+v, %v", p, err)
	}
	calls := 0
	err = fs.client.Follow(ctx, ingest.FeedQuery{After: p.Items[0].Position + "x"}, func(ingest.FeedItem) error { calls++; return nil })
	var se *ingesthttp.StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusBadRequest || !strings.Contains(string(se.Body), "/after") {
		t.Fatalf("Follow from a tampered cursor: %v, want a 400 StatusError naming /after", err)
	}
	if !strings.Contains(err.Error(), "GET /api/v1/events/feed answered 400") {
		t.Errorf("error %q does not name the read", err)
	}
	if n := len(fs.readQueries()); n != 2 || calls != 0 {
		t.Errorf("%d reads, fn called %d times; want 2 reads (Feed and the refused one), fn never", n, calls)
	}
}

// A 429 and a 502 are retried like a 503; ctx ends Follow, while it
// long-polls and while it waits between attempts.
func TestClientFollowRetriesUntilCtx(t *testing.T) {
	fs := newFeedServer(t, func(n int, w http.ResponseWriter) bool {
		switch n {
		case 1:
			w.WriteHeader(http.StatusTooManyRequests)
			return true
		case 2:
			w.WriteHeader(http.StatusBadGateway)
			return true
		}
		return false
	})
	fs.send(t, "e1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var got []string
	start := time.Now()
	err := fs.client.Follow(ctx, ingest.FeedQuery{Wait: 5 * time.Second}, func(it ingest.FeedItem) error {
		got = append(got, it.Event.EventID)
		return nil
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Follow: %v, want ctx's error", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Follow returned %s after its ctx ended", took)
	}
	if diff := cmp.Diff([]string{"e1"}, got); diff != "" {
		t.Errorf("items (-want +got):\n%s", diff)
	}

	// Every read fails; the backoff is an hour: ctx ends the wait.
	down := newFeedServer(t, func(_ int, w http.ResponseWriter) bool {
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	})
	c := newClient(t, down.URL, ingesthttp.ClientOptions{Backoff: time.Hour})
	short, cancelShort := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancelShort()
	start = time.Now()
	err = c.Follow(short, ingest.FeedQuery{}, func(ingest.FeedItem) error { return nil })
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
		t.Errorf("Follow against a server that never answers: %v after %s, want ctx's error soon", err, time.Since(start))
	}
}

// Feed's cursors round-trip: each item decodes as the service gave it, a
// read from an item's Position gives the items after it, a read from
// NextCursor or "now" gives none and the same cursor back.
func TestClientFeedCursorRoundTrip(t *testing.T) {
	fs := newFeedServer(t, nil)
	fs.send(t, "e1", "e2", "e3")
	ctx := context.Background()
	want, err := fs.svc.Feed(ctx, ingest.FeedQuery{})
	if err != nil {
		t.Fatal(err)
	}
	all, err := fs.client.Feed(ctx, ingest.FeedQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, all, equateState); diff != "" {
		t.Fatalf("Feed over HTTP (-the service's +got):\n%s", diff)
	}
	if len(all.Items) != 3 || !all.CaughtUp || all.NextCursor != all.Items[2].Position {
		t.Fatalf("Feed from the beginning: %+v, want 3 items, caught up, NextCursor the last position", all)
	}
	tests := []struct {
		name string
		q    ingest.FeedQuery
		want ingest.FeedPage
	}{
		{"after the first item", ingest.FeedQuery{After: all.Items[0].Position},
			ingest.FeedPage{Items: all.Items[1:], NextCursor: all.NextCursor, CaughtUp: true}},
		{"one after the first item", ingest.FeedQuery{After: all.Items[0].Position, Limit: 1},
			ingest.FeedPage{Items: all.Items[1:2], NextCursor: all.Items[1].Position}},
		{"after NextCursor", ingest.FeedQuery{After: all.NextCursor},
			ingest.FeedPage{Items: []ingest.FeedItem{}, NextCursor: all.NextCursor, CaughtUp: true}},
		{"now", ingest.FeedQuery{After: "now"},
			ingest.FeedPage{Items: []ingest.FeedItem{}, NextCursor: all.NextCursor, CaughtUp: true}},
		{"a filter that selects none", ingest.FeedQuery{FeedFilter: ingest.FeedFilter{Cloud: "c2"}},
			ingest.FeedPage{Items: []ingest.FeedItem{}, NextCursor: all.NextCursor, CaughtUp: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fs.client.Feed(ctx, tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, equateState); diff != "" {
				t.Errorf("Feed(%+v) (-want +got):\n%s", tt.q, diff)
			}
		})
	}
}
