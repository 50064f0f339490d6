package feed

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/internal/sse"
)

// serveLimit is how many items each read of serveHub asks the hub for.
const serveLimit = 2

// serveHub serves h's items after after that key selects through
// sse.Serve, as a feed's handler does: each read of the stream is a Read
// of the hub, cursors encoded for the Lifecycle feed.
func serveHub(ctx context.Context, w http.ResponseWriter, h *Hub[item, string], after Position, key string,
	frame func(item) (sse.Frame, error), opts sse.StreamOptions, sent func()) sse.End {
	read := func(ctx context.Context, cursor string, wait time.Duration) ([]sse.Frame, string, error) {
		from, err := Decode(Lifecycle, cursor)
		if err != nil {
			return nil, cursor, err
		}
		p, err := h.Read(ctx, from, key, serveLimit, wait)
		if err != nil {
			return nil, cursor, err
		}
		frames := make([]sse.Frame, len(p.Items))
		for i, it := range p.Items {
			if frames[i], err = frame(it); err != nil {
				return nil, cursor, err
			}
		}
		return frames, Encode(Lifecycle, p.Next), nil
	}
	start := Encode(Lifecycle, after)
	return sse.Serve(ctx, w, start, nil, start, read, opts, sent)
}

// event is one dispatched Server-Sent Event, or one comment line.
type event struct {
	ID, Event, Data string
	Comment         string
	Retry           string
}

// sseReader parses an event stream as the WHATWG HTML "Server-sent events"
// section says: lines end with CRLF, LF or CR; "data" lines join with LF.
type sseReader struct {
	r   *bufio.Reader
	raw bytes.Buffer // every byte read
}

func newSSEReader(r io.Reader) *sseReader { return &sseReader{r: bufio.NewReader(r)} }

func (s *sseReader) line() (string, error) {
	var b []byte
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			return string(b), err
		}
		s.raw.WriteByte(c)
		switch c {
		case '\n':
			return string(b), nil
		case '\r':
			if n, err := s.r.Peek(1); err == nil && n[0] == '\n' {
				_, _ = s.r.ReadByte()
				s.raw.WriteByte('\n')
			}
			return string(b), nil
		}
		b = append(b, c)
	}
}

// next returns the next event or comment.
func (s *sseReader) next() (event, error) {
	var ev event
	var data []string
	seen := false
	for {
		l, err := s.line()
		if err != nil {
			return ev, err
		}
		if l == "" {
			if !seen {
				continue
			}
			ev.Data = strings.Join(data, "\n")
			return ev, nil
		}
		if strings.HasPrefix(l, ":") {
			if !seen {
				return event{Comment: strings.TrimPrefix(strings.TrimPrefix(l, ":"), " ")}, nil
			}
			continue
		}
		seen = true
		field, value, _ := strings.Cut(l, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.ID = value
		case "event":
			ev.Event = value
		case "data":
			data = append(data, value)
		case "retry":
			ev.Retry = value
		default:
			return ev, fmt.Errorf("unknown field %q in line %q", field, l)
		}
	}
}

// nextEvent skips comments and the retry field and returns the next event.
func (s *sseReader) nextEvent() (event, error) {
	for {
		ev, err := s.next()
		if err != nil || (ev.Comment == "" && ev.Retry == "") {
			return ev, err
		}
	}
}

// itemData is the JSON of an item in the test streams.
type itemData struct {
	Seq  int64
	Key  string
	Data string
}

func itemFrame(it item) (sse.Frame, error) {
	b, err := json.Marshal(itemData{it.Pos.Seq, it.Key, it.Data})
	return sse.Frame{ID: Encode(Lifecycle, it.Pos), Event: "item." + it.Key, Data: b}, err
}

// sseServer serves h at / as Serve does for a caller that reads the start
// from the "after" query parameter and the filter from "key". Each Serve's
// End is sent on ends.
type sseServer struct {
	*httptest.Server
	ends chan sse.End
	sent atomic.Int64
}

func newSSEServer(t *testing.T, h *Hub[item, string], opts sse.StreamOptions) *sseServer {
	t.Helper()
	s := &sseServer{ends: make(chan sse.End, 16)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		after, err := Decode(Lifecycle, r.URL.Query().Get("after"))
		if err != nil && r.URL.Query().Has("after") {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.ends <- serveHub(r.Context(), w, h, after, r.URL.Query().Get("key"), itemFrame, opts,
			func() { s.sent.Add(1) })
	}))
	t.Cleanup(s.Close)
	return s
}

