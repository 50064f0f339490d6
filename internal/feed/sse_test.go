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
)

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

func itemFrame(it item) (Frame, error) {
	b, err := json.Marshal(itemData{it.Pos.Seq, it.Key, it.Data})
	return Frame{ID: Encode(Lifecycle, it.Pos), Event: "item." + it.Key, Data: b}, err
}

// sseServer serves h at / as Serve does for a caller that reads the start
// from the "after" query parameter and the filter from "key". Each Serve's
// End is sent on ends.
type sseServer struct {
	*httptest.Server
	ends chan End
	sent atomic.Int64
}

func newSSEServer(t *testing.T, h *Hub[item, string], opts StreamOptions) *sseServer {
	t.Helper()
	s := &sseServer{ends: make(chan End, 16)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		after, err := Decode(Lifecycle, r.URL.Query().Get("after"))
		if err != nil && r.URL.Query().Has("after") {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.ends <- Serve(r.Context(), w, h, Lifecycle, after, r.URL.Query().Get("key"), itemFrame, opts,
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
	s := newSSEServer(t, h, StreamOptions{Heartbeat: time.Minute})
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
	s := newSSEServer(t, h, StreamOptions{Heartbeat: time.Minute, Limit: 2})
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
	s := newSSEServer(t, h, StreamOptions{Heartbeat: 20 * time.Millisecond})
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
	s := newSSEServer(t, h, StreamOptions{Heartbeat: time.Minute})
	r, _, cancel := s.get(t, "")
	src.append("a", "")
	h.Notify()
	readEvents(t, r, 1)
	cancel()
	select {
	case end := <-s.ends:
		if end != EndClient {
			t.Errorf("Serve = %v, want EndClient", end)
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
	s := newSSEServer(t, h, StreamOptions{Buffer: 4 << 20, WriteTimeout: time.Second, Heartbeat: time.Minute})

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
		if end != EndReset {
			t.Errorf("the stalled stream's Serve = %v, want EndReset", end)
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
	done := make(chan End, 1)
	go func() {
		done <- Serve(context.Background(), rec, h, Lifecycle, Position{}, "", itemFrame,
			StreamOptions{Buffer: 1, WriteTimeout: 200 * time.Millisecond, Heartbeat: time.Minute}, nil)
	}()
	for range 5 {
		src.append("a", "")
	}
	h.Notify()
	var end End
	select {
	case end = <-done:
	case <-time.After(10 * time.Second):
		close(rec.unblock)
		t.Fatal("Serve did not reset a writer that blocks within 10s")
	}
	if end != EndReset {
		t.Fatalf("Serve = %v, want EndReset", end)
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

func TestEncodeFrameDataLines(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       string // the data lines
	}{
		{"compact JSON", `{"a":1}`, "data: {\"a\":1}\n"},
		{"empty", "", "data: \n"},
		{"two lines", "a\nb", "data: a\ndata: b\n"},
		{"empty line inside", "a\n\nb", "data: a\ndata: \ndata: b\n"},
		{"CRLF", "a\r\nb", "data: a\ndata: b\n"},
		{"bare CR, a line end to a client", "a\rid: x", "data: a\ndata: id: x\n"},
		{"trailing line feed", "a\nb\n", "data: a\ndata: b\n"},
		{"indented JSON", "{\n  \"a\": 1\n}", "data: {\ndata:   \"a\": 1\ndata: }\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fr := Frame{ID: "c1", Event: "item", Data: []byte(tc.data)}
			want := "id: c1\nevent: item\n" + tc.want + "\n"
			got := string(encodeFrame(fr))
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("encodeFrame (-want +got):\n%s", d)
			}
			// A client gets the data back, with LF line ends.
			ev, err := newSSEReader(strings.NewReader(got)).nextEvent()
			if err != nil {
				t.Fatal(err)
			}
			wantData := strings.TrimSuffix(strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(tc.data), "\n")
			if d := cmp.Diff(event{ID: "c1", Event: "item", Data: wantData}, ev); d != "" {
				t.Errorf("event a client parses (-want +got):\n%s", d)
			}
		})
	}
}

// TestServeDataLines streams items whose data holds line breaks.
func TestServeDataLines(t *testing.T) {
	src := &fakeSource{}
	h := primed(t, src, Options{Poll: time.Hour})
	all := fill(t, h, src, 2)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Serve(r.Context(), w, h, Lifecycle, Position{}, "", func(it item) (Frame, error) {
			return Frame{ID: Encode(Lifecycle, it.Pos), Event: "item", Data: []byte("line one\n" + it.Data + "\nline three")}, nil
		}, StreamOptions{Heartbeat: time.Minute}, nil)
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
