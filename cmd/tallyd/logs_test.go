package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Issue "Operating tallyd", point 5: "with --log-format json every line on
// both streams is JSON (today a plain "tallyd listening on …" line is mixed
// in), durations in seconds, status as a number". tallyd --dev runs with
// JSON logs at debug level, answers a request and stops; every line of
// stdout and stderr must decode, the request line must carry its status as
// a number and its duration as seconds, and the token line must still give
// TALLY_SERVER and TALLY_TOKEN.
func TestJSONLogsEveryLine(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout, stderr := &lockedBuffer{}, &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--dev", "--log-format", "json", "--log-level", "debug", "--shutdown-timeout", "5s"},
			env(nil), stdout, stderr)
	}()
	re := regexp.MustCompile(`"TALLY_SERVER":"(http://[^"]+)","TALLY_TOKEN":"([^"]+)"`)
	var m []string
	for deadline := time.Now().Add(10 * time.Second); m == nil; time.Sleep(10 * time.Millisecond) {
		m = re.FindStringSubmatch(stdout.String())
		if time.Now().After(deadline) {
			t.Fatalf("no --dev token line on stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		}
	}
	req, _ := http.NewRequest("GET", m[1]+"/api/v1/resources", nil)
	req.Header.Set("Authorization", "Bearer "+m[2])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /api/v1/resources with the --dev token: %d", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	lines := func(name, s string) []map[string]any {
		var out []map[string]any
		sc := bufio.NewScanner(strings.NewReader(s))
		for sc.Scan() {
			var v map[string]any
			if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
				t.Errorf("%s line is not JSON: %s", name, sc.Text())
			}
			out = append(out, v)
		}
		return out
	}
	out := lines("stdout", stdout.String())
	if len(out) == 0 || out[0]["msg"] != "tallyd listening" || out[0]["url"] != m[1] {
		t.Errorf("first stdout line %v, want msg \"tallyd listening\" with url %s", out, m[1])
	}
	var request, shutdown map[string]any
	for _, l := range lines("stderr", stderr.String()) {
		switch {
		case l["msg"] == "request" && l["route"] == "GET /api/v1/resources":
			request = l
		case l["msg"] == "shutting down":
			shutdown = l
		}
	}
	if request == nil {
		t.Fatalf("no request line in the logs:\n%s", stderr.String())
	}
	if got, ok := request["status"].(float64); !ok || got != 200 {
		t.Errorf("request status %#v, want the number 200", request["status"])
	}
	if _, ok := request["duration_seconds"].(float64); !ok {
		t.Errorf("request line %v: want duration_seconds, a number of seconds", request)
	}
	if got, ok := shutdown["timeout_seconds"].(float64); !ok || got != 5 {
		t.Errorf("shutdown line %v: want timeout_seconds 5", shutdown)
	}
}

// Point 5: "error values on one line (today errors.Join puts the driver
// message on a second line)". Every value the logger writes reads on one
// line, in both formats; a duration is seconds in JSON only.
func TestLogValuesOnOneLine(t *testing.T) {
	joined := errors.Join(errors.New("pgstore: connect"), errors.New("dial tcp: connection refused\nsecond cause"))
	for _, tc := range []struct {
		format string
		want   string
	}{
		{"text", `level=ERROR msg=failed err="pgstore: connect; dial tcp: connection refused; second cause" problem="a; b" wait=1.5s` + "\n"},
		{"json", `{"level":"ERROR","msg":"failed","err":"pgstore: connect; dial tcp: connection refused; second cause","problem":"a; b","wait_seconds":1.5}` + "\n"},
	} {
		t.Run(tc.format, func(t *testing.T) {
			var b bytes.Buffer
			c := config{LogFormat: tc.format, LogLevel: slog.LevelInfo}
			h := c.logger(&b).Handler()
			// No time attribute, for a stable line.
			r := slog.NewRecord(time.Time{}, slog.LevelError, "failed", 0)
			r.AddAttrs(slog.Any("err", joined), slog.String("problem", "a\nb"), slog.Duration("wait", 1500*time.Millisecond))
			if err := h.Handle(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, b.String()); diff != "" {
				t.Errorf("log line (-want +got):\n%s", diff)
			}
		})
	}
}