// get opens a stream; cancel ends it.
func (s *sseServer) get(t *testing.T, query string) (*sseReader, *http.Response, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return newSSEReader(resp.Body), resp, cancel
}

// readEvents reads n events within 20 seconds.
func readEvents(t *testing.T, r *sseReader, n int) []event {
	t.Helper()
	type res struct {
		evs []event
		err error
	}
	done := make(chan res, 1)
	go func() {
		var evs []event
		for len(evs) < n {
			ev, err := r.nextEvent()
			if err != nil {
				done <- res{evs, err}
				return
			}
			evs = append(evs, ev)
		}
		done <- res{evs, nil}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("after %d of %d events: %v", len(r.evs), n, r.err)
		}
		return r.evs
	case <-time.After(20 * time.Second):
		t.Fatalf("%d events not read within 20s", n)
		return nil
	}
}

func wantEvents(t *testing.T, items []item) []event {
	t.Helper()
	var evs []event
	for _, it := range items {
		fr, err := itemFrame(it)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, event{ID: fr.ID, Event: fr.Event, Data: string(fr.Data)})
	}
	return evs
}

func TestServeFrames(t *testing.T) {
	src := &fakeSource{}
	h := primed(t, src, Options{Poll: time.Hour})
	all := fill(t, h, src, 3)
	s := newSSEServer(t, h, sse.StreamOptions{Heartbeat: time.Minute})
	r, resp, _ := s.get(t, "")
	if d := cmp.Diff([]string{"text/event-stream", "no-cache"},
		[]string{resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control")}); d != "" {
		t.Errorf("headers (-want +got):\n%s", d)
	}
	got := readEvents(t, r, 3)
	if d := cmp.Diff(wantEvents(t, all), got); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	for i, ev := range got {
		p, err := Decode(Lifecycle, ev.ID)
		if err != nil || Compare(p, all[i].Pos) != 0 {
			t.Errorf("event %d: id %q decodes to %+v, %v; want %+v", i, ev.ID, p, err, all[i].Pos)
		}
		var d itemData
		if err := json.Unmarshal([]byte(ev.Data), &d); err != nil || d.Seq != all[i].Pos.Seq {
			t.Errorf("event %d: data %q: %+v, %v", i, ev.Data, d, err)
		}
	}
	var want strings.Builder
	want.WriteString("retry: 2000\n\n")
	for _, ev := range wantEvents(t, all) {
		fmt.Fprintf(&want, "id: %s\nevent: %s\ndata: %s\n\n", ev.ID, ev.Event, ev.Data)
	}
	if d := cmp.Diff(want.String(), r.raw.String()); d != "" {
		t.Errorf("bytes of the stream (-want +got):\n%s", d)
	}
	// Items committed later follow.
	more := []item{src.append("b", "later"), src.append("c", "")}
	h.Notify()
	if d := cmp.Diff(wantEvents(t, more), readEvents(t, r, 2)); d != "" {
		t.Errorf("later events (-want +got):\n%s", d)
	}
	if n := s.sent.Load(); n != 5 {
		t.Errorf("sent counted %d frames, want 5", n)
	}
}

func TestServeAfter(t *testing.T) {
	src := &fakeSource{}
	h := primed(t, src, Options{Poll: time.Hour, RingItems: 3})
	all := fill(t, h, src, 12)
	s := newSSEServer(t, h, sse.StreamOptions{Heartbeat: time.Minute})
	for _, tc := range []struct {
		name  string
		after int // -1: Start
		key   string
	}{
		{"start", -1, ""},
		{"behind the ring", 1, ""},
		{"in the ring", 9, ""},
		{"start, filter", -1, "b"},
		{"middle, filter", 4, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			after, q := Position{}, "key="+tc.key
			if tc.after >= 0 {
				after = all[tc.after].Pos
				q += "&after=" + Encode(Lifecycle, after)
			}
			r, _, _ := s.get(t, q)
			w := want(all, after, tc.key, len(all))
			if d := cmp.Diff(wantEvents(t, w), readEvents(t, r, len(w))); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
			// Nothing else was sent: the next event is the next item.
			next := src.append(tc.key+"x", "")
			if tc.key != "" {
				next = src.append(tc.key, "")
			}
			h.Notify()
			if d := cmp.Diff(wantEvents(t, []item{next}), readEvents(t, r, 1)); d != "" {
				t.Errorf("next event (-want +got):\n%s", d)
			}
			all = src.all()
		})
	}
}

