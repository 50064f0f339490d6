package sse_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/internal/sse"
)

// TestServeBurstToAReadingClient: a client that reads all the time is
// never reset, however much one read of the feed returns at once. One
// read gives 1,000 frames of 1 KiB (a 1,000-item batch committed at
// once, four times the default 256 KiB buffer); the client reads over
// loopback as fast as it can and must receive all of them, then the next
// read's, with no "event: reset".
func TestServeBurstToAReadingClient(t *testing.T) {
	const bursts, n = 3, 1000
	data := []byte(`{"blob":"` + strings.Repeat("x", 1<<10) + `"}`)
	ends := make(chan sse.End, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		read := func(ctx context.Context, after string, wait time.Duration) ([]sse.Frame, string, error) {
			var k int
			fmt.Sscan(after, &k)
			if k >= bursts {
				select {
				case <-ctx.Done():
				case <-time.After(wait):
				}
				return nil, after, nil
			}
			frames := make([]sse.Frame, n)
			for i := range frames {
				frames[i] = sse.Frame{ID: fmt.Sprintf("%d-%d", k, i), Event: "event", Data: data}
			}
			return frames, fmt.Sprint(k + 1), nil
		}
		ends <- sse.Serve(r.Context(), w, "", nil, "0", read, sse.StreamOptions{Heartbeat: time.Minute}, nil)
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	got := 0
	for got < bursts*n && sc.Scan() {
		switch sc.Text() {
		case "event: event":
			got++
		case "event: reset":
			t.Fatalf("the reading client was reset after %d of %d frames", got, bursts*n)
		}
	}
	if got < bursts*n {
		t.Fatalf("the stream ended after %d of %d frames: %v", got, bursts*n, sc.Err())
	}
	select {
	case end := <-ends:
		t.Errorf("Serve returned %v while its client was reading", end)
	default:
	}
}
