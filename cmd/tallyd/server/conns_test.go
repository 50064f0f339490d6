package server

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// get sends GET path on c and reads the answer's status; the connection
// stays open (keep-alive).
func get(t *testing.T, c net.Conn, path string) int {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// TestConnLimiterShedsIdle: Connections: "at the cap, idle
// keep-alive connections are shed to make room for new requests".
func TestConnLimiterShedsIdle(t *testing.T) {
	l, err := NewConnLimiter(ConnLimiterOptions{Max: 2})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(healthz))
	srv.Listener = l.Listener(srv.Listener)
	srv.Config.ConnState = l.ConnState
	srv.Start()
	defer srv.Close()
	addr := srv.Listener.Addr().String()

	var conns []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if got := get(t, c, "/healthz"); got != 200 {
			t.Fatalf("GET /healthz: %d", got)
		}
		conns = append(conns, c)
		if len(conns) < 3 {
			// The client reads the answer before the server marks the
			// connection idle; under load that mark can come after the
			// next connection's, which would make the next one the
			// longest idle. Wait for the limiter to see this one idle.
			waitIdle(t, l, len(conns))
		}
	}
	if l.Shed() != 1 {
		t.Errorf("Shed() = %d, want 1 (the first connection, idle the longest)", l.Shed())
	}
	// The first connection was closed by the server.
	_ = conns[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := conns[0].Read(make([]byte, 1)); err == nil {
		t.Errorf("the shed connection is still open (read %d bytes)", n)
	}
	// The second is still served.
	if got := get(t, conns[1], "/healthz"); got != 200 {
		t.Errorf("GET /healthz on a kept connection: %d", got)
	}
	if got := l.Open(); got > 2 {
		t.Errorf("Open() = %d, over the cap of 2", got)
	}
}

// waitIdle waits (at most 10 s) until l counts n idle connections.
func waitIdle(t *testing.T, l *ConnLimiter, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.mu.Lock()
		idle := 0
		for _, info := range l.states {
			if info.state == http.StateIdle {
				idle++
			}
		}
		l.mu.Unlock()
		if idle == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the limiter counts %d idle connections, want %d", idle, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestConnLimiterWaitsForBusy: a connection busy with a request is never
// shed; a new one waits until a place frees.
func TestConnLimiterWaitsForBusy(t *testing.T) {
	l, err := NewConnLimiter(ConnLimiterOptions{Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	busy := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(busy)
			<-release
		}
		w.WriteHeader(204)
	}))
	srv.Listener = l.Listener(srv.Listener)
	srv.Config.ConnState = l.ConnState
	srv.Start()
	defer srv.Close()
	addr := srv.Listener.Addr().String()

	slow := make(chan int)
	go func() {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			slow <- 0
			return
		}
		defer c.Close()
		_, _ = io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			slow <- 0
			return
		}
		slow <- resp.StatusCode
	}()
	<-busy
	fast := make(chan int)
	go func() {
		c, err := net.Dial("tcp", addr) // the kernel's backlog accepts it
		if err != nil {
			fast <- 0
			return
		}
		defer c.Close()
		_, _ = io.WriteString(c, "GET /fast HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			fast <- 0
			return
		}
		fast <- resp.StatusCode
	}()
	select {
	case got := <-fast:
		t.Fatalf("the new connection was served (%d) while the only place was busy", got)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if got := <-slow; got != 204 {
		t.Errorf("busy request: %d, want 204 (it must not be shed)", got)
	}
	if got := <-fast; got != 204 {
		t.Errorf("waiting request: %d, want 204", got)
	}
	if l.Shed() != 0 {
		t.Errorf("Shed() = %d, want 0", l.Shed())
	}
}

func TestDefaultMaxConns(t *testing.T) {
	if n := DefaultMaxConns(); n < 1 {
		t.Errorf("DefaultMaxConns() = %d", n)
	}
}

// The constructor idiom: the options are validated and every
// problem returned, joined.
func TestNewConnLimiterRefusesNegativeMax(t *testing.T) {
	if _, err := NewConnLimiter(ConnLimiterOptions{Max: -1}); err == nil || !strings.Contains(err.Error(), "Max (-1) is negative") {
		t.Errorf("NewConnLimiter(Max -1): %v, want an error naming Max", err)
	}
	l, err := NewConnLimiter(ConnLimiterOptions{})
	if err != nil || l.Max() != DefaultMaxConns() {
		t.Errorf("NewConnLimiter(Max 0): %v, %v; want the default cap", l, err)
	}
}

// The limiter behind the server's TLS (tallyd --tls-cert): the server hands
// ConnState the *tls.Conn over the limited connection, and a connection
// busy with a request is still never shed, nor an idle one kept, at the
// cap.
func TestConnLimiterOverTLS(t *testing.T) {
	l, err := NewConnLimiter(ConnLimiterOptions{Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	busy := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(busy)
			<-release
		}
		w.WriteHeader(204)
	}))
	srv.Listener = l.Listener(srv.Listener)
	srv.Config.ConnState = l.ConnState
	srv.StartTLS() // wraps the limited listener in TLS
	defer srv.Close()
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock() // before Close, which waits for the handler
	addr := srv.Listener.Addr().String()
	dial := func() (net.Conn, error) { return tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) }

	slow := make(chan int)
	go func() {
		c, err := dial()
		if err != nil {
			slow <- 0
			return
		}
		defer c.Close()
		_, _ = io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			slow <- 0
			return
		}
		slow <- resp.StatusCode
	}()
	<-busy
	// Past the grace of a new connection: a busy connection the limiter
	// saw only as new would now be shed.
	time.Sleep(newConnGrace + 200*time.Millisecond)
	fast := make(chan int)
	go func() {
		c, err := dial()
		if err != nil {
			fast <- 0
			return
		}
		defer c.Close()
		_, _ = io.WriteString(c, "GET /fast HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			fast <- 0
			return
		}
		fast <- resp.StatusCode
	}()
	select {
	case got := <-fast:
		t.Fatalf("the new connection was served (%d) while the only place was busy", got)
	case <-time.After(200 * time.Millisecond):
	}
	unblock()
	if got := <-slow; got != 204 {
		t.Errorf("busy request over TLS: %d, want 204 (it must not be shed)", got)
	}
	if got := <-fast; got != 204 {
		t.Errorf("waiting request over TLS: %d, want 204", got)
	}
}
