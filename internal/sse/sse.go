// Package sse serves a change feed to one subscriber as Server-Sent Events
// (the WHATWG HTML "Server-sent events" format) through a bounded buffer,
// and admits subscribers through route.Subscribers: the HTTP half of
// internal/feed, shared by ingest/ingesthttp and correlate/correlatehttp.
package sse

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// StreamOptions tune [Serve]. Zero fields take the defaults named.
type StreamOptions struct {
	// Buffer bounds the bytes a subscriber may leave unread before it
	// counts as stalled and is reset (default 256 KiB; one item larger
	// than that is still sent alone).
	Buffer int
	// WriteTimeout is how long a subscriber may leave Buffer bytes unread
	// before it is reset (default 10s); one write to the client may block
	// for twice that before the connection counts as gone.
	WriteTimeout time.Duration
	// Heartbeat is the longest time between two writes: with nothing to
	// send, a comment line is written (default 10s).
	Heartbeat time.Duration
}

// Frame is one item of a stream: its cursor (the SSE id), its kind (the
// SSE event) and its data, compact JSON. A Frame from [Cache.Frame] also
// holds its encoding, shared by every stream that sends it.
type Frame struct {
	ID, Event string
	Data      []byte
	wire      []byte // the encoded frame, when a Cache made it
}

// encoded returns fr in the event-stream format.
func (fr Frame) encoded() []byte {
	if fr.wire != nil {
		return fr.wire
	}
	return encodeFrame(fr)
}

// End is how a stream served by [Serve] ended.
type End int

// The ends of a stream.
const (
	// EndClient: the client went away or ctx ended.
	EndClient End = iota
	// EndReset: the client read too slowly; the stream ended with an
	// "event: reset" naming the last position sent.
	EndReset
	// EndError: the hub's store failed; the stream ended with an
	// "event: error".
	EndError
)

// ErrStalled is the cause of a stream's context when its client stopped
// reading.
var ErrStalled = errors.New("feed: the subscriber stopped reading")

// Read is what [Serve] streams from: the frames after the cursor after,
// waiting up to wait for one, and the cursor the next read starts at.
type Read func(ctx context.Context, after string, wait time.Duration) (frames []Frame, next string, err error)

// Serve streams a feed to w as Server-Sent Events (the WHATWG HTML
// "Server-sent events" format): first the frames of first, then those read
// from next on, each as "id: <cursor>", "event: <kind>" and "data: <JSON>",
// and a comment line whenever nothing was written for opts.Heartbeat. A
// client resumes by sending the last id it received as Last-Event-ID (the
// caller reads it and makes first and next from it). Writes go through a
// buffer of opts.Buffer bytes drained by their own goroutine, so a client
// that stops reading never blocks the feed or other subscribers: when the
// buffer is full the stream ends with "event: reset" and data
// {"position":"<last id sent>"}. A read error ends it with "event: error"
// and the same data. Each frame sent is counted by sent (nil: none).
// Serve returns when the stream ends, and how.
func Serve(ctx context.Context, w http.ResponseWriter, last string, first []Frame, next string, read Read, opts StreamOptions, sent func()) End {
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := newStream(w, opts, cancel)
	defer s.close()
	s.send([]byte("retry: 2000\n\n"))
	// An id-only block (no data) sets a client's last event id without an
	// event (WHATWG HTML, "dispatch the event": the id is taken before an
	// empty data buffer ends it), so that a client cut off before its first
	// item, or whose filter has matched nothing yet, resumes where the
	// stream was, not at a new "now".
	if len(first) == 0 && next != "" && next != last {
		s.send([]byte("id: " + next + "\n\n"))
		last = next
	}
	frames, read0 := first, false
	for {
		if len(frames) == 0 && read0 {
			beat := ": keep-alive\n\n"
			if next != "" && next != last {
				beat = "id: " + next + "\n\n"
			}
			if !s.send([]byte(beat)) {
				return s.reset(last)
			}
			if next != "" {
				last = next
			}
		}
		read0 = true
		for _, fr := range frames {
			if !s.send(fr.encoded()) {
				return s.reset(last)
			}
			last = fr.ID
			if sent != nil {
				sent()
			}
		}
		var err error
		frames, next, err = read(ctx, next, opts.Heartbeat)
		if ctx.Err() != nil {
			return EndClient
		}
		if err != nil {
			s.send([]byte("event: error\ndata: {\"position\":" + strconv.Quote(last) + "}\n\n"))
			return EndError
		}
	}
}

func (o StreamOptions) withDefaults() StreamOptions {
	if o.Buffer <= 0 {
		o.Buffer = 256 << 10
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 10 * time.Second
	}
	return o
}

