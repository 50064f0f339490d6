package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// The subscriber cap: one past FeedMaxSubscribers is 503 with Retry-After;
// a HEAD takes no slot; a slot is given back when its client leaves
// (within one heartbeat: the stream finds its client gone then).
func TestFeedAttackSubscriberCap(t *testing.T) {
	a := newAtk(t, memStore(t), Options{FeedMaxSubscribers: 2, FeedHeartbeat: 500 * time.Millisecond})
	open := func(path string) (*http.Response, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", a.srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+atkReadA)
		req.Header.Set("Accept", "text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res, cancel
	}
	for range 3 {
		a.do("HEAD", "/api/events/subscribe", atkReadA, "", map[string]string{"Accept": "text/event-stream"})
	}
	r1, c1 := open("/api/v1/events/feed")
	defer c1()
	r2, c2 := open("/api/events/subscribe")
	defer c2()
	r3, c3 := open("/api/events/subscribe")
	defer c3()
	if r1.StatusCode != 200 || r2.StatusCode != 200 || r3.StatusCode != 503 || r3.Header.Get("Retry-After") == "" {
		t.Fatalf("three subscribers, cap 2: %d %d %d (Retry-After %q); want 200 200 503 with Retry-After", r1.StatusCode, r2.StatusCode, r3.StatusCode, r3.Header.Get("Retry-After"))
	}
	r1.Body.Close()
	c1()
	deadline := time.Now().Add(3 * time.Second)
	for {
		r4, c4 := open("/api/v1/events/feed")
		r4.Body.Close()
		c4()
		if r4.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a subscriber left: %d, want its slot back", r4.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A cursor of one store is refused by another (400 naming /after), never
// read as a position of the other.
func TestFeedAttackForeignCursor(t *testing.T) {
	mem := newAtk(t, memStore(t), Options{})
	pg := newAtk(t, pgStore(pgtest.DB(t, pgstore.Options{})), Options{})
	mem.ingest("c", 0, 3)
	pg.ingest("c", 0, 3)
	for _, c := range []struct {
		name     string
		from, to *atk
	}{{"memstore to pgstore", mem, pg}, {"pgstore to memstore", pg, mem}} {
		// The second item's position (a transaction open elsewhere in the
		// cluster may hold pgstore's feed back a moment: wait for it).
		var p lifecyclePage
		for after := ""; len(p.Items) < 2; {
			_, _, b := c.from.do("GET", "/api/v1/events/feed?limit=2&wait=3&after="+url.QueryEscape(after), atkReadA, "", nil)
			var q lifecyclePage
			_ = json.Unmarshal(b, &q)
			p.Items, after = append(p.Items, q.Items...), q.NextCursor
		}
		code, _, b := c.to.do("GET", "/api/v1/events/feed?after="+url.QueryEscape(p.Items[1].Position), atkReadA, "", nil)
		if code != 400 || !strings.Contains(string(b), `"/after"`) {
			t.Errorf("%s: %d %.300s; want 400 naming /after", c.name, code, b)
		}
	}
	// The correlated feed likewise.
	for i := range 3 {
		for _, a := range []*atk{mem, pg} {
			a.do("POST", "/api/events", atkEvAU, fmt.Sprintf(`{"category":"c","action":"a","correlationKey":"f%d"}`, i), nil)
		}
	}
	for _, c := range []struct {
		name     string
		from, to *atk
	}{{"correlated memstore to pgstore", mem, pg}, {"correlated pgstore to memstore", pg, mem}} {
		var p corrPage
		for after := ""; len(p.Items) < 2; {
			_, _, b := c.from.do("GET", "/api/events/feed?limit=2&wait=3&after="+url.QueryEscape(after), atkEvAU, "", nil)
			var q corrPage
			_ = json.Unmarshal(b, &q)
			p.Items, after = append(p.Items, q.Items...), q.NextCursor
		}
		code, _, b := c.to.do("GET", "/api/events/feed?after="+url.QueryEscape(p.Items[1].Position), atkEvAU, "", nil)
		if code != 400 || !strings.Contains(string(b), `"/after"`) {
			t.Errorf("%s: %d %.300s; want 400 naming /after", c.name, code, b)
		}
	}
}

// Accept-Encoding gzip on a stream: the stream is sent as it is, readable
// item by item (a compressed stream would be buffered).
func TestFeedAttackStreamGzip(t *testing.T) {
	a := newAtk(t, memStore(t), Options{})
	a.ingest("z", 0, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", a.srv.URL+"/api/v1/events/feed", nil)
	req.Header.Set("Authorization", "Bearer "+atkReadA)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Accept-Encoding", "gzip")
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ce := res.Header.Get("Content-Encoding"); ce != "" {
		t.Errorf("Content-Encoding %q on a stream", ce)
	}
	readFrames(t, res.Body, 2)
}
