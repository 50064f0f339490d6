package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/correlate/correlatehttp"
)

// correlatehttp.Client.Follow against a server that drops every other
// feed answer half-way: every item arrives once, in order.
func TestFeedAttackFollowDroppingServer(t *testing.T) {
	h, err := New(memStore(t), Options{Authenticator: attackAuthenticator(t)})
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/events/feed" && n.Add(1)%2 == 0 {
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"items\":[{\"position\":")
				c.Close()
			}
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	cl, err := correlatehttp.NewClient(srv.URL, correlatehttp.ClientOptions{Token: atkEvAU, Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const total = 25
	for i := range total {
		if _, _, err := cl.Create(context.Background(), correlate.Payload{Category: "c", Action: "a", CorrelationKey: fmt.Sprintf("k%02d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var keys []string
	stop := errors.New("stop")
	err = cl.Follow(ctx, correlate.FeedQuery{Limit: 3, Wait: time.Second}, func(it correlate.FeedItem) error {
		keys = append(keys, it.Event.CorrelationKey)
		if len(keys) == total {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("Follow: %v after %d items", err, len(keys))
	}
	for i, k := range keys {
		if want := fmt.Sprintf("k%02d", i); k != want {
			t.Fatalf("item %d: %s, want %s (all: %s)", i, k, want, strings.Join(keys, " "))
		}
	}
}

// Follow with a wait under a second sends wait=0 (whole seconds): once
// caught up it polls in a tight loop instead of long-polling.
func TestFeedAttackFollowSubSecondWait(t *testing.T) {
	h, err := New(memStore(t), Options{Authenticator: attackAuthenticator(t)})
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/events/feed" {
			n.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	cl, err := correlatehttp.NewClient(srv.URL, correlatehttp.ClientOptions{Token: atkEvAU})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = cl.Follow(ctx, correlate.FeedQuery{After: "now", Wait: 500 * time.Millisecond}, func(correlate.FeedItem) error { return nil })
	if got := n.Load(); got > 5 {
		t.Errorf("Follow with Wait 500ms made %d feed requests in 1 s on an idle feed; want a long poll (a few)", got)
	}
}