// encodeFrame writes fr in the event-stream format; data is split into one
// data line per line it holds, lines ending with LF, CRLF or CR as a
// client reads them.
func encodeFrame(fr Frame) []byte {
	if bytes.IndexByte(fr.Data, '\r') >= 0 {
		fr.Data = bytes.ReplaceAll(fr.Data, []byte("\r\n"), []byte("\n"))
		fr.Data = bytes.ReplaceAll(fr.Data, []byte("\r"), []byte("\n"))
	}
	var b bytes.Buffer
	b.Grow(len(fr.ID) + len(fr.Event) + len(fr.Data) + 24)
	b.WriteString("id: ")
	b.WriteString(fr.ID)
	b.WriteString("\nevent: ")
	b.WriteString(fr.Event)
	for line := range bytes.Lines(fr.Data) {
		b.WriteString("\ndata: ")
		b.Write(bytes.TrimRight(line, "\r\n"))
	}
	if len(fr.Data) == 0 {
		b.WriteString("\ndata: ")
	}
	b.WriteString("\n\n")
	return b.Bytes()
}

// stream is a client's bounded write buffer and the goroutine draining it.
type stream struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	opts   StreamOptions
	cancel context.CancelCauseFunc

	mu      sync.Mutex
	wake    *sync.Cond
	pending [][]byte // queued writes, shared with other streams: never modified
	queued  int      // bytes in pending
	closing bool
	failed  bool
	done    chan struct{}
	room    chan struct{} // a value after each write or failure
}

func newStream(w http.ResponseWriter, opts StreamOptions, cancel context.CancelCauseFunc) *stream {
	s := &stream{w: w, rc: http.NewResponseController(w), opts: opts, cancel: cancel, done: make(chan struct{}), room: make(chan struct{}, 1)}
	s.wake = sync.NewCond(&s.mu)
	go s.drain()
	return s
}

// send queues b (not copied: b must not change afterwards), waiting up to
// opts.WriteTimeout for room when more than opts.Buffer bytes are unsent
// (a client that reads, however slowly, is never reset for a burst); false
// when the client has failed or made no room in that time.
func (s *stream) send(b []byte) bool {
	deadline := time.Now().Add(s.opts.WriteTimeout)
	for {
		s.mu.Lock()
		if s.failed || s.closing {
			s.mu.Unlock()
			return false
		}
		if s.queued == 0 || s.queued+len(b) <= s.opts.Buffer {
			s.pending = append(s.pending, b)
			s.queued += len(b)
			s.wake.Signal()
			s.mu.Unlock()
			return true
		}
		s.mu.Unlock()
		wait := time.Until(deadline)
		if wait <= 0 {
			return false
		}
		t := time.NewTimer(wait)
		select {
		case <-s.room:
		case <-t.C:
		}
		t.Stop()
	}
}

// made signals a sender waiting for room.
func (s *stream) made() {
	select {
	case s.room <- struct{}{}:
	default:
	}
}

// reset queues the reset frame past the buffer's bound and ends the stream.
func (s *stream) reset(last string) End {
	s.mu.Lock()
	if !s.failed {
		b := []byte("event: reset\ndata: {\"position\":" + strconv.Quote(last) + "}\n\n")
		s.pending = append(s.pending, b)
		s.queued += len(b)
		s.wake.Signal()
	}
	s.mu.Unlock()
	s.cancel(ErrStalled)
	return EndReset
}

// close lets the drain goroutine write what is queued (each write bounded
// by opts.WriteTimeout) and waits for it.
func (s *stream) close() {
	s.mu.Lock()
	s.closing = true
	s.wake.Signal()
	s.mu.Unlock()
	<-s.done
}

func (s *stream) drain() {
	defer close(s.done)
	var spare [][]byte
	for {
		s.mu.Lock()
		for len(s.pending) == 0 && !s.closing && !s.failed {
			s.wake.Wait()
		}
		if s.failed || len(s.pending) == 0 {
			s.mu.Unlock()
			return
		}
		bufs := s.pending
		s.pending, s.queued = spare[:0], 0
		s.mu.Unlock()
		s.made()
		// Twice the time a sender waits for room: a client that stopped
		// reading and starts again within it still gets the reset.
		_ = s.rc.SetWriteDeadline(time.Now().Add(2 * s.opts.WriteTimeout))
		var err error
		for _, b := range bufs {
			if _, err = s.w.Write(b); err != nil {
				break
			}
		}
		if err == nil {
			err = s.rc.Flush()
		}
		if err != nil {
			s.mu.Lock()
			s.failed = true
			s.mu.Unlock()
			s.made()
			s.cancel(err)
			return
		}
		// Keep a short list for the next round, emptied so that it holds
		// no frame; a long one (a burst) goes back to the collector rather
		// than staying with an idle subscriber.
		clear(bufs)
		spare = nil
		if cap(bufs) <= 64 {
			spare = bufs
		}
	}
}
