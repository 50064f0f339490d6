// Package sse serves a change feed to one subscriber as Server-Sent Events
// (the WHATWG HTML "Server-sent events" format), written by one goroutine
// with no queue of its own (a client that stops reading is reset): the
// request's own, or, with [StreamOptions].Hijack over HTTP/1.x, one started
// for the stream on the connection taken over from net/http. It admits
// subscribers through route.Subscribers: the HTTP half of internal/feed,
// shared by ingest/ingesthttp and correlate/correlatehttp.
package sse

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/tallyhq/tally/internal/netpeek"
)

// StreamOptions tune [Serve]. Zero fields take the defaults named.
type StreamOptions struct {
	// Buffer bounds the bytes of one write to a subscriber (default 256
	// KiB; one frame larger than that is written alone). Frames are
	// written straight from the shared encoding: the stream holds no queue
	// of its own, only the kernel's socket buffer and net/http's few KiB
	// lie between it and the client.
	Buffer int
	// WriteTimeout is how long a subscriber may take to accept one write
	// before it counts as stalled and is reset (default 10s); one write
	// may block for twice that before the connection counts as gone.
	WriteTimeout time.Duration
	// Heartbeat is the longest time between two writes: with nothing to
	// send, a comment line is written (default 10s). A stream on a
	// hijacked connection (Hijack) also looks for its client's departure
	// at each heartbeat, so it finds it within one.
	Heartbeat time.Duration
	// Hijack serves a stream over HTTP/1.x on the connection itself,
	// taken over from net/http once the subscriber is admitted
	// (http.ResponseController.Hijack): [ServeHTTP] writes the response
	// head itself (status 200, the headers set on the ResponseWriter,
	// Connection: close, the body ending when the connection closes),
	// returns, and the stream runs in a goroutine of its own, so that an
	// idle subscriber holds neither net/http's per-connection buffers nor
	// its handler's goroutine and the connection's background reader. The
	// client's departure is found without a reader: a write fails, or a
	// non-blocking peek at each wake-up finds the connection closed. The
	// peek needs the hijacked connection (under TLS, the one beneath it) to
	// implement syscall.Conn: a listener wrapper that hides it (as
	// golang.org/x/net/netutil.LimitListener's does) leaves only a failed
	// write, which finds a client that closed cleanly at the second
	// heartbeat, not the first.
	// HTTP/2 requests, and writers that cannot be hijacked, are served
	// through the ResponseWriter as without Hijack. A hijacked stream
	// outlives its handler: http.Server.Shutdown neither waits for it nor
	// ends it, so a server that hijacks ends its streams through
	// route.Subscribers (the stop context Admit returns) and waits for
	// their Leave before it closes what they read. Off by default.
	Hijack bool
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

// Read is what [Serve] streams from: the frames after the cursor after,
// waiting up to wait for one, and the cursor the next read starts at.
type Read func(ctx context.Context, after string, wait time.Duration) (frames []Frame, next string, err error)

// Serve streams a feed to w as Server-Sent Events (the WHATWG HTML
// "Server-sent events" format): first the frames of first, then those read
// from next on, each as "id: <cursor>", "event: <kind>" and "data: <JSON>",
// and a comment line whenever nothing was written for opts.Heartbeat. A
// client resumes by sending the last id it received as Last-Event-ID (the
// caller reads it and makes first and next from it). The frames of each
// read are written by the calling goroutine, at most opts.Buffer bytes a
// write and one flush a read, so a client that stops reading blocks only
// its own stream: a write it takes longer than opts.WriteTimeout to
// accept ends the stream with "event: reset" and data {"position":"<last
// id sent>"} (written when the client takes it within the write's
// deadline, twice opts.WriteTimeout). A read error ends it with "event:
// error" and the same data. Each frame sent is counted by sent (nil:
// none). Serve returns when the stream ends, and how.
func Serve(ctx context.Context, w http.ResponseWriter, last string, first []Frame, next string, read Read, opts StreamOptions, sent func()) End {
	opts = opts.withDefaults()
	setHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	s := &stream{out: responseOut{w: w, rc: http.NewResponseController(w)}, opts: opts}
	return s.run(ctx, nil, last, first, next, read, sent)
}

// setHeaders sets the headers of a stream's answer.
func setHeaders(hd http.Header) {
	hd.Set("Content-Type", EventStream)
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no")
}

// run is the stream of [Serve], written to s: head (the response head on
// a hijacked connection; nil otherwise) goes out with the first write.
func (s *stream) run(ctx context.Context, head []byte, last string, first []Frame, next string, read Read, sent func()) End {
	head = append(head, "retry: 2000\n\n"...)
	// An id-only block (no data) sets a client's last event id without an
	// event (WHATWG HTML, "dispatch the event": the id is taken before an
	// empty data buffer ends it), so that a client cut off before its first
	// item, or whose filter has matched nothing yet, resumes where the
	// stream was, not at a new "now".
	if len(first) == 0 && next != "" && next != last {
		head = append(head, "id: "+next+"\n\n"...)
		last = next
	}
	if !s.write(head) || !s.flush() {
		return s.end(last)
	}
	frames, read0 := first, false
	for {
		if len(frames) == 0 && read0 {
			beat := ": keep-alive\n\n"
			if next != "" && next != last {
				beat = "id: " + next + "\n\n"
			}
			ok := s.write([]byte(beat))
			if ok && next != "" {
				last = next
			}
			if !ok || !s.flush() {
				return s.end(last)
			}
		}
		read0 = true
		if len(frames) > 0 {
			ok := s.frames(frames, func(fr Frame) {
				last = fr.ID
				if sent != nil {
					sent()
				}
			})
			if !ok || !s.flush() {
				return s.end(last)
			}
		}
		frames = nil // not kept while the next read waits
		var err error
		frames, next, err = read(ctx, next, s.opts.Heartbeat)
		if ctx.Err() != nil || s.clientGone() {
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

// stream writes to one client, timing each write: one the client took
// longer than opts.WriteTimeout to accept marks it stalled.
type stream struct {
	out     output
	conn    net.Conn // the hijacked connection (out writes to it), or nil
	opts    StreamOptions
	stalled bool // a write took longer than opts.WriteTimeout
	failed  bool // a write or flush failed: nothing more can be written
}

// output is where a stream writes: net/http's response, or a hijacked
// connection.
type output interface {
	Write(b []byte) (int, error)
	// Flush sends what the output buffers; a connection buffers nothing.
	Flush() error
	SetWriteDeadline(t time.Time) error
}

// responseOut writes through net/http's buffers.
type responseOut struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (o responseOut) Write(b []byte) (int, error)        { return o.w.Write(b) }
func (o responseOut) Flush() error                       { return o.rc.Flush() }
func (o responseOut) SetWriteDeadline(t time.Time) error { return o.rc.SetWriteDeadline(t) }

// connOut writes straight to a hijacked connection: no buffer lies
// between the shared encoding and the kernel.
type connOut struct{ net.Conn }

func (connOut) Flush() error { return nil }

// drainWait is how long a check of a hijacked connection with bytes
// waiting on it reads them (a TLS record that is not whole yet).
const drainWait = 5 * time.Millisecond

// clientGone reports whether the client of a hijacked connection has
// closed it, without waiting for it: a non-blocking peek, and when bytes
// are waiting (a client sends nothing after its request but, on TLS, the
// close_notify alert before it closes), a read of them with a deadline of
// drainWait, to find the end behind them. A stream through net/http (no
// connection of its own) learns it from its request's context instead.
func (s *stream) clientGone() bool {
	if s.conn == nil {
		return false
	}
	// A few reads at most: a client that keeps sending is not read for
	// ever, and is found gone at a later wake-up when it closes.
	for range 4 {
		switch netpeek.Peek(s.conn) {
		case netpeek.Closed:
			return true
		case netpeek.Readable:
			var buf [512]byte
			_ = s.conn.SetReadDeadline(time.Now().Add(drainWait))
			_, err := s.conn.Read(buf[:])
			_ = s.conn.SetReadDeadline(time.Time{})
			if err != nil {
				return !errors.Is(err, os.ErrDeadlineExceeded)
			}
		default:
			return false
		}
	}
	return false
}

// smallFrame is the size below which frames are copied into one write
// rather than written one by one: net/http's response buffer (2 KiB) and
// connection buffer (4 KiB) would otherwise make a system call every few
// small frames, while a large frame is one system call either way and is
// not worth a copy per subscriber.
const smallFrame = 2 << 10

// spare holds the buffers that join small frames into one write, taken
// for a write and returned after it: an idle subscriber holds none.
var spare = sync.Pool{New: func() any { return new([]byte) }}

// frames writes frs, calling done for each frame once it is written: a
// run of small frames (each under smallFrame) as one write of at most
// opts.Buffer bytes, a larger frame alone, each straight from its shared
// encoding. False when a write failed or the client stalled (a frame
// written late still counts as written).
func (s *stream) frames(frs []Frame, done func(Frame)) bool {
	for i := 0; i < len(frs); {
		enc := frs[i].encoded()
		if len(enc) >= smallFrame {
			if !s.write(enc) {
				return false
			}
			done(frs[i])
			i++
			if s.stalled {
				return false
			}
			continue
		}
		bp := spare.Get().(*[]byte)
		b := (*bp)[:0]
		j := i
		for ; j < len(frs); j++ {
			enc := frs[j].encoded()
			if len(enc) >= smallFrame || len(b) > 0 && len(b)+len(enc) > s.opts.Buffer {
				break
			}
			b = append(b, enc...)
		}
		ok := s.write(b)
		if cap(b) <= 2*s.opts.Buffer {
			*bp = b[:0]
			spare.Put(bp)
		}
		if !ok {
			return false
		}
		for ; i < j; i++ {
			done(frs[i])
		}
		if s.stalled {
			return false
		}
	}
	return true
}

// write writes b (not kept) within a deadline of twice
// opts.WriteTimeout; false when it failed (or an earlier one did, or the
// client stalled before). A write the client took longer than
// opts.WriteTimeout to accept marks it stalled.
func (s *stream) write(b []byte) bool {
	return s.timed(func() error {
		_, err := s.out.Write(b)
		return err
	})
}

// flush sends what the output buffers to the client (a hijacked
// connection buffers nothing), as write does; false also when the client
// stalled.
func (s *stream) flush() bool { return s.timed(s.out.Flush) && !s.stalled }

func (s *stream) timed(op func() error) bool {
	if s.failed || s.stalled {
		return false
	}
	start := time.Now()
	// Twice the time a client may take: a client that stopped reading and
	// starts again within it still gets the reset.
	_ = s.out.SetWriteDeadline(start.Add(2 * s.opts.WriteTimeout))
	err := op()
	if time.Since(start) > s.opts.WriteTimeout || errors.Is(err, os.ErrDeadlineExceeded) {
		s.stalled = true
	}
	if err != nil {
		s.failed = true
	}
	return err == nil
}

// send writes b and flushes it within the write deadline, stalled or
// not: the last words of a stream.
func (s *stream) send(b []byte) {
	if s.failed {
		return
	}
	s.stalled = false
	if s.write(b) {
		s.timed(s.out.Flush)
	}
}

// end ends a stream whose write failed or stalled: a stalled client gets
// the reset frame naming last, the last position sent, if it takes it
// within the write deadline.
func (s *stream) end(last string) End {
	if !s.stalled {
		return EndClient
	}
	s.send([]byte("event: reset\ndata: {\"position\":" + strconv.Quote(last) + "}\n\n"))
	return EndReset
}
