package server

import (
	"context"
	"time"

	"bufio"
	"bytes"
	"fmt"
	"github.com/tallyhq/tally/correlate"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// halfClosedExchange sends raw (one or more HTTP/1.1 requests) over a real
// TCP connection to addr, shuts down the write side (shutdown(SHUT_WR), as
// some clients and proxies do after the body), and returns the statuses
// and bodies of the answers read until the server closes.
func halfClosedExchange(t *testing.T, addr, raw string) (statuses []int, bodies []string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return statuses, bodies // the server closed: no further answer
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
		bodies = append(bodies, string(b))
	}
}

func rawPost(path, token string, body []byte) string {
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: tally\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		path, token, len(body), body)
}

// docs/decisions.md, A 2xx answer: "Sent only once the request's effect is
// durably stored; a request the server did not complete is never answered
// 2xx." A client that half-closes its connection after the body still
// reads the answer; net/http cancels the request's context when it reads
// the EOF, which used to fail the store call and leave net/http to send an
// implicit, empty 200 with nothing stored. Over a real socket, on both
// stores: every answer is the real one and what it reports is stored.
func TestHalfClosedConnectionIsAnsweredTruthfully(t *testing.T) {
	bothStores(t, func(t *testing.T, st Store) {
		logs := &syncBuffer{}
		h, err := New(st, Options{Authenticator: testAuthenticator(t), Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		defer srv.Close()
		addr := srv.Listener.Addr().String()

		items := make([]string, 500)
		for i := range items {
			items[i] = hostileEvent(fmt.Sprintf("hc-%03d", i), "", "")
		}
		before := countStore(t, st)
		statuses, bodies := halfClosedExchange(t, addr, rawPost("/api/v1/events", tokIngest, batchOf(items...)()))
		if diff := cmp.Diff([]int{200}, statuses); diff != "" {
			t.Fatalf("batch statuses (-want +got):\n%s", diff)
		}
		if !strings.Contains(bodies[0], `"accepted":500`) {
			t.Errorf("batch answer %q, want accepted 500", bodies[0])
		}
		if diff := cmp.Diff(counts{Events: 500}, countStore(t, st).sub(before)); diff != "" {
			t.Errorf("stored (-want +got):\n%s", diff)
		}

		// Three pipelined creates, then the half-close.
		var raw strings.Builder
		for i := range 3 {
			raw.WriteString(rawPost("/api/events", tokEvents, fmt.Appendf(nil, `{"category":"c","action":"a","correlationKey":"hc-%d"}`, i)))
		}
		before = countStore(t, st)
		statuses, _ = halfClosedExchange(t, addr, raw.String())
		// Each answered request is answered truthfully: a 201 is stored.
		for _, s := range statuses {
			if s != http.StatusCreated {
				t.Errorf("pipelined create answered %d, want 201", s)
			}
		}
		if got := countStore(t, st).sub(before).Correlated; got != len(statuses) {
			t.Errorf("%d creates answered, %d stored", len(statuses), got)
		}
		if len(statuses) == 0 {
			t.Error("no pipelined create was answered")
		}
		if n := strings.Count(logs.String(), `route="POST /api/events" path=/api/events status=201`); n != len(statuses) {
			t.Errorf("access log: %d creates logged 201, %d answered:\n%s", n, len(statuses), logs.String())
		}
	})
}

// A request whose client went away before its answer (a half-closed GET:
// net/http cancels its context, the store call fails as cancelled) must
// not get net/http's implicit, empty 200: it gets its real answer or the
// connection is aborted; the access log and the request metric record
// the status actually sent ("aborted" when none was).
func TestGoneClientIsNeverAnsweredAnEmpty200(t *testing.T) {
	logs := &syncBuffer{}
	st := memStore(t)
	st.Correlate = waitForCancel{st.Correlate}
	h, err := New(st, Options{Authenticator: testAuthenticator(t), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	raw := "GET /api/events/list HTTP/1.1\r\nHost: tally\r\nAuthorization: Bearer " + tokEvents + "\r\n\r\n"
	answered := 0
	for range 5 {
		statuses, bodies := halfClosedExchange(t, srv.Listener.Addr().String(), raw)
		for i, s := range statuses {
			answered++
			if s != http.StatusOK || !strings.Contains(bodies[i], `"data"`) {
				t.Errorf("answer %d %q, want 200 with the data or no answer", s, bodies[i])
			}
		}
	}
	// Every request is logged with the status sent: answered ones 200, the
	// others status 0 and aborted=true (a number, as log pipelines read it).
	lines := strings.Count(logs.String(), `route="GET /api/events/list"`)
	ok := strings.Count(logs.String(), `route="GET /api/events/list" path=/api/events/list status=200`)
	aborted := strings.Count(logs.String(), `route="GET /api/events/list" path=/api/events/list status=0 `)
	aborted = min(aborted, strings.Count(logs.String(), ` aborted=true`))
	if answered != 0 || lines != 5 || aborted != 5 || ok != 0 {
		t.Errorf("%d answered; log lines %d, status=200 %d, status=0 aborted=true %d:\n%s", answered, lines, ok, aborted, logs.String())
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if want := fmt.Sprintf(`tally_http_request_duration_seconds_count{code="aborted",route="GET /api/events/list"} %d`, 5); !strings.Contains(w.Body.String(), want) {
		t.Errorf("metrics lack %q", want)
	}
}

// waitForCancel is a correlation store whose List waits (at most 10 s) for
// the request's context to end, as a slow query would, and fails with its
// error.
type waitForCancel struct{ correlate.Store }

func (s waitForCancel) List(ctx context.Context, c correlate.Caller, q correlate.Query) (correlate.Listing, error) {
	select {
	case <-ctx.Done():
		return correlate.Listing{}, ctx.Err()
	case <-time.After(10 * time.Second):
		return s.Store.List(ctx, c, q)
	}
}
