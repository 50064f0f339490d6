package httpbody_test

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"

	"github.com/tallyhq/tally/internal/httpbody"
	"github.com/tallyhq/tally/internal/problem"
)

const testMax = 64 << 10

// echo reads the body with httpbody.Read and answers its length and
// first bytes; a failure is answered by problem.Fail. Every error Read
// returned is sent on errs when errs is not nil.
func echo(errs chan<- error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := httpbody.Read(w, r, testMax)
		if errs != nil {
			errs <- err
		}
		if err != nil {
			var pe *problem.Error
			if !errors.As(err, &pe) && !errors.Is(err, problem.ErrClientGone) {
				w.WriteHeader(599) // never: every Read error is a refusal or a client gone
				return
			}
			problem.Fail(w, r, nil, "httpbody", err, nil)
			return
		}
		fmt.Fprintf(w, "%d:%s", len(b), b[:min(len(b), 16)])
	})
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}

func zl(b []byte) []byte {
	var buf bytes.Buffer
	zw := zlib.NewWriter(&buf)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}

func rawDeflate(b []byte) []byte {
	var buf bytes.Buffer
	zw, _ := flate.NewWriter(&buf, flate.BestCompression)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}

func zst(b []byte) []byte {
	zw, _ := zstd.NewWriter(nil)
	defer zw.Close()
	return zw.EncodeAll(b, nil)
}

type answer struct {
	Status int
	Code   string // the problem's code, or the echoed body
	Accept string // Accept-Encoding
}

func answerOf(t *testing.T, resp *http.Response) answer {
	t.Helper()
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{Status: resp.StatusCode, Code: string(b), Accept: resp.Header.Get("Accept-Encoding")}
	if resp.StatusCode >= 300 {
		var p struct{ Code string }
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("status %d, body %q is not a problem", resp.StatusCode, b)
		}
		a.Code = p.Code
	}
	return a
}

