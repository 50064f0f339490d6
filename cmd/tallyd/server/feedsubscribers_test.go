package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// With FeedMaxSubscribers 1, one Server-Sent Events subscriber streams and
// any other, of either feed, is answered 503 busy with Retry-After while it
// does; tally_feed_subscribers shows the one. When it leaves, its place is
// free again, within one heartbeat (the stream finds its client gone then).
func TestFeedMaxSubscribers(t *testing.T) {
	h, err := New(memStore(t), Options{Authenticator: testAuthenticator(t), FeedMaxSubscribers: 1, FeedHeartbeat: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	subscribe := func(ctx context.Context, path, token string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Accept", "text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	gauge := func(feed string) string {
		return scrape(t, h, `tally_feed_subscribers{feed="`+feed+`"}`)
	}

	firstCtx, leave := context.WithCancel(ctx)
	first := subscribe(firstCtx, "/api/v1/events/feed", tokAdmin)
	defer first.Body.Close()
	if first.StatusCode != 200 {
		b, _ := io.ReadAll(first.Body)
		t.Fatalf("first subscriber: %d %s, want 200", first.StatusCode, b)
	}
	for _, second := range []struct{ path, token string }{
		{"/api/v1/events/feed", tokAdmin},
		{"/api/events/subscribe", tokEvents},
	} {
		res := subscribe(ctx, second.path, second.token)
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var p struct {
			Status int    `json:"status"`
			Code   string `json:"code"`
		}
		_ = json.Unmarshal(b, &p)
		if res.StatusCode != 503 || p.Code != "busy" || p.Status != 503 || res.Header.Get("Retry-After") == "" {
			t.Errorf("a second subscriber on %s: %d Retry-After %q %s, want 503 busy with Retry-After", second.path, res.StatusCode, res.Header.Get("Retry-After"), b)
		}
	}
	if got := gauge("lifecycle"); got != "1" {
		t.Errorf(`tally_feed_subscribers{feed="lifecycle"} = %q while one streams, want 1`, got)
	}
	if got := gauge("correlated"); got != "" && got != "0" {
		t.Errorf(`tally_feed_subscribers{feed="correlated"} = %q, want none: its subscriber was refused`, got)
	}

	// The first leaves: its place goes to the next.
	leave()
	for deadline := time.Now().Add(5 * time.Second); gauge("lifecycle") != "0"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf(`tally_feed_subscribers{feed="lifecycle"} = %q after the subscriber left, want 0`, gauge("lifecycle"))
		}
	}
	next := subscribe(ctx, "/api/events/subscribe", tokEvents)
	defer next.Body.Close()
	if next.StatusCode != 200 || gauge("correlated") != "1" {
		t.Errorf("a subscriber after the first left: %d, gauge %q; want 200 and 1", next.StatusCode, gauge("correlated"))
	}
}
