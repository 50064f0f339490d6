package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// "Graceful shutdown on SIGINT/SIGTERM: in-flight requests finish, nothing
// half-written." run is cancelled (as main's signal context is) while a
// request's body is still arriving; the request completes and is stored,
// then run returns nil.
func TestServeGracefulShutdown(t *testing.T) {
	creds := filepath.Join(t.TempDir(), "credentials.json")
	if err := os.WriteFile(creds, []byte(`{"credentials":[{"name":"col","token":"t-ingest-token-01","roles":["ingest"],"platform":"openstack","cloud":"os-a"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout, stderr := &lockedBuffer{}, &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--store", "memory", "--credentials-file", creds, "--log-format", "json", "--shutdown-timeout", "20s"},
			env(nil), stdout, stderr)
	}()
	var base string
	re := regexp.MustCompile(`"msg":"tallyd listening","url":"(http://[^"]+)"`) // --log-format json
	for deadline := time.Now().Add(10 * time.Second); base == ""; time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(stdout.String()); m != nil {
			base = m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("run did not listen:\n%s", stderr.String())
		}
	}

	pr, pw := io.Pipe()
	req, err := http.NewRequest("POST", base+"/api/v1/events", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer t-ingest-token-01")
	type result struct {
		status int
		body   string
		err    error
	}
	answered := make(chan result, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		answered <- result{status: resp.StatusCode, body: string(b)}
	}()
	ev := `{"event_id":"slow-1","timestamp":"2026-03-01T12:00:00Z","event_type":"widget.create.end","platform":"openstack",` +
		`"cloud":"os-a","resource_type":"widget","resource_id":"w-1","project_id":"p","payload":{"state":"active","size":{"n":1}}}`
	if _, err := pw.Write([]byte("[" + ev[:40])); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the request is in flight
	cancel()                           // as SIGTERM does
	time.Sleep(200 * time.Millisecond) // shutdown has begun
	select {
	case err := <-done:
		t.Fatalf("run returned %v with a request in flight", err)
	default:
	}
	if _, err := pw.Write([]byte(ev[40:] + "]")); err != nil {
		t.Fatal(err)
	}
	pw.Close()

	res := <-answered
	if res.err != nil || res.status != 200 || !strings.Contains(res.body, `"accepted":1`) {
		t.Errorf("in-flight request: %d %q %v; want 200 with the event accepted", res.status, res.body, res.err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run after shutdown: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run did not return after the in-flight request finished")
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("the server still answers after run returned")
	}

	// --log-format json: every log line is a JSON object; the last says
	// stopped.
	var last map[string]any
	sc := bufio.NewScanner(strings.NewReader(stderr.String()))
	for sc.Scan() {
		last = nil
		if err := json.Unmarshal(sc.Bytes(), &last); err != nil {
			t.Errorf("log line is not JSON: %s", sc.Text())
		}
	}
	if last["msg"] != "stopped" {
		t.Errorf("last log line %v, want msg stopped", last)
	}
}

// --require-size-schema (TALLY_INGEST_REQUIRE_SIZE_SCHEMA) reaches the
// pipeline: an event of a pair with no size schema is refused size_schema
// instead of accepted unvalidated.
func TestServeRequireSizeSchema(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"default", nil, `"accepted":1`},
		{"env", map[string]string{"TALLY_INGEST_REQUIRE_SIZE_SCHEMA": "true"}, `"reason":"size_schema: `},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			stdout := &lockedBuffer{}
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--dev", "--dev-cloud", "os-a"}, env(tt.env), stdout, io.Discard)
			}()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("run: %v", err)
				}
			}()
			var base, token string
			re := regexp.MustCompile(`export TALLY_SERVER=(\S+)\n  export TALLY_TOKEN=(\S+)`)
			for deadline := time.Now().Add(10 * time.Second); base == ""; time.Sleep(10 * time.Millisecond) {
				if m := re.FindStringSubmatch(stdout.String()); m != nil {
					base, token = m[1], m[2]
				}
				if time.Now().After(deadline) {
					t.Fatalf("run printed no dev token:\n%s", stdout.String())
				}
			}
			ev := `{"event_id":"w-1","timestamp":"2026-03-01T12:00:00Z","event_type":"widget.create.end","platform":"openstack",` +
				`"cloud":"os-a","resource_type":"widget","resource_id":"w-1","project_id":"p","payload":{"state":"active","size":{"n":1}}}`
			req, _ := http.NewRequest("POST", base+"/api/v1/events", strings.NewReader(ev))
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(b), tt.want) {
				t.Errorf("POST: %d %s; want %s", resp.StatusCode, b, tt.want)
			}
		})
	}
}

// --shutdown-delay: on SIGTERM (the context's end) /readyz answers 503
// busy at once while the other routes still serve, and the listener
// closes only after the delay.
func TestServeShutdownDelayDrainsFirst(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout, stderr := &lockedBuffer{}, &lockedBuffer{}
	done := make(chan error, 1)
	const delay = 1500 * time.Millisecond
	go func() {
		done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--store", "memory", "--credentials-file", writeCredentials(t), "--shutdown-delay", delay.String()},
			env(nil), stdout, stderr)
	}()
	var base string
	re := regexp.MustCompile(`tallyd listening on (http://\S+)`)
	for deadline := time.Now().Add(10 * time.Second); base == ""; time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(stdout.String()); m != nil {
			base = m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("run did not listen:\n%s", stderr.String())
		}
	}
	get := func(path string) (int, string, error) {
		resp, err := http.Get(base + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After") + " " + string(b), nil
	}
	if code, body, err := get("/readyz"); err != nil || code != 200 {
		t.Fatalf("/readyz before the signal: %d %s %v", code, body, err)
	}
	signalled := time.Now()
	cancel()
	// Within the delay: /readyz 503 busy, /healthz (any route) still served.
	for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
		code, body, err := get("/readyz")
		if err == nil && code == 503 && strings.Contains(body, `"code":"busy"`) && !strings.HasPrefix(body, " ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after the signal: %d %q %v, want 503 busy with Retry-After", code, body, err)
		}
	}
	if code, body, err := get("/healthz"); err != nil || code != 200 {
		t.Errorf("/healthz while draining: %d %s %v, want 200", code, body, err)
	}
	select {
	case err := <-done:
		t.Fatalf("run returned %v after %s, before the %s delay", err, time.Since(signalled), delay)
	case <-time.After(delay / 2):
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		if since := time.Since(signalled); since < delay {
			t.Errorf("run returned after %s, before the %s delay", since, delay)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after the delay")
	}
	if _, _, err := get("/healthz"); err == nil {
		t.Error("the listener still answers after shutdown")
	}
}
