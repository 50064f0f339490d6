package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/internal/netpeek"
)

// hijackServer is tallyd's handler on a test server whose listener is
// limited by a ConnLimiter, as tallyd runs it.
type hijackServer struct {
	h     *Handler
	srv   *httptest.Server
	conns *ConnLimiter
	logs  *syncBuffer // written by the server's goroutines
}

func newHijackServer(t *testing.T, maxConns int, set func(*Options)) *hijackServer {
	t.Helper()
	logs := new(syncBuffer)
	opts := Options{Authenticator: testAuthenticator(t), Logger: slog.New(slog.NewJSONHandler(logs, nil)), FeedHeartbeat: 200 * time.Millisecond}
	if set != nil {
		set(&opts)
	}
	h, err := New(memStore(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewConnLimiter(ConnLimiterOptions{Max: maxConns})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = l.Listener(srv.Listener)
	srv.Config.ConnState = l.ConnState
	srv.Config.RegisterOnShutdown(h.EndStreams)
	srv.Start()
	t.Cleanup(func() { h.EndStreams(); srv.Close() })
	return &hijackServer{h: h, srv: srv, conns: l, logs: logs}
}

// stream opens a stream of path on a raw connection and returns it with
// its answer (the body still to read).
func (s *hijackServer) stream(t *testing.T, path, token string, hdr ...string) (net.Conn, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", s.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	req := "GET " + path + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token + "\r\nAccept: text/event-stream\r\n"
	for i := 0; i+1 < len(hdr); i += 2 {
		req += hdr[i] + ": " + hdr[i+1] + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, res
}

// books is what a ConnLimiter knows of its connections.
type books struct{ Open, Tracked, Shed int }

func (s *hijackServer) books() books {
	l := s.conns
	l.mu.Lock()
	defer l.mu.Unlock()
	return books{Open: l.open, Tracked: len(l.states), Shed: int(l.Shed())}
}

// waitBooks waits up to 10 s for the limiter's books to read want.
func (s *hijackServer) waitBooks(t *testing.T, want books) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.books() != want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if d := cmp.Diff(want, s.books()); d != "" {
		t.Fatalf("connection books (-want +got):\n%s", d)
	}
}

// Both feeds stream over HTTP/1.1 on the hijacked connection: the head
// carries the middleware's headers (CORS here) with the stream's own and
// Connection: close, no chunking; the access log records the request as
// 200 with hijacked=true (its duration up to the stream's start), the
// request metric as 200, and the subscriber is counted.
func TestFeedStreamHijacked(t *testing.T) {
	s := newHijackServer(t, 16, func(o *Options) { o.CORSAllowedOrigins = []string{"https://ui.example"} })
	for _, tc := range []struct {
		path, token, pattern, feed string
	}{
		{"/api/v1/events/feed?after=now", tokAdmin, "GET /api/v1/events/feed", "lifecycle"},
		{"/api/events/subscribe", tokEvents, "GET /api/events/subscribe", "correlated"},
	} {
		t.Run(tc.feed, func(t *testing.T) {
			_, res := s.stream(t, tc.path, tc.token, "Origin", "https://ui.example")
			first, err := bufio.NewReader(res.Body).ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			type head struct {
				Status                                 int
				Close                                  bool
				TransferEncoding                       []string
				ContentLength                          int64
				Type, CacheControl, AllowOrigin, First string
			}
			got := head{res.StatusCode, res.Close, res.TransferEncoding, res.ContentLength,
				res.Header.Get("Content-Type"), res.Header.Get("Cache-Control"), res.Header.Get("Access-Control-Allow-Origin"), first}
			want := head{200, true, nil, -1, "text/event-stream", "no-cache", "https://ui.example", "retry: 2000\n"}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("answer (-want +got):\n%s", d)
			}
			if got := scrape(t, s.h, `tally_feed_subscribers{feed="`+tc.feed+`"}`); got != "1" {
				t.Errorf("tally_feed_subscribers = %q, want 1", got)
			}
			// The handler logs the request when it returns, which may be
			// after the stream's first line reached the client.
			var line struct {
				Msg, Route string
				Status     int
				Hijacked   bool
			}
			for deadline := time.Now().Add(5 * time.Second); line.Msg == "" && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				for l := range strings.Lines(s.logs.String()) {
					if strings.Contains(l, `"route":"`+tc.pattern+`"`) {
						if err := json.Unmarshal([]byte(l), &line); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			if d := cmp.Diff(struct {
				Msg, Route string
				Status     int
				Hijacked   bool
			}{"request", tc.pattern, 200, true}, line); d != "" {
				t.Errorf("access log (-want +got):\n%s\n%s", d, s.logs.String())
			}
			series := fmt.Sprintf(`tally_http_request_duration_seconds_count{code="200",route=%q}`, tc.pattern)
			count := scrape(t, s.h, series)
			for deadline := time.Now().Add(5 * time.Second); count != "1" && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				count = scrape(t, s.h, series)
			}
			if count != "1" {
				t.Errorf("%s = %q, want 1", series, count)
			}
		})
	}
}

// A hijacked stream's connection stays counted by the ConnLimiter until the
// stream closes it, is never shed as idle (an idle keep-alive connection is,
// at the cap), and leaves nothing on the books once closed.
func TestConnLimiterCountsHijackedStreams(t *testing.T) {
	s := newHijackServer(t, 2, nil)
	a, res := s.stream(t, "/api/v1/events/feed?after=now", tokAdmin)
	body := bufio.NewReader(res.Body)
	s.waitBooks(t, books{Open: 1, Tracked: 1})

	idle, err := net.Dial("tcp", s.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if got := get(t, idle, "/healthz"); got != 200 {
		t.Fatalf("GET /healthz: %d", got)
	}
	s.waitBooks(t, books{Open: 2, Tracked: 2})
	time.Sleep(50 * time.Millisecond) // the server marks the keep-alive connection idle

	third, err := net.Dial("tcp", s.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	if got := get(t, third, "/healthz"); got != 200 {
		t.Fatalf("GET /healthz at the cap: %d", got)
	}
	s.waitBooks(t, books{Open: 2, Tracked: 2, Shed: 1})
	// The stream was not the one shed: it still beats.
	for range 3 {
		if _, err := body.ReadString('\n'); err != nil {
			t.Fatalf("the stream after a connection was shed: %v", err)
		}
	}

	_ = a.Close() // the stream finds it within a heartbeat and closes its side
	s.waitBooks(t, books{Open: 1, Tracked: 1, Shed: 1})
	_ = third.Close()
	s.waitBooks(t, books{Open: 0, Tracked: 0, Shed: 1})
	if got := scrape(t, s.h, `tally_feed_subscribers{feed="lifecycle"}`); got != "0" {
		t.Errorf("tally_feed_subscribers = %q after the client left, want 0", got)
	}
}

// EndStreams ends the hijacked streams, which http.Server.Shutdown does
// not track: each closes its connection cleanly (the body ends), and
// WaitStreams returns once all have; a stream opened later ends at once.
func TestEndStreamsEndsHijackedStreams(t *testing.T) {
	s := newHijackServer(t, 16, func(o *Options) { o.FeedHeartbeat = 20 * time.Second })
	var bodies []io.Reader
	for _, p := range []struct{ path, token string }{
		{"/api/v1/events/feed", tokAdmin}, {"/api/events/subscribe", tokEvents}, {"/api/v1/events/feed?after=now", tokAdmin},
	} {
		_, res := s.stream(t, p.path, p.token)
		if !res.Close {
			t.Fatalf("%s: not a hijacked stream (no Connection: close)", p.path)
		}
		bodies = append(bodies, res.Body)
	}
	s.waitBooks(t, books{Open: 3, Tracked: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.srv.Config.Shutdown(ctx); err != nil { // runs EndStreams, its hook
		t.Fatal(err)
	}
	if err := s.h.WaitStreams(ctx); err != nil {
		t.Fatalf("WaitStreams: %v", err)
	}
	for i, b := range bodies {
		if _, err := io.Copy(io.Discard, b); err != nil {
			t.Errorf("stream %d after EndStreams: %v, want a clean end", i, err)
		}
	}
	s.waitBooks(t, books{})
}

// An idle stream on a hijacked connection costs one goroutine (net/http's
// handler goroutine and its connection's background reader are gone).
func TestIdleHijackedStreamCostsOneGoroutine(t *testing.T) {
	const n = 100
	s := newHijackServer(t, 4*n, func(o *Options) { o.FeedHeartbeat = 20 * time.Second })
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	for range n {
		s.stream(t, "/api/v1/events/feed?after=now", tokAdmin)
	}
	if got := scrape(t, s.h, `tally_feed_subscribers{feed="lifecycle"}`); got != fmt.Sprint(n) {
		t.Fatalf("tally_feed_subscribers = %q, want %d", got, n)
	}
	time.Sleep(100 * time.Millisecond) // the handlers return
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	g := runtime.NumGoroutine() - g0
	t.Logf("%d idle streams: %d goroutines, stacks +%.1f KiB each, heap +%.1f KiB each", n, g,
		float64(int64(after.StackInuse)-int64(before.StackInuse))/n/1024, float64(int64(after.HeapInuse)-int64(before.HeapInuse))/n/1024)
	// The hub's tail reader and a few of the runtime's own may start.
	if g > n+5 {
		t.Errorf("%d idle streams hold %d goroutines, want one each", n, g)
	}
}

// A stream finds its client gone with a peek at the connection
// (netpeek.Peek): the limiter's connection, which tallyd's listener hands
// out (beneath TLS too), lets it see the socket. Without that, every peek
// was Unknown and a stream found a client that closed cleanly only when a
// second heartbeat's write failed: twice the documented time.
func TestLimitedConnCanBePeekedAt(t *testing.T) {
	l, err := NewConnLimiter(ConnLimiterOptions{Max: 4})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := l.Listener(raw)
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := netpeek.Peek(s); got != netpeek.Quiet {
		t.Errorf("Peek of an open, quiet limited connection = %v, want Quiet", got)
	}
	_ = c.Close()
	deadline := time.Now().Add(5 * time.Second)
	got := netpeek.Peek(s)
	for got != netpeek.Closed && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		got = netpeek.Peek(s)
	}
	if got != netpeek.Closed {
		t.Errorf("Peek of a limited connection its client closed = %v, want Closed", got)
	}
}
