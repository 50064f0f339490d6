package sse

import (
	"bytes"
	"context"
	"log"
	"mime"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/tallyhq/tally/internal/problem"
	"github.com/tallyhq/tally/route"
)

// EventStream is the media type of Server-Sent Events.
const EventStream = "text/event-stream"

// AcceptsEventStream reports whether r's Accept header names
// text/event-stream (with a non-zero q), as an EventSource does.
func AcceptsEventStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil || mt != EventStream {
				continue
			}
			if q, ok := params["q"]; ok {
				if f, err := strconv.ParseFloat(q, 64); err != nil || f <= 0 {
					continue
				}
			}
			return true
		}
	}
	return false
}

// retryAfterSeconds is the Retry-After of a subscriber refused for the
// limit.
const retryAfterSeconds = "5"

// ServeHTTP serves one subscriber of the feed named name (see
// route.Subscribers) as [Serve] does, after subs admits it (nil admits
// every one; the stream also ends when the stop channel Admit returned is
// closed). A refused subscriber gets 503 busy with Retry-After, returned
// as the error for the handler's error mapping; nil otherwise (the stream
// has been served, or, with opts.Hijack, handed to a goroutine of its own
// on the hijacked connection: see [StreamOptions].Hijack).
func ServeHTTP(w http.ResponseWriter, r *http.Request, subs route.Subscribers, name, last string, first []Frame, next string, read Read, opts StreamOptions) error {
	if r.Method == http.MethodHead {
		// A HEAD can read no stream: its writes are discarded, so a stream
		// would never see its client leave and would hold a subscriber and
		// the connection for ever. It gets the stream's headers alone.
		hd := w.Header()
		hd.Set("Content-Type", EventStream)
		hd.Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		return nil
	}
	var stop context.Context
	sent := func() {}
	if subs != nil {
		var ok bool
		stop, ok = subs.Admit(name)
		if !ok {
			return &problem.Error{
				Details: problem.New(problem.CodeBusy, "the server serves as many feed subscribers as it may; retry after "+retryAfterSeconds+" s"),
				Header:  http.Header{"Retry-After": {retryAfterSeconds}},
			}
		}
		sent = func() { subs.Delivered(name, 1) }
	}
	leave := func(end End) {
		if subs != nil {
			subs.Leave(name, end == EndReset)
		}
	}
	opts = opts.withDefaults()
	if opts.Hijack && r.ProtoMajor == 1 {
		if conn, head, ok := hijack(w); ok {
			// The request's context ends when the handler returns: the
			// stream keeps its values, and ends on stop or its own end.
			ctx := context.WithoutCancel(r.Context())
			srv, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
			go func() {
				end := EndError
				defer func() {
					// No net/http below to recover a panic: it ends the
					// stream, logged as net/http logs a handler's.
					if v := recover(); v != nil {
						logf(srv, "sse: panic serving a stream to %v: %v\n%s", conn.RemoteAddr(), v, debug.Stack())
					}
					_ = conn.Close()
					leave(end)
				}()
				ctx, cancel := context.WithCancel(ctx)
				defer cancel()
				if stop != nil {
					defer context.AfterFunc(stop, cancel)()
					// A write blocked on a client that stopped reading does
					// not see the cancel (nor does the reset frame after
					// it): once stopped, the stream has stopGrace to end
					// before its connection is closed under it, so that a
					// shutdown does not wait for its write deadlines.
					ended := make(chan struct{})
					defer close(ended)
					defer context.AfterFunc(stop, func() {
						t := time.NewTimer(stopGrace)
						defer t.Stop()
						select {
						case <-t.C:
							_ = conn.Close()
						case <-ended:
						}
					})()
				}
				s := &stream{out: connOut{conn}, conn: conn, opts: opts}
				end = s.run(ctx, head, last, first, next, read, sent)
			}()
			return nil
		}
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if stop != nil {
		// No goroutine per subscriber: a callback registered on stop.
		defer context.AfterFunc(stop, cancel)()
	}
	leave(Serve(ctx, w, last, first, next, read, opts, sent))
	return nil
}

// hijack takes w's HTTP/1.x connection over from net/http for a stream
// and returns it with the response head to send first: the status line,
// the headers set on w (the middleware's, such as CORS and a request id,
// and the stream's own), Connection: close (the body ends when the
// connection closes) and a Date when none is set. The bufio.ReadWriter
// net/http hands over is flushed and dropped (what a client sent after its
// request is ignored: it sends nothing on a stream). False when w cannot
// be hijacked (HTTP/2, a recorder): nothing was written, and the stream is
// served through w.
func hijack(w http.ResponseWriter) (net.Conn, []byte, bool) {
	hd := w.Header()
	setHeaders(hd)
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, nil, false
	}
	// net/http has written nothing yet; should it have, it goes first (a
	// failure shows at the stream's first write).
	_ = brw.Flush()
	// Any spelling: a key set straight into the map (not canonical) is
	// written as it is, and a content-length would cut the stream short.
	for k := range hd {
		for _, h := range hopHeaders {
			if strings.EqualFold(k, h) {
				delete(hd, k)
			}
		}
	}
	if _, ok := hd["Date"]; !ok {
		hd.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	}
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 200 OK\r\n")
	_ = hd.Write(&b)
	b.WriteString("Connection: close\r\n\r\n")
	return conn, b.Bytes(), true
}

// stopGrace is how long a hijacked stream that was stopped may take to
// end before its connection is closed under it (a write blocked on a
// client that stopped reading).
const stopGrace = time.Second

// logf logs to srv's ErrorLog, or the log package's logger when there is
// none, as net/http does.
func logf(srv *http.Server, format string, args ...any) {
	if srv != nil && srv.ErrorLog != nil {
		srv.ErrorLog.Printf(format, args...)
		return
	}
	log.Printf(format, args...)
}

// hopHeaders are the headers that describe the connection, not the
// answer: the hijacked stream sets its own framing.
var hopHeaders = []string{"Connection", "Keep-Alive", "Transfer-Encoding", "Content-Length", "Trailer", "Upgrade"}
