package sse

import (
	"context"
	"mime"
	"net/http"
	"strconv"
	"strings"

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
// has been served).
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
	ctx := r.Context()
	sent := func() {}
	if subs != nil {
		stop, ok := subs.Admit(name)
		if !ok {
			return &problem.Error{
				Details: problem.New(problem.CodeBusy, "the server serves as many feed subscribers as it may; retry after "+retryAfterSeconds+" s"),
				Header:  http.Header{"Retry-After": {retryAfterSeconds}},
			}
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		// No goroutine per subscriber: a callback registered on stop.
		defer context.AfterFunc(stop, cancel)()
		sent = func() { subs.Delivered(name, 1) }
	}
	end := Serve(ctx, w, last, first, next, read, opts, sent)
	if subs != nil {
		subs.Leave(name, end == EndReset)
	}
	return nil
}
