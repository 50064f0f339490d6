package sse_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/internal/sse"
)

// subs is a route.Subscribers that records each Leave.
type subs struct {
	stop context.Context
	end  context.CancelFunc
	left chan bool // reset, at each Leave
}

func newSubs() *subs {
	stop, end := context.WithCancel(context.Background())
	return &subs{stop: stop, end: end, left: make(chan bool, 8)}
}

func (s *subs) Admit(string) (context.Context, bool) { return s.stop, true }
func (s *subs) Leave(_ string, reset bool)           { s.left <- reset }
func (s *subs) Delivered(string, int)                {}

// hijackServer serves one stream per request through sse.ServeHTTP with
// Hijack, behind a "middleware" that sets headers first. Each frame sent
// on frames is the next read's; handled receives when a handler returns.
type hijackServer struct {
	*httptest.Server
	subs    *subs
	frames  chan sse.Frame
	handled chan struct{}
}

func newHijackServer(t *testing.T, opts sse.StreamOptions, start func(*httptest.Server)) *hijackServer {
	t.Helper()
	s := &hijackServer{subs: newSubs(), frames: make(chan sse.Frame, 64), handled: make(chan struct{}, 8)}
	read := func(ctx context.Context, after string, wait time.Duration) ([]sse.Frame, string, error) {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case fr := <-s.frames:
			return []sse.Frame{fr}, fr.ID, nil
		case <-t.C:
			return nil, after, nil
		case <-ctx.Done():
			return nil, after, ctx.Err()
		}
	}
	opts.Hijack = true
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { s.handled <- struct{}{} }()
		w.Header().Set("X-Request-Id", "r-1")
		w.Header().Set("Access-Control-Allow-Origin", "https://ui.example")
		w.Header().Set("Connection", "keep-alive") // not the stream's: it closes
		if err := sse.ServeHTTP(w, r, s.subs, "f", "", nil, "0", read, opts); err != nil {
			t.Errorf("ServeHTTP: %v", err)
		}
	}))
	start(s.Server)
	t.Cleanup(func() { s.subs.end(); s.Close() })
	return s
}

// rawGet sends a stream's request on a new TCP connection (rcvbuf > 0 sets
// its receive buffer before connecting) and returns it with its reader.
func rawGet(t *testing.T, addr, proto string, rcvbuf int) (net.Conn, *bufio.Reader) {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		if rcvbuf == 0 {
			return nil
		}
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf) })
		return errors.Join(err, serr)
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := fmt.Fprintf(c, "GET /feed %s\r\nHost: feed\r\nAccept: text/event-stream\r\n\r\n", proto); err != nil {
		t.Fatal(err)
	}
	return c, bufio.NewReader(c)
}

// A hijacked stream's head is the status line, the headers the middleware
// set with the stream's own, and Connection: close (the body ends when the
// connection does), for an HTTP/1.1 and an HTTP/1.0 request alike; its
// handler returns once the stream has started, the stream goes on, and it
// ends with a clean close when its stop is done.
func TestServeHTTPHijackedHead(t *testing.T) {
	for _, proto := range []string{"HTTP/1.1", "HTTP/1.0"} {
		t.Run(proto, func(t *testing.T) {
			s := newHijackServer(t, sse.StreamOptions{Heartbeat: time.Minute}, (*httptest.Server).Start)
			c, br := rawGet(t, s.Listener.Addr().String(), proto, 0)
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			tp := textproto.NewReader(br)
			status, err := tp.ReadLine()
			if err != nil {
				t.Fatal(err)
			}
			hd, err := tp.ReadMIMEHeader()
			if err != nil {
				t.Fatal(err)
			}
			if hd.Get("Date") == "" {
				t.Error("no Date header")
			}
			hd.Del("Date")
			want := textproto.MIMEHeader{
				"Access-Control-Allow-Origin": {"https://ui.example"},
				"Cache-Control":               {"no-cache"},
				"Connection":                  {"close"},
				"Content-Type":                {"text/event-stream"},
				"X-Accel-Buffering":           {"no"},
				"X-Request-Id":                {"r-1"},
			}
			if d := cmp.Diff("HTTP/1.1 200 OK", status); d != "" {
				t.Errorf("status line (-want +got):\n%s", d)
			}
			if d := cmp.Diff(want, hd); d != "" {
				t.Errorf("head (-want +got):\n%s", d)
			}
			select {
			case <-s.handled:
			case <-time.After(10 * time.Second):
				t.Fatal("the handler did not return once the stream started")
			}
			s.frames <- sse.Frame{ID: "1", Event: "event", Data: []byte(`{"a":1}`)}
			want2 := "retry: 2000\n\nid: 0\n\nid: 1\nevent: event\ndata: {\"a\":1}\n\n"
			got := make([]byte, len(want2))
			if _, err := io.ReadFull(br, got); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want2, string(got)); d != "" {
				t.Errorf("body (-want +got):\n%s", d)
			}
			s.subs.end()
			rest, err := io.ReadAll(br)
			if err != nil || len(rest) != 0 {
				t.Errorf("after stop: %q, %v; want a clean close", rest, err)
			}
			if reset := <-s.subs.left; reset {
				t.Error("Leave(reset) for a stream that was stopped")
			}
		})
	}
}