// TestReadCodings: Transport: "Decode gzip (and deflate or zstd
// where a well-kept library does it), with the body cap counted after
// decompression, so a zip bomb gets 413. Answer any other coding with 415
// and Accept-Encoding (RFC 9110)."
func TestReadCodings(t *testing.T) {
	srv := httptest.NewServer(echo(nil))
	defer srv.Close()
	doc := []byte(`[{"event_id":"e1"}]`)
	atCap := bytes.Repeat([]byte("a"), testMax)
	bomb := bytes.Repeat([]byte("a"), 20*testMax)
	for _, tt := range []struct {
		name    string
		coding  string
		body    []byte
		chunked bool
		want    answer
	}{
		{"identity", "", doc, false, answer{200, "19:" + string(doc[:16]), ""}},
		{"identity named", "identity", doc, false, answer{200, "19:" + string(doc[:16]), ""}},
		{"identity chunked", "", doc, true, answer{200, "19:" + string(doc[:16]), ""}},
		{"gzip", "gzip", gz(doc), false, answer{200, "19:" + string(doc[:16]), ""}},
		{"gzip chunked", "gzip", gz(doc), true, answer{200, "19:" + string(doc[:16]), ""}},
		{"x-gzip, any case", "X-GZip", gz(doc), false, answer{200, "19:" + string(doc[:16]), ""}},
		{"deflate (zlib)", "deflate", zl(doc), false, answer{200, "19:" + string(doc[:16]), ""}},
		{"deflate (raw)", "deflate", rawDeflate(doc), false, answer{200, "19:" + string(doc[:16]), ""}},
		{"zstd", "zstd", zst(doc), false, answer{200, "19:" + string(doc[:16]), ""}},
		{"gzip, exactly the cap decoded", "gzip", gz(atCap), false, answer{200, fmt.Sprintf("%d:%s", testMax, atCap[:16]), ""}},
		{"identity chunked, exactly the cap", "", atCap, true, answer{200, fmt.Sprintf("%d:%s", testMax, atCap[:16]), ""}},
		{"identity chunked, cap + 1", "", append(atCap, 'a'), true, answer{413, "body_too_large", ""}},
		{"identity declared, cap + 1", "", append(atCap, 'a'), false, answer{413, "body_too_large", ""}},
		{"gzip bomb: cap + 1 decoded", "gzip", gz(append(atCap, 'a')), false, answer{413, "body_too_large", ""}},
		{"gzip bomb: 20 × the cap decoded", "gzip", gz(bomb), true, answer{413, "body_too_large", ""}},
		{"deflate bomb", "deflate", zl(bomb), false, answer{413, "body_too_large", ""}},
		{"zstd bomb", "zstd", zst(bomb), false, answer{413, "body_too_large", ""}},
		{"br", "br", doc, false, answer{415, "unsupported_content_encoding", httpbody.AcceptEncoding}},
		{"compress", "compress", doc, false, answer{415, "unsupported_content_encoding", httpbody.AcceptEncoding}},
		{"two codings", "gzip, gzip", gz(gz(doc)), false, answer{415, "unsupported_content_encoding", httpbody.AcceptEncoding}},
		{"gzip label on a plain body", "gzip", doc, false, answer{400, "invalid_content_encoding", ""}},
		{"zstd label on a plain body", "zstd", doc, false, answer{400, "invalid_content_encoding", ""}},
		{"truncated gzip", "gzip", gz(doc)[:20], false, answer{400, "invalid_content_encoding", ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader = bytes.NewReader(tt.body)
			if tt.chunked {
				body = io.MultiReader(body) // hides the length: sent chunked
			}
			req, _ := http.NewRequest("POST", srv.URL, body)
			if tt.coding != "" {
				req.Header.Set("Content-Encoding", tt.coding)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, answerOf(t, resp)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// rawExchange sends req as bytes on a new connection, closes the sending
// side, and reads the answer.
func rawExchange(t *testing.T, addr, req string) answer {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	return answerOf(t, resp)
}

// TestReadClientFailures: Transport: "A malformed chunk length, a
// client that disconnects mid-body, or a body that trickles past the read
// timeout" are "answered 400 (or 408)", never 5xx (docs/decisions.md,
// Client-side body failures).
func TestReadClientFailures(t *testing.T) {
	srv := httptest.NewServer(echo(nil))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	head := "POST / HTTP/1.1\r\nHost: x\r\n"
	for _, tt := range []struct {
		name, req string
		want      answer
	}{
		{"malformed chunk length", head + "Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", answer{400, "invalid_body_framing", ""}},
		{"truncated chunked body", head + "Transfer-Encoding: chunked\r\n\r\n10\r\n[{\"event", answer{400, "body_incomplete", ""}},
		{"chunked body without its last chunk", head + "Transfer-Encoding: chunked\r\n\r\n2\r\n[]\r\n", answer{400, "body_incomplete", ""}},
		{"shorter than Content-Length", head + "Content-Length: 100\r\n\r\n[{\"event_id\"", answer{400, "body_incomplete", ""}},
		{"gzip, shorter than Content-Length", head + "Content-Encoding: gzip\r\nContent-Length: 100\r\n\r\n" + string(gz([]byte("[]"))[:12]), answer{400, "body_incomplete", ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if d := cmp.Diff(tt.want, rawExchange(t, addr, tt.req)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestReadTimeout: a body that trickles past the server's read timeout is
// 408 (Transport).
func TestReadTimeout(t *testing.T) {
	srv := httptest.NewUnstartedServer(echo(nil))
	srv.Config.ReadTimeout = 300 * time.Millisecond
	srv.Start()
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n[")
	// The rest never comes; the server's read deadline passes.
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(answer{408, "body_timeout", ""}, answerOf(t, resp)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// TestReadClientGone: a client that resets its connection mid-body gets no
// answer, and Read says ErrClientGone ("do not answer a client
// that is gone").
func TestReadClientGone(t *testing.T) {
	errs := make(chan error, 1)
	srv := httptest.NewServer(echo(errs))
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\n\r\n[")
	time.Sleep(50 * time.Millisecond) // let the server start reading the body
	_ = c.(*net.TCPConn).SetLinger(0) // close with a reset
	_ = c.Close()
	select {
	case err := <-errs:
		if !errors.Is(err, problem.ErrClientGone) {
			t.Errorf("Read: %v, want ErrClientGone", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler never returned")
	}
}

// TestBudget: Memory per request: "Beyond it, a request waits
// briefly, then gets 503 with Retry-After"; what a request was charged is
// given back when it ends.
func TestBudget(t *testing.T) {
	b, err := httpbody.NewBudget(100, 10*time.Millisecond, 0)
	if err != nil {
		t.Fatal(err)
	}
	hold, release := make(chan struct{}), make(chan struct{})
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := httpbody.Read(w, r, 100)
		if err != nil {
			problem.Fail(w, r, nil, "httpbody", err, nil)
			return
		}
		if string(body) == "hold" {
			hold <- struct{}{}
			<-release
		}
		fmt.Fprint(w, len(body))
	})
	srv := httptest.NewServer(b.Handler(inner))
	defer srv.Close()
	post := func(body string) answer {
		resp, err := srv.Client().Post(srv.URL, "application/json", io.MultiReader(strings.NewReader(body)))
		if err != nil {
			t.Fatal(err)
		}
		a := answerOf(t, resp)
		if resp.StatusCode == 503 {
			a.Accept = resp.Header.Get("Retry-After") // reused for the check below
		}
		return a
	}
	done := make(chan answer)
	go func() { done <- post("hold") }() // chunked: charged a first buffer of 100 (the whole budget)
	<-hold
	if got := b.InUse(); got != 100 {
		t.Errorf("InUse while held: %d, want 100", got)
	}
	if d := cmp.Diff(answer{503, "busy", "1"}, post("x")); d != "" {
		t.Errorf("over the budget (-want +got):\n%s", d)
	}
	close(release)
	if d := cmp.Diff(answer{200, "4", ""}, <-done); d != "" {
		t.Errorf("held request (-want +got):\n%s", d)
	}
	if d := cmp.Diff(answer{200, "1", ""}, post("x")); d != "" {
		t.Errorf("after release (-want +got):\n%s", d)
	}
	if got := b.InUse(); got != 0 {
		t.Errorf("InUse after: %d, want 0", got)
	}
}

func TestNewBudgetErrors(t *testing.T) {
	if _, err := httpbody.NewBudget(0, -1, -1); err == nil || !strings.Contains(err.Error(), "at least 1 byte") || !strings.Contains(err.Error(), "wait must not be negative") || !strings.Contains(err.Error(), "stall timeout must not be negative") {
		t.Errorf("NewBudget(0, -1, -1): %v, want all three problems", err)
	}
}

// A recycled body's memory is filled by later bodies, each read exactly,
// whether it is smaller or larger than the recycled one, declared or
// chunked; the budget is charged as without recycling.
func TestRecycle(t *testing.T) {
	b, err := httpbody.NewBudget(1<<30, time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range []int{300 << 10, 40 << 10, 1 << 20, 17 << 10, 300 << 10, 5} {
		want := bytes.Repeat([]byte{byte('a' + i)}, n)
		for _, chunked := range []bool{false, true} {
			r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(want))
			if chunked {
				r.ContentLength = -1
			}
			var inUse int64
			b.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got, err := httpbody.Read(w, r, 8<<20)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("body %d (chunked %v): %d bytes differ from the %d sent", i, chunked, len(got), n)
				}
				inUse = b.InUse()
				httpbody.Recycle(got)
			})).ServeHTTP(httptest.NewRecorder(), r)
			// Declared: the doubling from 16 KiB up to the length; chunked:
			// up to the first capacity past it.
			charged := int64(16 << 10)
			for charged < int64(n) || chunked && charged == int64(n) {
				charged *= 2
			}
			if !chunked {
				charged = min(charged, int64(n))
			}
			if inUse != charged {
				t.Errorf("body %d (chunked %v): %d bytes charged, want %d", i, chunked, inUse, charged)
			}
		}
	}
}
