package correlate

import (
	"context"
	"fmt"
	"time"

	"github.com/tallyhq/tally/internal/feed"
)

// feedHub is the change feed of one process over a store: one tail reader
// (internal/feed's Hub) reads the store's change log ([Store].Feed), keeps
// the recent changes in memory and wakes the waiting readers, on each
// commit through the Service and every poll (commits on other replicas).
// Cursors are opaque, valid on every replica and across restarts.
type feedHub struct {
	hub *feed.Hub[Change, FeedFilter]
}

func newFeedHub(st Store, opts FeedOptions) *feedHub {
	src := feed.Source[Change, FeedFilter]{
		Read: func(ctx context.Context, after feed.Position, f FeedFilter, limit int) (feed.Page[Change], error) {
			p, err := fromPosition(after)
			if err != nil {
				return feed.Page[Change]{}, err
			}
			b, err := st.Feed(ctx, FeedRead{After: p, Limit: limit, Filter: f})
			if err != nil {
				return feed.Page[Change]{}, err
			}
			return feed.Page[Change]{Items: b.Changes, Next: toPosition(b.Next), CaughtUp: b.CaughtUp}, nil
		},
		Head: func(ctx context.Context) (feed.Position, error) {
			b, err := st.Feed(ctx, FeedRead{})
			return toPosition(b.Next), err
		},
		Pos:   func(c Change) feed.Position { return toPosition(c.Position) },
		Match: FeedFilter.Selects,
		Size:  func(c Change) int { return EventBytes(c.Event) + 64 },
	}
	return &feedHub{hub: feed.NewHub(src, feed.Options{Poll: opts.Poll})}
}

// toPosition is the shared feed position of a change-log position: the
// zero one is the start.
func toPosition(p FeedPosition) feed.Position {
	if p == (FeedPosition{}) {
		return feed.Position{}
	}
	return feed.Position{Kind: feed.Current, TX: p.TX, Seq: p.Seq}
}

// fromPosition is the change-log position of a shared one; the
// correlated feed has no legacy part.
func fromPosition(p feed.Position) (FeedPosition, error) {
	switch p.Kind {
	case feed.Start:
		return FeedPosition{}, nil
	case feed.Current:
		return FeedPosition{TX: p.TX, Seq: p.Seq}, nil
	}
	return FeedPosition{}, ErrCursor
}

// position is the place a cursor names: "" the start, "now" the head.
func (f *feedHub) position(ctx context.Context, cursor string) (feed.Position, error) {
	switch cursor {
	case "":
		return feed.Position{}, nil
	case "now":
		return f.hub.Head(ctx)
	}
	p, err := feed.Decode(feed.Correlated, cursor)
	if err != nil {
		return feed.Position{}, fmt.Errorf("correlate: cursor: %w", ErrCursor)
	}
	if _, err := fromPosition(p); err != nil {
		return feed.Position{}, err
	}
	return p, nil
}

// read returns at most limit changes flt selects after the cursor after,
// waiting up to wait for one when there is none.
func (f *feedHub) read(ctx context.Context, flt FeedFilter, after string, limit int, wait time.Duration) (FeedPage, error) {
	pos, err := f.position(ctx, after)
	if err != nil {
		return FeedPage{}, err
	}
	p, err := f.hub.Read(ctx, pos, flt, limit, wait)
	if err != nil {
		return FeedPage{}, err
	}
	// At most MaxPageBytes of events (at least one), as a getEvents page.
	evs := make([]Event, len(p.Items))
	for i := range p.Items {
		evs[i] = p.Items[i].Event
	}
	if n := cutPage(evs); n < len(p.Items) {
		p.Items, p.Next, p.CaughtUp = p.Items[:n], toPosition(p.Items[n-1].Position), false
	}
	out := FeedPage{Items: make([]FeedItem, 0, len(p.Items)), NextCursor: feed.Encode(feed.Correlated, p.Next), CaughtUp: p.CaughtUp}
	for _, c := range p.Items {
		out.Items = append(out.Items, FeedItem{Position: feed.Encode(feed.Correlated, toPosition(c.Position)), Kind: c.Kind, Event: c.Event})
	}
	return out, nil
}
