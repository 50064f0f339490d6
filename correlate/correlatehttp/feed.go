package correlatehttp

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/internal/feed"
	"github.com/tallyhq/tally/internal/problem"
)

// Feed is the correlated-event change feed of one process over a store:
// the [correlate.FeedHub] a [correlate.Service] is given
// (correlate.Options.Feed) and that the [Handler] streams from
// (Options.Feed). One tail reader reads the store's change log
// ([correlate.Store].Feed), keeps the recent changes in memory and wakes
// the waiting readers, on each Notify (a commit on this replica) and every
// poll (commits on other replicas). Cursors are opaque, valid on every
// replica and across restarts. Safe for concurrent use.
type Feed struct {
	hub *feed.Hub[correlate.Change, correlate.FeedFilter]
}

// FeedOptions tune [NewFeed]. Zero fields take the defaults named.
type FeedOptions struct {
	// Poll is how often the feed looks for changes other replicas
	// committed (default 500ms).
	Poll time.Duration
}

// NewFeed returns the change feed over st.
func NewFeed(st correlate.Store, opts FeedOptions) *Feed {
	src := feed.Source[correlate.Change, correlate.FeedFilter]{
		Read: func(ctx context.Context, after feed.Position, f correlate.FeedFilter, limit int) (feed.Page[correlate.Change], error) {
			p, err := fromPosition(after)
			if err != nil {
				return feed.Page[correlate.Change]{}, err
			}
			b, err := st.Feed(ctx, correlate.FeedRead{After: p, Limit: limit, Filter: f})
			if err != nil {
				return feed.Page[correlate.Change]{}, err
			}
			return feed.Page[correlate.Change]{Items: b.Changes, Next: toPosition(b.Next), CaughtUp: b.CaughtUp}, nil
		},
		Head: func(ctx context.Context) (feed.Position, error) {
			b, err := st.Feed(ctx, correlate.FeedRead{})
			return toPosition(b.Next), err
		},
		Pos:   func(c correlate.Change) feed.Position { return toPosition(c.Position) },
		Match: correlate.FeedFilter.Selects,
		Size:  func(c correlate.Change) int { return correlate.EventBytes(c.Event) + 64 },
	}
	return &Feed{hub: feed.NewHub(src, feed.Options{Poll: opts.Poll})}
}

// toPosition is the shared feed position of a change-log position: the
// zero one is the start.
func toPosition(p correlate.FeedPosition) feed.Position {
	if p == (correlate.FeedPosition{}) {
		return feed.Position{}
	}
	return feed.Position{Kind: feed.Current, TX: p.TX, Seq: p.Seq}
}

// fromPosition is the change-log position of a shared one; the
// correlated feed has no legacy part.
func fromPosition(p feed.Position) (correlate.FeedPosition, error) {
	switch p.Kind {
	case feed.Start:
		return correlate.FeedPosition{}, nil
	case feed.Current:
		return correlate.FeedPosition{TX: p.TX, Seq: p.Seq}, nil
	}
	return correlate.FeedPosition{}, correlate.ErrCursor
}

// Notify implements [correlate.FeedHub].
func (f *Feed) Notify() { f.hub.Notify() }

// position is the place a cursor names: "" the start, "now" the head.
func (f *Feed) position(ctx context.Context, cursor string) (feed.Position, error) {
	switch cursor {
	case "":
		return feed.Position{}, nil
	case "now":
		return f.hub.Head(ctx)
	}
	p, err := feed.Decode(feed.Correlated, cursor)
	if err != nil {
		return feed.Position{}, fmt.Errorf("correlatehttp: cursor: %w", correlate.ErrCursor)
	}
	if _, err := fromPosition(p); err != nil {
		return feed.Position{}, err
	}
	return p, nil
}

// Read implements [correlate.FeedHub].
func (f *Feed) Read(ctx context.Context, flt correlate.FeedFilter, after string, limit int, wait time.Duration) (correlate.FeedPage, error) {
	pos, err := f.position(ctx, after)
	if err != nil {
		return correlate.FeedPage{}, err
	}
	p, err := f.hub.Read(ctx, pos, flt, limit, wait)
	if err != nil {
		return correlate.FeedPage{}, err
	}
	out := correlate.FeedPage{Items: make([]correlate.FeedItem, 0, len(p.Items)), NextCursor: feed.Encode(feed.Correlated, p.Next), CaughtUp: p.CaughtUp}
	for _, c := range p.Items {
		out.Items = append(out.Items, correlate.FeedItem{Position: feed.Encode(feed.Correlated, toPosition(c.Position)), Kind: c.Kind, Event: c.Event})
	}
	return out, nil
}

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
	fq := filterParams(v, &ps)
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
	if h.opts.Delivered != nil && len(p.Items) > 0 {
		h.opts.Delivered(len(p.Items))
	}
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
	flt, err := h.svc.FeedFilter(caller, q)
	if err != nil {
		return err
	}
	pos, err := h.opts.Feed.position(r.Context(), q.After)
	if err != nil {
		return correlate.FeedError(err)
	}
	// A tampered position the store refuses fails before the stream starts.
	if _, err := h.opts.Feed.hub.Read(r.Context(), pos, flt, 1, 0); err != nil {
		return correlate.FeedError(err)
	}
	frame := func(c correlate.Change) (feed.Frame, error) {
		b, err := problem.Marshal(c.Event)
		return feed.Frame{ID: feed.Encode(feed.Correlated, toPosition(c.Position)), Event: string(c.Kind), Data: b}, err
	}
	sent := func() {
		if h.opts.Delivered != nil {
			h.opts.Delivered(1)
		}
	}
	if end := feed.Serve(r.Context(), w, h.opts.Feed.hub, feed.Correlated, pos, flt, frame, feed.StreamOptions{}, sent); end == feed.EndReset && h.opts.Stalled != nil {
		h.opts.Stalled()
	}
	return nil
}

var _ correlate.FeedHub = (*Feed)(nil)
