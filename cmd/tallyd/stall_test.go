package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// serveInProcess runs tallyd's serve (run, as main does) on a free port of
// loopback with the e2e credentials and args, and returns its base URL; it
// is stopped when the test ends.
func serveInProcess(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := &lockedBuffer{}, &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"--listen", "127.0.0.1:0", "--store", "memory", "--credentials-file", writeCredentials(t), "--shutdown-timeout", "1s"}, args...),
			env(nil), stdout, stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("run did not return")
		}
		if t.Failed() {
			t.Logf("tallyd stderr:\n%s", stderr.String())
		}
	})
	re := regexp.MustCompile(`tallyd listening on (http://\S+)`)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(stdout.String()); m != nil {
			return m[1]
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("run returned before listening: %v\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("run did not listen:\n%s", stderr.String())
		}
	}
}

// stallEvent is a valid event of the e2e ingest credential's cloud.
func stallEvent(id string) string {
	return `{"event_id":"` + id + `","timestamp":"2026-03-01T12:00:00Z","event_type":"widget.create.end","platform":"openstack",` +
		`"cloud":"` + e2eCloud + `","resource_type":"widget","resource_id":"w-` + id + `","project_id":"p","payload":{"state":"active","size":{"n":1}}}`
}

type rawAnswer struct {
	status int
	code   string // the problem's code
	err    error
}

// rawPost sends the head of a POST /api/v1/events declaring length bytes
// and then sent bytes of it over a new connection, then sends nothing
// more and reads the answer.
func rawPost(addr string, length int, sent []byte) rawAnswer {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return rawAnswer{err: err}
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	head := fmt.Sprintf("POST /api/v1/events HTTP/1.1\r\nHost: tally\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", tokIngest, length)
	if _, err := io.WriteString(c, head); err != nil {
		return rawAnswer{err: err}
	}
	if _, err := c.Write(sent); err != nil {
		return rawAnswer{err: err}
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return rawAnswer{err: err}
	}
	defer resp.Body.Close()
	var p struct{ Code string }
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &p)
	return rawAnswer{status: resp.StatusCode, code: p.Code}
}

// TestStalledUploadsDoNotStarveTheBodyBudget, over real sockets against
// tallyd on a real listener, with its default caps (8 MiB a body, a
// budget of 64 MiB, a wait of 5 s for it) and --body-stall-timeout 1s:
// eight clients each declare a body of the cap, send all of it but the
// last byte and then nothing, and so hold the whole budget. Without the
// stall timeout they held it until the read timeout (2 minutes), and a
// collector's batch and a createEvent waited 5 s for the budget and were
// answered 503. Now each stalled body is answered 408 body_timeout a
// stall timeout after its last byte and gives its share back at once, so
// the batch and the createEvent are answered 200 and 201 well within the
// budget's wait; tally_http_body_stalled_total counts the eight. A slow
// but steady upload (64 KiB/s for three stall timeouts) is not cut off.
func TestStalledUploadsDoNotStarveTheBodyBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: sends 64 MiB over loopback")
	}
	const (
		maxBody = 8 << 20
		budget  = 64 << 20
		uploads = budget / maxBody
		stall   = time.Second
	)
	base := serveInProcess(t, "--body-stall-timeout", stall.String())
	addr := strings.TrimPrefix(base, "http://")

	answers := make(chan rawAnswer, uploads)
	body := append([]byte("["), make([]byte, maxBody-2)...)
	for i := range body[1:] {
		body[1+i] = ' '
	}
	for range uploads {
		go func() { answers <- rawPost(addr, maxBody, body) }()
	}
	deadline := time.Now().Add(30 * time.Second)
	for metric(t, base, "tally_http_body_budget_in_use_bytes") < budget {
		if time.Now().After(deadline) {
			t.Fatalf("the %d uploads never held the budget: %v bytes held", uploads, metric(t, base, "tally_http_body_budget_in_use_bytes"))
		}
		time.Sleep(5 * time.Millisecond)
	}

	// The budget is spent: the batch waits for it, and gets it when the
	// stalled bodies are failed.
	start := time.Now()
	status, _, b := call(t, "POST", base+"/api/v1/events", tokIngest, []byte("["+stallEvent("stall-1")+"]"))
	if status != http.StatusOK {
		t.Errorf("a batch beside %d stalled uploads: %d %s, want 200", uploads, status, b)
	}
	status, _, b = call(t, "POST", base+"/api/events", tokEvents, []byte(`{"category":"c","action":"a"}`))
	if status != http.StatusCreated {
		t.Errorf("a createEvent beside %d stalled uploads: %d %s, want 201", uploads, status, b)
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("the batch and the createEvent took %s, want them within the budget's wait (5 s) and the stall timeout (%s)", took, stall)
	}
	for range uploads {
		if a := <-answers; a.err != nil || a.status != http.StatusRequestTimeout || a.code != "body_timeout" {
			t.Errorf("a stalled upload: %d %q %v, want 408 body_timeout", a.status, a.code, a.err)
		}
	}
	if got := metric(t, base, "tally_http_body_stalled_total"); got != uploads {
		t.Errorf("tally_http_body_stalled_total = %v, want %d", got, uploads)
	}
	if got := metric(t, base, "tally_http_body_budget_in_use_bytes"); got != 0 {
		t.Errorf("tally_http_body_budget_in_use_bytes = %v after every upload was answered, want 0", got)
	}

	// 64 KiB/s, 4 KiB every 62.5 ms, for three stall timeouts.
	batch := "[" + stallEvent("steady-1") + "]"
	const piece, pieces = 4 << 10, 48
	steady := &pacedReader{r: strings.NewReader(strings.Repeat(" ", piece*pieces) + batch), piece: piece, every: time.Second / 16}
	req, err := http.NewRequest("POST", base+"/api/v1/events", steady)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(piece*pieces + len(batch))
	req.Header.Set("Authorization", "Bearer "+tokIngest)
	req.Header.Set("Content-Type", "application/json")
	start = time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"accepted":1`) {
		t.Errorf("a steady upload of 64 KiB/s for %s: %d %s, want 200 with the event accepted", time.Since(start), resp.StatusCode, b)
	}
	if took := time.Since(start); took < 2*stall {
		t.Errorf("the steady upload took %s, want at least %s for the test to mean anything", took, 2*stall)
	}
}

// pacedReader gives at most piece bytes of r per Read, every apart.
type pacedReader struct {
	r     io.Reader
	piece int
	every time.Duration
}

func (p *pacedReader) Read(b []byte) (int, error) {
	time.Sleep(p.every)
	return p.r.Read(b[:min(len(b), p.piece)])
}
