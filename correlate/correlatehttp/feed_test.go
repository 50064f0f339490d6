package correlatehttp_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/correlate/correlatehttp"
	"github.com/tallyhq/tally/route"
)

// feedServer serves the events API with its change feed; the first fail
// reads of the feed are answered 503.
func feedServer(t *testing.T, fail int32) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	st := memCorrelate(t)
	svc, err := correlate.New(st, correlate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var delivered atomic.Int32
	h, err := correlatehttp.New(svc, correlatehttp.Options{CallerFrom: callerFrom})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	route.Mount(mux, h.Routes(), func(rt route.Route) http.Handler { return rt.Handler })
	var feedCalls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/events/feed" && feedCalls.Add(1) <= fail {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &delivered
}

var errEnough = errors.New("enough")

// Follow gives every item once, in order, retries a 503 with backoff,
// keeps following items committed while it waits, and stops at a 4xx or
// when fn says so.
func TestClientFollow(t *testing.T) {
	srv, _ := feedServer(t, 2)
	c, err := correlatehttp.NewClient(srv.URL, correlatehttp.ClientOptions{Token: "org-1/alice", Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	create := func(js string) correlate.Event {
		t.Helper()
		e, _, err := c.Create(ctx, corrPayload(t, js))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	a := create(`{"category":"c","action":"a","correlationKey":"ck"}`)
	create(`{"category":"c","action":"a","correlationKey":"ck"}`)
	var got []string
	var positions []string
	err = c.Follow(ctx, correlate.FeedQuery{Wait: 5 * time.Second}, func(it correlate.FeedItem) error {
		got = append(got, string(it.Kind)+" "+it.Event.ID)
		positions = append(positions, it.Position)
		if len(got) == 2 {
			go func() { // committed while Follow waits
				_, _, _ = c.Create(ctx, corrPayload(t, `{"category":"c","action":"a","correlationKey":"ck","resolvedAt":"2026-03-01T13:00:00Z"}`))
			}()
		}
		if len(got) == 3 {
			return errEnough
		}
		return nil
	})
	if !errors.Is(err, errEnough) {
		t.Fatalf("Follow: %v, want fn's error", err)
	}
	want := []string{"created " + a.ID, "incremented " + a.ID, "resolved " + a.ID}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("items (-want +got):\n%s", diff)
	}
	// Feed from the first position: the two after it.
	p, err := c.Feed(ctx, correlate.FeedQuery{After: positions[0]})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 2 || p.Items[0].Position != positions[1] || p.NextCursor != positions[2] || !p.CaughtUp {
		t.Errorf("Feed after the first item: %+v", p)
	}
	// A tampered cursor is a 400, returned at once.
	var se *correlatehttp.StatusError
	err = c.Follow(ctx, correlate.FeedQuery{After: positions[0] + "x"}, func(correlate.FeedItem) error { return nil })
	if !errors.As(err, &se) || se.StatusCode != 400 {
		t.Errorf("Follow from a tampered cursor: %v, want a 400 StatusError", err)
	}
}

func corrPayload(t *testing.T, js string) correlate.Payload {
	t.Helper()
	p, err := correlate.DecodePayload([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A stream outlives the server's ReadTimeout: an item committed after it
// expired still arrives on the open stream.
func TestSubscribeOutlivesReadTimeout(t *testing.T) {
	st := memCorrelate(t)
	svc, err := correlate.New(st, correlate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := correlatehttp.New(svc, correlatehttp.Options{CallerFrom: callerFrom})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	route.Mount(mux, h.Routes(), func(rt route.Route) http.Handler { return rt.Handler })
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ReadTimeout = 100 * time.Millisecond
	srv.Start()
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/events/subscribe", nil)
	req.Header.Set("Authorization", "Bearer org-1/alice")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	time.Sleep(400 * time.Millisecond)
	e, _, err := svc.Create(ctx, correlate.Caller{Organization: "org-1", User: "alice"}, corrPayload(t, `{"category":"c","action":"a"}`))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 4096)
	chunk := make([]byte, 4096)
	for !bytes.Contains(buf, []byte(e.ID)) {
		n, err := res.Body.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if err != nil {
			t.Fatalf("the stream ended before the item (%v): %s", err, buf)
		}
	}
	if !bytes.Contains(buf, []byte("event: created\n")) {
		t.Errorf("stream %s: no created item", buf)
	}
}
