package sse_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tallyhq/tally/internal/sse"
)

// countingWriter is a ResponseWriter that records each Write and Flush.
type countingWriter struct {
	header  http.Header
	buf     bytes.Buffer
	writes  []int // the length of each Write
	flushes int
}

func (w *countingWriter) Header() http.Header { return w.header }
func (w *countingWriter) WriteHeader(int)     {}
func (w *countingWriter) Flush()              { w.flushes++ }
func (w *countingWriter) Write(b []byte) (int, error) {
	w.writes = append(w.writes, len(b))
	return w.buf.Write(b)
}

// TestServeJoinsSmallFrames: "coalesce many frames into one write per
// wake-up". The small frames of one read go out as writes of at most
// Buffer bytes (each holding whole frames) and one flush, a large frame as
// a write of its own, every frame once and in order.
func TestServeJoinsSmallFrames(t *testing.T) {
	small := []byte(`{"a":"` + strings.Repeat("x", 100) + `"}`) // a 130-byte frame
	large := []byte(`{"b":"` + strings.Repeat("y", 4<<10) + `"}`)
	var frames []sse.Frame
	for i := range 40 {
		data := small
		if i == 25 {
			data = large
		}
		frames = append(frames, sse.Frame{ID: fmt.Sprint(i), Event: "e", Data: data})
	}
	w := &countingWriter{header: http.Header{}}
	ctx, cancel := context.WithCancel(context.Background())
	reads := 0
	read := func(ctx context.Context, after string, wait time.Duration) ([]sse.Frame, string, error) {
		reads++
		if reads == 1 {
			return frames, "40", nil
		}
		cancel()
		return nil, after, ctx.Err()
	}
	if end := sse.Serve(ctx, w, "", nil, "0", read, sse.StreamOptions{Buffer: 1 << 10, Heartbeat: time.Minute}, nil); end != sse.EndClient {
		t.Fatalf("Serve = %v, want sse.EndClient", end)
	}
	// The head (retry and the id-only block) is one write and one flush;
	// then frames 0–24 joined 7 to a write (8 would pass 1 KiB), frame 25
	// (4 KiB) alone, frames 26–39 joined 7 to a write, and one flush.
	size := func(i int) int {
		return len("id: "+fmt.Sprint(i)+"\nevent: e\ndata: ") + len(frames[i].Data) + 2
	}
	join := func(from, to int) int {
		n := 0
		for i := from; i < to; i++ {
			n += size(i)
		}
		return n
	}
	want := []int{len("retry: 2000\n\nid: 0\n\n"),
		join(0, 7), join(7, 14), join(14, 21), join(21, 25), size(25), join(26, 33), join(33, 40)}
	if d := cmp.Diff(want, w.writes); d != "" {
		t.Errorf("the lengths of the writes (-want +got):\n%s", d)
	}
	if w.flushes != 2 {
		t.Errorf("%d flushes, want 2 (the head's, the read's)", w.flushes)
	}
	var ids []string
	for _, l := range strings.Split(w.buf.String(), "\n") {
		if id, ok := strings.CutPrefix(l, "id: "); ok {
			ids = append(ids, id)
		}
	}
	wantIDs := []string{"0"}
	for i := range 40 {
		wantIDs = append(wantIDs, fmt.Sprint(i))
	}
	if d := cmp.Diff(wantIDs, ids); d != "" {
		t.Errorf("ids (-want +got):\n%s", d)
	}
}
