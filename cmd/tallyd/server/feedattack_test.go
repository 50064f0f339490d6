package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// The tokens of attackAuthenticator: two organizations, two users of one.
const (
	atkIngest = "t-ingest-token-01"
	atkReadA  = "t-read-token-000a"  // read, organization a
	atkReadB  = "t-read-token-000b"  // read, organization b
	atkEvAU   = "t-events-token-au"  // events, (a, u)
	atkEvAV   = "t-events-token-av"  // events, (a, v)
	atkEvB    = "t-events-token-bu"  // events, (b, u)
	atkAdmin  = "t-admin-token-001x" // admin
)

func attackAuthenticator(t testing.TB) *Authenticator {
	t.Helper()
	creds, err := ParseCredentials([]byte(`{"credentials":[
	  {"name":"col","token":"t-ingest-token-01","roles":["ingest"],"platform":"openstack","cloud":"os-a"},
	  {"name":"ops","token":"t-admin-token-001x","roles":["admin"]},
	  {"name":"ra","token":"t-read-token-000a","roles":["read"],"organization":"a"},
	  {"name":"rb","token":"t-read-token-000b","roles":["read"],"organization":"b"},
	  {"name":"au","token":"t-events-token-au","roles":["events"],"organization":"a","user":"u"},
	  {"name":"av","token":"t-events-token-av","roles":["events"],"organization":"a","user":"v"},
	  {"name":"bu","token":"t-events-token-bu","roles":["events"],"organization":"b","user":"u"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAuthenticator(creds, AuthenticatorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// atk is a tallyd under attack.
type atk struct {
	t   testing.TB
	srv *httptest.Server
}

func newAtk(t testing.TB, st Store, opts Options) *atk {
	t.Helper()
	if opts.Authenticator == nil {
		opts.Authenticator = attackAuthenticator(t)
	}
	h, err := New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &atk{t: t, srv: srv}
}

func (a *atk) do(method, path, tok, body string, hdr map[string]string) (int, http.Header, []byte) {
	a.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, a.srv.URL+path, rd)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, b
}

// ingest stores n lifecycle events numbered from first.
func (a *atk) ingest(prefix string, first, n int) {
	a.t.Helper()
	for n > 0 {
		k := min(n, 500)
		items := make([]string, k)
		for i := range items {
			items[i] = hostileEvent(fmt.Sprintf("%s%d", prefix, first+i), "", "")
		}
		code, _, b := a.do("POST", "/api/v1/events", atkIngest, "["+strings.Join(items, ",")+"]", nil)
		if code >= 300 {
			a.t.Fatalf("ingest: %d %s", code, b)
		}
		first, n = first+k, n-k
	}
}

type lifecyclePage struct {
	Items []struct {
		EventID  string `json:"event_id"`
		Position string `json:"position"`
	} `json:"items"`
	NextCursor string `json:"next_cursor"`
	CaughtUp   bool   `json:"caught_up"`
}

// Hostile parameters on both long-poll routes and the stream: never a 5xx,
// always 400 naming the parameter.
func TestFeedAttackParameters(t *testing.T) {
	a := newAtk(t, memStore(t), Options{})
	a.ingest("p", 0, 3)
	long := strings.Repeat("A", 10<<10)
	type row struct {
		path, member string
	}
	var rows []row
	for _, base := range []string{"/api/v1/events/feed", "/api/events/feed"} {
		for _, q := range []struct{ q, member string }{
			{"limit=-1", "/limit"}, {"limit=0", "/limit"}, {"limit=1001", "/limit"}, {"limit=abc", "/limit"},
			{"limit=99999999999999999999999", "/limit"}, {"limit=1e3", "/limit"}, {"limit=%20%31", "/limit"},
			{"wait=-1", "/wait"}, {"wait=31", "/wait"}, {"wait=abc", "/wait"}, {"wait=1.5", "/wait"},
			{"wait=99999999999999999999999", "/wait"}, {"wait=9223372036854775807", "/wait"},
			{"after=" + long, "/after"}, {"after=now&after=now", "/after"}, {"limit=1&limit=2", "/limit"},
			{"wait=1&wait=1", "/wait"}, {"after=%00", "/after"}, {"after=NOW", "/after"}, {"after=now%20", "/after"},
		} {
			rows = append(rows, row{base + "?" + q.q, q.member})
		}
	}
	for _, r := range rows {
		tok := atkReadA
		name := r.path
		if len(name) > 80 {
			name = name[:80]
		}
		t.Run(name, func(t *testing.T) {
			code, _, b := a.do("GET", r.path, tok, "", nil)
			if code != 400 || !strings.Contains(string(b), `"`+r.member+`"`) {
				t.Errorf("%d %.300s; want 400 naming %s", code, b, r.member)
			}
		})
	}
	// The streams refuse them before streaming.
	for _, p := range []string{"/api/v1/events/feed?after=" + long, "/api/events/subscribe?after=" + long, "/api/events/subscribe?limit=5", "/api/events/subscribe?after=now&after=now"} {
		code, hd, b := a.do("GET", p, atkReadA, "", map[string]string{"Accept": "text/event-stream"})
		if code != 400 || strings.HasPrefix(hd.Get("Content-Type"), "text/event-stream") {
			t.Errorf("stream %.60s: %d %s %.200s; want 400", p, code, hd.Get("Content-Type"), b)
		}
	}
}

// Other methods on the feed routes: never a 5xx, never a stream.
func TestFeedAttackMethods(t *testing.T) {
	a := newAtk(t, memStore(t), Options{})
	for _, p := range []string{"/api/v1/events/feed", "/api/events/feed", "/api/events/subscribe"} {
		for _, m := range []string{"HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE"} {
			code, hd, _ := a.do(m, p, atkReadA, "", map[string]string{"Accept": "text/event-stream"})
			if code >= 500 || (m != "HEAD" && m != "OPTIONS" && code < 400) {
				t.Errorf("%s %s: %d", m, p, code)
			}
			_ = hd
		}
	}
	// A HEAD that had started a stream held its connection for ever (its
	// writes are discarded): the next request on the kept-alive
	// connection, above, timed out. The subscribers are all gone.
	code, _, b := a.do("GET", "/metrics", "", "", nil)
	if l := grepLines(b, "tally_feed_subscribers{"); code != 200 || strings.Contains(strings.ReplaceAll(l, "} 0", ""), "}") {
		t.Errorf("metrics: %d, want no lifecycle subscriber left:\n%s", code, grepLines(b, "tally_feed_subscribers"))
	}
}

func grepLines(b []byte, s string) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Accept variants: q=0 is a refusal; */* and other types get JSON; any
// non-zero q, including 0.001, asks for the stream.
func TestFeedAttackAccept(t *testing.T) {
	a := newAtk(t, memStore(t), Options{})
	for _, c := range []struct {
		accept string
		stream bool
	}{
		{"text/event-stream", true},
		{"TEXT/Event-Stream", true},
		{"text/event-stream;q=0", false},
		{"text/event-stream; q=0.000", false},
		{"text/event-stream;q=0.5", true},
		{"text/event-stream;q=0.001", true},
		{"text/event-stream;q=0.05", true},
		{"*/*", false},
		{"text/*", false},
		{"application/json, text/event-stream", true},
		{"", false},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", a.srv.URL+"/api/v1/events/feed", nil)
		req.Header.Set("Authorization", "Bearer "+atkReadA)
		if c.accept != "" {
			req.Header.Set("Accept", c.accept)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got := strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream")
		res.Body.Close()
		cancel()
		if res.StatusCode != 200 || got != c.stream {
			t.Errorf("Accept %q: %d, stream %v; want 200, stream %v", c.accept, res.StatusCode, got, c.stream)
		}
	}
}

// 1,000 random mutations of a valid cursor: never a 5xx, and a mutation the
// server accepts reads exactly what the valid cursor reads.
func TestFeedAttackCursorMutations(t *testing.T) {
	a := newAtk(t, memStore(t), Options{})
	a.ingest("m", 0, 5)
	for _, c := range []struct{ path, key string }{{"/api/v1/events/feed", "items"}, {"/api/events/feed", "items"}} {
		tok := atkReadA
		if c.path == "/api/events/feed" {
			tok = atkEvAU
			for i := range 5 {
				code, _, b := a.do("POST", "/api/events", tok, fmt.Sprintf(`{"category":"c","action":"a","correlationKey":"k%d"}`, i), nil)
				if code >= 300 {
					t.Fatalf("create: %d %s", code, b)
				}
			}
		}
		_, _, b := a.do("GET", c.path+"?limit=2", tok, "", nil)
		var p lifecyclePage
		if err := json.Unmarshal(b, &p); err != nil || len(p.Items) != 2 {
			t.Fatalf("%s: %s", c.path, b)
		}
		valid := p.Items[1].Position
		_, _, want := a.do("GET", c.path+"?after="+url.QueryEscape(valid), tok, "", nil)
		rng := rand.New(rand.NewPCG(1, 2))
		alphabet := "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=+/%\r\n\x00 ."
		for i := range 1000 {
			m := []byte(valid)
			switch rng.IntN(4) {
			case 0: // replace a character
				m[rng.IntN(len(m))] = alphabet[rng.IntN(len(alphabet))]
			case 1: // insert one
				j := rng.IntN(len(m) + 1)
				m = append(m[:j], append([]byte{alphabet[rng.IntN(len(alphabet))]}, m[j:]...)...)
			case 2: // drop one
				j := rng.IntN(len(m))
				m = append(m[:j], m[j+1:]...)
			case 3: // flip a bit
				j := rng.IntN(len(m))
				m[j] ^= 1 << rng.IntN(8)
			}
			code, _, got := a.do("GET", c.path+"?after="+url.QueryEscape(string(m)), tok, "", nil)
			switch {
			case code >= 500:
				t.Errorf("%s mutation %d %q: %d %s", c.path, i, m, code, got)
			case code == 200 && !bytes.Equal(got, want):
				t.Errorf("%s mutation %d %q accepted and read %s; the valid cursor reads %s", c.path, i, m, got, want)
			case code != 200 && code != 400:
				t.Errorf("%s mutation %d %q: %d", c.path, i, m, code)
			}
		}
	}
}

// Last-Event-ID with CR, LF or NUL, sent raw: never a 5xx, never a stream
// from anywhere but a valid cursor.
func TestFeedAttackLastEventIDControl(t *testing.T) {
	a := newAtk(t, memStore(t), Options{})
	a.ingest("l", 0, 2)
	host := strings.TrimPrefix(a.srv.URL, "http://")
	for _, path := range []string{"/api/v1/events/feed", "/api/events/subscribe"} {
		tok := atkReadA
		for _, id := range []string{"abc\rdef", "abc\x00", "\x00", "now\r", "a\r\nX-Injected: 1"} {
			conn, err := net.Dial("tcp", host)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nAccept: text/event-stream\r\nLast-Event-ID: %s\r\nConnection: close\r\n\r\n", path, tok, id)
			_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			br := bufio.NewReader(conn)
			status, _ := br.ReadString('\n')
			conn.Close()
			if !strings.Contains(status, " 400 ") {
				t.Errorf("%s Last-Event-ID %q: %q, want 400", path, id, status)
			}
		}
	}
}

// Clients that vanish mid-stream leave no goroutine behind.
func TestFeedAttackVanishingClients(t *testing.T) {
	a := newAtk(t, memStore(t), Options{})
	a.ingest("v", 0, 20)
	http.DefaultClient.CloseIdleConnections()
	time.Sleep(100 * time.Millisecond)
	base := runtime.NumGoroutine()
	for i := range 200 {
		path := "/api/v1/events/feed"
		if i%2 == 1 {
			path = "/api/events/subscribe"
		}
		conn, err := net.Dial("tcp", strings.TrimPrefix(a.srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nAccept: text/event-stream\r\n\r\n", path, atkReadA)
		_ = conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, _ = io.ReadFull(conn, make([]byte, 100+i))
		conn.Close()
	}
	deadline := time.Now().Add(15 * time.Second)
	for runtime.NumGoroutine() > base+5 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base+5 {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Errorf("%d goroutines 15 s after 200 clients vanished, %d before:\n%.6000s", n, base, buf)
	}
}

// Many subscribers that never read do not stop the server from storing.
func TestFeedAttackSilentSubscribers(t *testing.T) {
	if testing.Short() {
		t.Skip("2,000 connections")
	}
	a := newAtk(t, memStore(t), Options{})
	a.ingest("s", 0, 3000)
	host := strings.TrimPrefix(a.srv.URL, "http://")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range 2000 {
		path := "/api/v1/events/feed"
		if i%2 == 1 {
			path = "/api/events/subscribe"
		}
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4096)
		}
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nAccept: text/event-stream\r\n\r\n", path, atkReadA)
		conns = append(conns, c)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 20)
	for w := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				body := "[" + hostileEvent(fmt.Sprintf("x%d-%d", w, i), "", "") + "]"
				start := time.Now()
				req, _ := http.NewRequest("POST", a.srv.URL+"/api/v1/events", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+atkIngest)
				req.Header.Set("Content-Type", "application/json")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- err.Error()
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if d := time.Since(start); res.StatusCode >= 300 || d > 2*time.Second {
					errs <- fmt.Sprintf("POST: %d in %v", res.StatusCode, d)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