// A hijacked stream has no reader on its connection: it finds its client
// gone at its next wake-up (at most one heartbeat) with a peek, whether the
// client closed or only half-closed its side, and leaves.
func TestServeHTTPHijackedClientGone(t *testing.T) {
	const beat = 200 * time.Millisecond
	for _, tc := range []struct {
		name  string
		leave func(net.Conn) error
	}{
		{"close", net.Conn.Close},
		{"half-close", func(c net.Conn) error { return c.(*net.TCPConn).CloseWrite() }},
		{"a byte, then close", func(c net.Conn) error { _, _ = c.Write([]byte("x")); return c.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newHijackServer(t, sse.StreamOptions{Heartbeat: beat}, (*httptest.Server).Start)
			c, br := rawGet(t, s.Listener.Addr().String(), "HTTP/1.1", 0)
			tp := textproto.NewReader(br)
			if _, err := tp.ReadLine(); err != nil { // the status line
				t.Fatal(err)
			}
			if _, err := tp.ReadMIMEHeader(); err != nil {
				t.Fatal(err)
			}
			<-s.handled
			left := time.Now()
			if err := tc.leave(c); err != nil {
				t.Fatal(err)
			}
			select {
			case reset := <-s.subs.left:
				if reset {
					t.Error("Leave(reset) for a client that left")
				}
				// One heartbeat, and the scheduler's slack under -race on a
				// shared machine.
				if took := time.Since(left); took > beat+time.Second {
					t.Errorf("found the client gone after %v, want within one heartbeat (%v)", took, beat)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the stream did not find its client gone")
			}
		})
	}
}

// A hijacked stream whose client stops reading is reset after the write
// timeout, as through net/http, and its connection is closed.
func TestServeHTTPHijackedStall(t *testing.T) {
	s := newHijackServer(t, sse.StreamOptions{WriteTimeout: 100 * time.Millisecond, Heartbeat: time.Minute}, (*httptest.Server).Start)
	c, _ := rawGet(t, s.Listener.Addr().String(), "HTTP/1.1", 4<<10)
	data := []byte(`"` + strings.Repeat("x", 256<<10) + `"`)
	go func() {
		for i := range 64 { // 16 MiB: more than the sockets' buffers hold
			select {
			case s.frames <- sse.Frame{ID: fmt.Sprint(i + 1), Event: "event", Data: data}:
			case <-time.After(10 * time.Second):
				return
			}
		}
	}()
	select {
	case reset := <-s.subs.left:
		if !reset {
			t.Error("Leave(reset=false), want the stalled client reset")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the stalled client was not reset")
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil && !strings.Contains(err.Error(), "reset") {
		t.Errorf("the stalled connection: %v, want it closed by the server", err)
	}
}

// Writers that cannot be hijacked keep the ResponseWriter path, the
// stream running in its handler until it ends: HTTP/2 (the stream has no
// Connection header and its handler has not returned while it streams),
// and a recorder. HTTP/1.1 over TLS is hijacked as over TCP, and finds its
// client gone (a close_notify alert, then the end) at its next wake-up.
func TestServeHTTPUnhijackable(t *testing.T) {
	for _, tc := range []struct {
		name       string
		h2         bool
		wantProto  int
		wantClose  bool // Connection: close, the hijacked head
		wantReturn bool // the handler returned while the stream runs
	}{
		{"HTTP/2 over TLS", true, 2, false, false},
		{"HTTP/1.1 over TLS", false, 1, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newHijackServer(t, sse.StreamOptions{Heartbeat: 200 * time.Millisecond}, func(srv *httptest.Server) {
				srv.EnableHTTP2 = tc.h2
				srv.StartTLS()
			})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", s.URL+"/feed", nil)
			req.Header.Set("Accept", "text/event-stream")
			res, err := s.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			line, err := bufio.NewReader(res.Body).ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			returned := false
			select {
			case <-s.handled:
				returned = true
			case <-time.After(100 * time.Millisecond):
			}
			type view struct {
				Proto           int
				Close           bool
				Type, RequestID string
				First           string
				Returned        bool
			}
			got := view{res.ProtoMajor, res.Close, res.Header.Get("Content-Type"), res.Header.Get("X-Request-Id"), line, returned}
			want := view{tc.wantProto, tc.wantClose, "text/event-stream", "r-1", "retry: 2000\n", tc.wantReturn}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			cancel()
			select {
			case <-s.subs.left:
			case <-time.After(10 * time.Second):
				t.Fatal("the stream did not end when its client left")
			}
		})
	}
	t.Run("recorder", func(t *testing.T) {
		sub := newSubs()
		ctx, cancel := context.WithCancel(context.Background())
		req := httptest.NewRequestWithContext(ctx, "GET", "/feed", nil)
		rec := httptest.NewRecorder()
		read := func(ctx context.Context, after string, wait time.Duration) ([]sse.Frame, string, error) {
			cancel() // the client leaves after the first write
			<-ctx.Done()
			return nil, after, ctx.Err()
		}
		if err := sse.ServeHTTP(rec, req, sub, "f", "", nil, "0", read, sse.StreamOptions{Hijack: true}); err != nil {
			t.Fatal(err)
		}
		got := []string{rec.Header().Get("Content-Type"), rec.Header().Get("Connection"), rec.Body.String()}
		if d := cmp.Diff([]string{"text/event-stream", "", "retry: 2000\n\nid: 0\n\n"}, got); d != "" {
			t.Errorf("recorded (-want +got):\n%s", d)
		}
		if len(sub.left) != 1 {
			t.Errorf("%d Leave, want 1 before ServeHTTP returned", len(sub.left))
		}
	})
}

// A panic in a hijacked stream (no net/http below it to recover) ends the
// stream: its connection is closed, it leaves, and the panic is logged to
// the server's ErrorLog.
func TestServeHTTPHijackedPanic(t *testing.T) {
	sub := newSubs()
	var (
		mu   sync.Mutex
		logs strings.Builder
		once sync.Once
	)
	logged := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		read := func(context.Context, string, time.Duration) ([]sse.Frame, string, error) { panic("boom") }
		_ = sse.ServeHTTP(w, r, sub, "f", "", nil, "0", read, sse.StreamOptions{Hijack: true})
	}))
	srv.Config.ErrorLog = log.New(writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		logs.Write(b)
		once.Do(func() { close(logged) })
		return len(b), nil
	}), "", 0)
	srv.Start()
	defer srv.Close()
	c, br := rawGet(t, srv.Listener.Addr().String(), "HTTP/1.1", 0)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, br); err != nil {
		t.Errorf("the connection after the panic: %v, want it closed", err)
	}
	select {
	case <-sub.left:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not leave")
	}
	<-logged
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "panic serving a stream") || !strings.Contains(logs.String(), "boom") {
		t.Errorf("ErrorLog: %q, want the panic", logs.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// A stream stopped (route.Subscribers' stop: a graceful shutdown) while a
// write is blocked on a client that stopped reading does not hold the
// shutdown for its write deadline (twice WriteTimeout, then as long again
// for the reset frame): its connection is closed under it after a short
// grace, and it leaves.
func TestServeHTTPHijackedStopUnblocksAWrite(t *testing.T) {
	s := newHijackServer(t, sse.StreamOptions{WriteTimeout: 10 * time.Second, Heartbeat: time.Minute}, (*httptest.Server).Start)
	c, _ := rawGet(t, s.Listener.Addr().String(), "HTTP/1.1", 4<<10)
	data := []byte(`"` + strings.Repeat("x", 256<<10) + `"`)
	for i := range 32 { // 8 MiB: more than the sockets' buffers hold
		s.frames <- sse.Frame{ID: fmt.Sprint(i + 1), Event: "event", Data: data}
	}
	time.Sleep(500 * time.Millisecond) // the stream is blocked in a write
	stopped := time.Now()
	s.subs.end()
	select {
	case <-s.subs.left:
		if took := time.Since(stopped); took > 5*time.Second {
			t.Errorf("the stopped stream left after %v", took)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the stopped stream, blocked in a write, did not leave")
	}
	_ = c.Close()
}

// The hijacked head drops the framing headers a middleware set, in any
// spelling (a key set straight into the map is not canonical): a
// content-length there would end the stream for its client after that
// many bytes. CR and LF in a value, and an invalid name, cannot break it.
func TestServeHTTPHijackedHeadFraming(t *testing.T) {
	read := func(ctx context.Context, after string, _ time.Duration) ([]sse.Frame, string, error) {
		<-ctx.Done()
		return nil, after, ctx.Err()
	}
	subs := newSubs()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Evil", "a\r\nInjected: b\r\n\r\nbody")
		w.Header()["Bad Key\r\nInjected"] = []string{"v"}
		w.Header()["content-length"] = []string{"4"}
		w.Header()["transfer-encoding"] = []string{"chunked"}
		_ = sse.ServeHTTP(w, r, subs, "f", "", nil, "0", read, sse.StreamOptions{Hijack: true})
	}))
	defer srv.Close()
	defer subs.end()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	var head strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("head %q: %v", head.String(), err)
		}
		head.WriteString(line)
		if line == "\r\n" {
			break
		}
	}
	h := strings.ToLower(head.String())
	for _, bad := range []string{"content-length", "transfer-encoding", "\r\ninjected"} {
		if strings.Contains(h, bad) {
			t.Errorf("head has %q:\n%s", bad, head.String())
		}
	}
}
