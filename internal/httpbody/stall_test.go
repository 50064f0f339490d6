package httpbody_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/internal/httpbody"
)

const testStall = 300 * time.Millisecond

// stallServer serves echo behind a budget of testMax bytes with the stall
// timeout testStall, and a read timeout far beyond it.
func stallServer(t *testing.T) (*httptest.Server, *httpbody.Budget) {
	t.Helper()
	b, err := httpbody.NewBudget(testMax, time.Second, testStall)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(b.Handler(echo(nil)))
	srv.Config.ReadTimeout = time.Minute
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, b
}

// TestReadStall: a body from which no byte arrives for the stall timeout
// is answered 408 body_timeout well before the server's read timeout, and
// its share of the budget is given back before the answer is written, so
// that idle uploads cannot starve the others (the hostile-input rules,
// Memory per request). It holds wherever the body stops: before its first
// byte, after some, or inside a content coding.
func TestReadStall(t *testing.T) {
	head := "POST / HTTP/1.1\r\nHost: x\r\n"
	for _, tt := range []struct{ name, req string }{
		{"nothing sent", head + "Content-Length: 60000\r\n\r\n"},
		{"some sent", head + "Content-Length: 60000\r\n\r\n[" + strings.Repeat(`{"a":1},`, 4000)},
		{"chunked", head + "Transfer-Encoding: chunked\r\n\r\n2\r\n[1\r\n"},
		{"gzip", head + "Content-Encoding: gzip\r\nContent-Length: 100\r\n\r\n" + string(gz([]byte("[]"))[:12])},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, b := stallServer(t)
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			if _, err := io.WriteString(c, tt.req); err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(start.Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			held := b.InUse()
			if d := cmp.Diff(answer{408, "body_timeout", ""}, answerOf(t, resp)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			if took := time.Since(start); took < testStall || took > 5*time.Second {
				t.Errorf("answered after %s, want after the stall timeout of %s and long before the read timeout", took, testStall)
			}
			if held != 0 {
				t.Errorf("InUse when the 408 arrived: %d, want 0", held)
			}
			if got := b.Stalled(); got != 1 {
				t.Errorf("Stalled: %d, want 1", got)
			}
			if !resp.Close {
				t.Errorf("the 408 keeps the connection open; want Connection: close")
			}
		})
	}
}

// TestReadSlowButSteady: the stall timeout counts the wait for the next
// byte, not the body's whole: a body that keeps arriving in small pieces,
// each within the stall timeout, for many times the stall timeout in all,
// is read whole.
func TestReadSlowButSteady(t *testing.T) {
	srv, b := stallServer(t)
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const pieces, piece = 16, 1 << 10
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", pieces*piece)
	for range pieces { // 16 pieces, testStall/3 apart: about 5 stall timeouts in all
		time.Sleep(testStall / 3)
		if _, err := c.Write([]byte(strings.Repeat("x", piece))); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(answer{200, fmt.Sprintf("%d:xxxxxxxxxxxxxxxx", pieces*piece), ""}, answerOf(t, resp)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if got := b.Stalled(); got != 0 {
		t.Errorf("Stalled: %d, want 0", got)
	}
}

// TestReadStallNotOffered: where the ResponseWriter cannot move the read
// deadline, the stall timeout does not apply and the body is read as
// usual.
func TestReadStallNotOffered(t *testing.T) {
	b, err := httpbody.NewBudget(testMax, time.Second, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() {
		time.Sleep(50 * time.Millisecond) // many stall timeouts
		_, _ = io.WriteString(pw, "[]")
		_ = pw.Close()
	}()
	w := httptest.NewRecorder()
	b.Handler(echo(nil)).ServeHTTP(w, httptest.NewRequest("POST", "/", pr))
	if got, want := w.Code, 200; got != want || w.Body.String() != "2:[]" {
		t.Errorf("answer %d %q, want %d %q", got, w.Body.String(), want, "2:[]")
	}
}
