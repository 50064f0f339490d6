package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/internal/feed"
)

type feedAnswer struct {
	Items []struct {
		Position string          `json:"position"`
		Kind     string          `json:"kind"`
		Event    json.RawMessage `json:"event"`
	} `json:"items"`
	NextCursor string `json:"next_cursor"`
	CaughtUp   bool   `json:"caught_up"`
}

// sseFrame is one item of an event stream.
type sseFrame struct{ ID, Event, Data string }

// readFrames reads n items of an event stream (comments and the retry line
// skipped).
func readFrames(t *testing.T, body io.Reader, n int) []sseFrame {
	t.Helper()
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var out []sseFrame
	var cur sseFrame
	for len(out) < n && sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.ID != "" {
				out = append(out, cur)
			}
			cur = sseFrame{}
		case strings.HasPrefix(line, "id: "):
			cur.ID = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.Event = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.Data += line[6:]
		}
	}
	if len(out) < n {
		t.Fatalf("read %d items of the stream, want %d (%v)", len(out), n, sc.Err())
	}
	return out
}

func jsonOf(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return v
}

// The correlated-event feed end to end through tallyd's handler: one item
// per create, occurrence, resolution, status change and delete (none for a
// replayed create), each event as getEvents returns it; the long poll and
// the stream give the same ids, kinds and data; both resume exactly after
// any cursor (after, Last-Event-ID); a lifecycle cursor is 400 naming
// /after.
func TestCorrelatedFeedEndToEnd(t *testing.T) {
	h, err := New(memStore(t), Options{Authenticator: testAuthenticator(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	do := func(method, path, body string, hdr map[string]string) (int, []byte) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, srv.URL+path, rd)
		req.Header.Set("Authorization", "Bearer "+tokEvents)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}
	var answered [][]byte // each change's event as the API answered it (getEvents' shape)
	post := func(body string) string {
		code, b := do("POST", "/api/events", body, nil)
		if code >= 300 {
			t.Fatalf("create %s: %d %s", body, code, b)
		}
		answered = append(answered, b)
		var e struct{ ID string }
		_ = json.Unmarshal(b, &e)
		return e.ID
	}
	id := post(`{"category":"c","action":"a","correlationKey":"ck","idempotencyKey":"k1"}`)
	answered = answered[:0]
	if code, b := do("POST", "/api/events", `{"category":"c","action":"a","correlationKey":"ck","idempotencyKey":"k1"}`, nil); code != 200 {
		t.Fatalf("replay: %d %s", code, b)
	}
	_, first := do("GET", "/api/events/list", "", nil)
	var page struct{ Data []json.RawMessage }
	_ = json.Unmarshal(first, &page)
	answered = append(answered, page.Data[0])
	post(`{"category":"c","action":"a","correlationKey":"ck"}`)
	post(`{"category":"c","action":"a","correlationKey":"ck","resolvedAt":"2026-03-01T13:00:00Z"}`)
	if code, b := do("PUT", "/api/events/"+id+"/status", `{"status":"read"}`, nil); code != 200 {
		t.Fatalf("mark read: %d %s", code, b)
	}
	_, listed := do("GET", "/api/events/list", "", nil)
	_ = json.Unmarshal(listed, &page)
	answered = append(answered, page.Data[0])
	if code, b := do("DELETE", "/api/events/"+id, "", nil); code != 204 {
		t.Fatalf("delete: %d %s", code, b)
	}

	code, b := do("GET", "/api/events/feed", "", nil)
	var all feedAnswer
	if err := json.Unmarshal(b, &all); code != 200 || err != nil {
		t.Fatalf("feed: %d %s", code, b)
	}
	var kinds []string
	for _, it := range all.Items {
		kinds = append(kinds, it.Kind)
	}
	if diff := cmp.Diff([]string{"created", "incremented", "resolved", "status", "deleted"}, kinds); diff != "" {
		t.Fatalf("kinds (-want +got):\n%s", diff)
	}
	for i, want := range answered {
		if diff := cmp.Diff(jsonOf(t, want), jsonOf(t, all.Items[i].Event)); diff != "" {
			t.Errorf("item %d (%s): the event is not as the API answers it (-want +got):\n%s", i, kinds[i], diff)
		}
	}
	if ev := jsonOf(t, all.Items[4].Event).(map[string]any); ev["deletedAt"] == nil {
		t.Errorf("the deleted item's event has no deletedAt: %v", ev)
	}
	if !all.CaughtUp || all.NextCursor != all.Items[4].Position {
		t.Errorf("caught_up %v, next_cursor %q; want true and the last position", all.CaughtUp, all.NextCursor)
	}
	for i, it := range all.Items {
		_, b := do("GET", "/api/events/feed?after="+url.QueryEscape(it.Position), "", nil)
		var rest feedAnswer
		_ = json.Unmarshal(b, &rest)
		if len(rest.Items) != 4-i || (len(rest.Items) > 0 && rest.Items[0].Position != all.Items[i+1].Position) {
			t.Errorf("after item %d: %s, want items %d to 4", i, b, i+1)
		}
	}

	// The stream: the same ids, kinds and data; Last-Event-ID resumes.
	stream := func(hdr map[string]string, n int) []sseFrame {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/events/subscribe", nil)
		req.Header.Set("Authorization", "Bearer "+tokEvents)
		req.Header.Set("Accept", "text/event-stream")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("subscribe: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
		}
		return readFrames(t, res.Body, n)
	}
	frames := stream(nil, 5)
	for i, fr := range frames {
		it := all.Items[i]
		if fr.ID != it.Position || fr.Event != it.Kind || fr.Data != string(it.Event) {
			t.Errorf("stream item %d = %+v, want id %s, event %s, data %s", i, fr, it.Position, it.Kind, it.Event)
		}
	}
	resumed := stream(map[string]string{"Last-Event-ID": frames[1].ID}, 3)
	if diff := cmp.Diff(frames[2:], resumed); diff != "" {
		t.Errorf("resumed after the second item (-want +got):\n%s", diff)
	}

	// A cursor of the lifecycle feed, or tampered: 400 naming /after.
	lifecycle := feed.Encode(feed.Lifecycle, feed.Position{Kind: feed.Current, Seq: 1})
	tampered := all.Items[0].Position[:len(all.Items[0].Position)-2] + "AA"
	for _, c := range []string{lifecycle, tampered} {
		code, b := do("GET", "/api/events/feed?after="+url.QueryEscape(c), "", nil)
		if code != 400 || !strings.Contains(string(b), `"invalid_parameter"`) || !strings.Contains(string(b), `"/after"`) {
			t.Errorf("feed after %q: %d %s, want 400 invalid_parameter naming /after", c, code, b)
		}
		code, b = do("GET", "/api/events/subscribe", "", map[string]string{"Last-Event-ID": c})
		if code != 400 || !strings.Contains(string(b), `"/after"`) {
			t.Errorf("subscribe from %q: %d %s, want 400 naming /after", c, code, b)
		}
	}

	// Every item streamed is counted: 5 + 3.
	res, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	m, _ := io.ReadAll(res.Body)
	if !strings.Contains(string(m), "\ntally_feed_items_delivered_total{feed=\"correlated\"} 8\n") {
		t.Errorf("/metrics has no tally_feed_items_delivered_total{feed=\"correlated\"} 8:\n%s", m)
	}
}
