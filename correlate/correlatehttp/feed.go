package correlatehttp

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/internal/problem"
	"github.com/tallyhq/tally/internal/sse"
)

// feedParams are the query parameters of the feed routes: getEvents'
// filters, after, and on the long-poll route limit and wait.
var feedParams = []string{"after", "limit", "wait", "search", "filter", "category", "action", "severity", "status", "correlationKey", "resolved"}

// feedQuery reads the parameters of a feed route; poll says whether limit
// and wait are taken (GET /api/events/feed) or refused as unknown (the
// stream).
func feedQuery(r *http.Request, poll bool) (correlate.FeedQuery, []event.Problem) {
	v := r.URL.Query()
	known := feedParams
	if !poll {
		known = []string{"after", "search", "filter", "category", "action", "severity", "status", "correlationKey", "resolved"}
	}
	ps := problem.UnknownParameters(v, known)
	ps = append(ps, problem.RepeatedParameters(v, []string{"after", "limit", "wait", "search", "filter", "correlationKey", "resolved"})...)
	fq, paging := filterParams(v, &ps)
	if paging != (meshkitPaging{}) {
		ps = append(ps, event.Problem{Member: "/filter", Rule: event.RuleAdditionalProperties,
			Message: "a feed is not paged nor sorted: filter's limit, offset, order and sortOn must be unset"})
	}
	q := correlate.FeedQuery{After: v.Get("after"), Category: fq.Category, Action: fq.Action, Severity: fq.Severity,
		Status: fq.Status, Resolved: fq.Resolved, CorrelationKey: fq.CorrelationKey, Search: fq.Search}
	num := func(name string, lo, hi int) int {
		s := v.Get(name)
		if s == "" {
			return 0
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < lo || n > hi {
			ps = append(ps, event.Problem{Member: "/" + name, Rule: event.RuleType, Message: fmt.Sprintf("must be an integer from %d to %d", lo, hi)})
			return 0
		}
		return n
	}
	if poll {
		q.Limit = num("limit", 1, correlate.MaxFeedLimit)
		q.Wait = time.Duration(num("wait", 0, int(correlate.MaxFeedWait/time.Second))) * time.Second
	}
	return q, ps
}

// feedPoll is GET /api/events/feed: ?after=<cursor>&limit=1..1000 (default
// 100)&wait=0..30 (seconds, default 0) and getEvents' filters; it answers
// 200 {"items":[{"position","kind","event"}],"next_cursor","caught_up"}.
func (h *Handler) feedPoll(w http.ResponseWriter, r *http.Request) error {
	caller, err := h.caller(r)
	if err != nil {
		return err
	}
	q, ps := feedQuery(r, true)
	if len(ps) > 0 {
		return invalidQuery(ps)
	}
	p, err := h.svc.Feed(r.Context(), caller, q)
	if err != nil {
		return err
	}
	problem.WriteJSON(w, http.StatusOK, p)
	return nil
}

// LastEventIDHeader is the request header an EventSource resends with the
// id of the last item it received; it resumes the stream and wins over
// the after parameter.
const LastEventIDHeader = "Last-Event-ID"

// subscribe is GET /api/events/subscribe: the feed as Server-Sent Events,
// one item per change ("id: <cursor>", "event: <kind>", "data: <the event
// as getEvents returns it>"), from Last-Event-ID or after (the start when
// neither is given), with getEvents' filters.
func (h *Handler) subscribe(w http.ResponseWriter, r *http.Request) error {
	caller, err := h.caller(r)
	if err != nil {
		return err
	}
	q, ps := feedQuery(r, false)
	if id := r.Header.Get(LastEventIDHeader); id != "" {
		q.After = id
	}
	if len(ps) > 0 {
		return invalidQuery(ps)
	}
	// The first read answers a bad cursor with 400 before the stream starts.
	p, err := h.svc.Feed(r.Context(), caller, q)
	if err != nil {
		return err
	}
	frames, err := h.changeFrames(p)
	if err != nil {
		return err
	}
	// A stream's reads are no pages its client sees: without a limit, the
	// largest catches a subscriber up in fewer reads and writes.
	limit := q.Limit
	if !r.URL.Query().Has("limit") {
		limit = correlate.MaxFeedLimit
	}
	read := func(ctx context.Context, after string, wait time.Duration) ([]sse.Frame, string, error) {
		next := q
		next.After, next.Wait = after, wait
		next.Limit = limit
		p, err := h.svc.Feed(ctx, caller, next)
		if err != nil {
			return nil, after, err
		}
		frames, err := h.changeFrames(p)
		return frames, p.NextCursor, err
	}
	return sse.ServeHTTP(w, r, h.opts.Subscribers, "correlated", q.After, frames, p.NextCursor, read, h.opts.Stream)
}

// changeFrames are the SSE frames of a feed page: each change named by its
// kind, its data the event as getEvents returns it, encoded once for every
// subscriber (a change's position names one change, whose snapshot never
// changes).
func (h *Handler) changeFrames(p correlate.FeedPage) ([]sse.Frame, error) {
	frames := make([]sse.Frame, len(p.Items))
	for i, it := range p.Items {
		fr, err := h.frames.Frame(it.Position, string(it.Kind), func() ([]byte, error) { return problem.Marshal(it.Event) })
		if err != nil {
			return nil, err
		}
		frames[i] = fr
	}
	return frames, nil
}