func TestServeHeartbeat(t *testing.T) {
	src := &fakeSource{}
	h := primed(t, src, Options{Poll: time.Hour})
	s := newSSEServer(t, h, sse.StreamOptions{Heartbeat: 20 * time.Millisecond})
	r, _, _ := s.get(t, "")
	done := make(chan error, 1)
	go func() {
		comments := 0
		for comments < 3 {
			ev, err := r.next()
			if err != nil {
				done <- err
				return
			}
			if ev.Comment == "" && ev.Retry == "" {
				done <- fmt.Errorf("event %+v with nothing to send", ev)
				return
			}
			if ev.Comment != "" {
				comments++
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no three heartbeat comments within 20s (Heartbeat 20ms)")
	}
	// Heartbeats do not count as frames sent.
	if n := s.sent.Load(); n != 0 {
		t.Errorf("sent counted %d frames, want 0", n)
	}
}

func TestServeClientGone(t *testing.T) {
	src := &fakeSource{}
	h := primed(t, src, Options{Poll: time.Hour})
	// Heartbeats a minute apart: only the client's going can end the
	// stream within the test's bound.
	s := newSSEServer(t, h, sse.StreamOptions{Heartbeat: time.Minute})
	r, _, cancel := s.get(t, "")
	src.append("a", "")
	h.Notify()
	readEvents(t, r, 1)
	cancel()
	select {
	case end := <-s.ends:
		if end != sse.EndClient {
			t.Errorf("Serve = %v, want sse.EndClient", end)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Serve did not return within 20s of its client going away")
	}
}

// TestServeStalledClient checks that a client that stops reading is reset
// within a bounded time while another keeps receiving every item.
func TestServeStalledClient(t *testing.T) {
	const n, size = 600, 64 << 10 // more than the kernel's socket buffers hold
	src := &fakeSource{}
	h := primed(t, src, Options{Poll: time.Hour})
	s := newSSEServer(t, h, sse.StreamOptions{Buffer: 4 << 20, WriteTimeout: time.Second, Heartbeat: time.Minute})

	conn, err := net.Dial("tcp", s.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: feed\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r, _, _ := s.get(t, "")
	// Both streams are served before the items come.
	eventually(t, "two subscribers", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.waiting == 2
	})

	received := make(chan error, 1)
	go func() {
		// Lines, not the byte-by-byte parser: this client must read fast.
		sc := bufio.NewScanner(r.r)
		sc.Buffer(nil, 1<<20)
		i := 0
		for i < n && sc.Scan() {
			l := sc.Text()
			if strings.HasPrefix(l, "event: reset") {
				received <- fmt.Errorf("the reading client was reset after %d events", i)
				return
			}
			id, ok := strings.CutPrefix(l, "id: ")
			if !ok {
				continue
			}
			if p, err := Decode(Lifecycle, id); err != nil || p.Seq != int64(i+1) {
				received <- fmt.Errorf("event %d: id %q: %+v, %v", i, id, p, err)
				return
			}
			i++
		}
		if i < n {
			received <- fmt.Errorf("stream ended after %d events: %v", i, sc.Err())
			return
		}
		received <- nil
	}()
	payload := strings.Repeat("x", size)
	// Paced so that a client that reads keeps up: a burst faster than the
	// client reads overflows any Buffer, reading or not.
	for i := range n {
		src.append("a", payload)
		h.Notify()
		if i%4 == 3 {
			time.Sleep(2 * time.Millisecond)
		}
	}
	select {
	case end := <-s.ends:
		if end != sse.EndReset {
			t.Errorf("the stalled stream's Serve = %v, want sse.EndReset", end)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve of a client that stopped reading did not return within 30s")
	}
	select {
	case err := <-received:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the reading client did not receive every item within 30s")
	}
	select {
	case end := <-s.ends:
		t.Errorf("the reading client's stream ended: %v", end)
	default:
	}
}

// TestServeReset checks the reset frame itself: a stalled client that
// starts reading again finds "event: reset" naming the last position sent.
func TestServeReset(t *testing.T) {
	src := &fakeSource{}
	h := primed(t, src, Options{Poll: time.Hour})
	// A buffer smaller than one frame: a frame sent while the previous one
	// is still queued overflows it.
	rec := &blockingWriter{header: http.Header{}, unblock: make(chan struct{})}
	done := make(chan sse.End, 1)
	go func() {
		done <- serveHub(context.Background(), rec, h, Position{}, "", itemFrame,
			sse.StreamOptions{Buffer: 1, WriteTimeout: 200 * time.Millisecond, Heartbeat: time.Minute}, nil)
	}()
	for range 5 {
		src.append("a", "")
	}
	h.Notify()
	var end sse.End
	select {
	case end = <-done:
	case <-time.After(10 * time.Second):
		close(rec.unblock)
		t.Fatal("Serve did not reset a writer that blocks within 10s")
	}
	if end != sse.EndReset {
		t.Fatalf("Serve = %v, want sse.EndReset", end)
	}
	r := newSSEReader(bytes.NewReader(rec.buf.Bytes()))
	var evs []event
	for {
		ev, err := r.nextEvent()
		if err != nil {
			break
		}
		evs = append(evs, ev)
	}
	if len(evs) < 1 {
		t.Fatalf("stream %q: want the reset", rec.buf.String())
	}
	last, reset := Encode(Lifecycle, Position{}), evs[len(evs)-1]
	if len(evs) > 1 {
		last = evs[len(evs)-2].ID
	}
	wantReset := event{Event: "reset", Data: fmt.Sprintf(`{"position":%q}`, last)}
	if d := cmp.Diff(wantReset, reset); d != "" {
		t.Errorf("reset frame (-want +got):\n%s", d)
	}
}

// blockingWriter is a ResponseWriter whose second write blocks until
// unblock is closed or its write deadline passes.
type blockingWriter struct {
	header   http.Header
	buf      bytes.Buffer
	writes   int
	deadline time.Time
	unblock  chan struct{}
}

func (w *blockingWriter) Header() http.Header { return w.header }
func (w *blockingWriter) WriteHeader(int)     {}
func (w *blockingWriter) Flush()              {}

func (w *blockingWriter) SetWriteDeadline(t time.Time) error { w.deadline = t; return nil }

func (w *blockingWriter) Write(b []byte) (int, error) {
	w.writes++
	if w.writes == 2 {
		select {
		case <-w.unblock:
		case <-time.After(time.Until(w.deadline)):
		}
	}
	return w.buf.Write(b)
}

// TestServeDataLines streams items whose data holds line breaks.
func TestServeDataLines(t *testing.T) {
	src := &fakeSource{}
	h := primed(t, src, Options{Poll: time.Hour})
	all := fill(t, h, src, 2)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serveHub(r.Context(), w, h, Position{}, "", func(it item) (sse.Frame, error) {
			return sse.Frame{ID: Encode(Lifecycle, it.Pos), Event: "item", Data: []byte("line one\n" + it.Data + "\nline three")}, nil
		}, sse.StreamOptions{Heartbeat: time.Minute}, nil)
	}))
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := newSSEReader(resp.Body)
	evs := readEvents(t, r, 2)
	for i, ev := range evs {
		if want := "line one\n" + all[i].Data + "\nline three"; ev.Data != want {
			t.Errorf("event %d: data %q, want %q", i, ev.Data, want)
		}
	}
	if n := strings.Count(r.raw.String(), "\ndata: "); n != 6 {
		t.Errorf("%d data lines for 2 items of 3 lines:\n%s", n, r.raw.String())
	}
}

// TestServeSlowReaderThroughABurst: a subscriber that reads, however
// slowly, is never reset for a burst larger than its buffer ("one that
// stops reading is disconnected"; one that reads is not): Serve waits for
// room instead.
func TestServeSlowReaderThroughABurst(t *testing.T) {
	src := &fakeSource{}
	h := primed(t, src, Options{Poll: time.Hour})
	s := newSSEServer(t, h, sse.StreamOptions{Buffer: 4 << 10, WriteTimeout: 5 * time.Second, Heartbeat: time.Minute})
	r, _, cancel := s.get(t, "")
	defer cancel()
	big := strings.Repeat("x", 2<<10)
	const n = 300
	for range n {
		src.append("a", big)
	}
	h.Notify()
	for i := range n {
		ev, err := r.nextEvent()
		for err == nil && ev.Comment != "" || ev.Retry != "" {
			ev, err = r.nextEvent()
		}
		if err != nil {
			t.Fatalf("after %d events: %v", i, err)
		}
		if ev.Event == "reset" {
			t.Fatalf("reset after %d of %d events, the client reading", i, n)
		}
		if i%50 == 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
}
