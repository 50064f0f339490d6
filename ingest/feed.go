package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/internal/feed"
	"github.com/tallyhq/tally/internal/page"
)

// The lifecycle feed (docs/http-api.md, Change feeds): every stored event
// exactly once, never a duplicate or a refused item, in one total order
// that is the same for every reader and every replica, resumable from any
// cursor it gave. It is the order in which the events became readable, not
// their timestamps: a late event (a timestamp before its resource's last
// event) comes when it was stored, marked Late.

// MaxFeedWait bounds [FeedQuery.Wait].
const MaxFeedWait = 30 * time.Second

// FeedPosition is a place in the lifecycle feed as a [Store] keeps it: the
// zero value is before every event; Kind Legacy orders the events stored
// before positions existed (an upgraded database) by (Time, ID), before
// every other event; Kind Current orders by (TX, Seq).
type FeedPosition = feed.Position

// The kinds of a [FeedPosition] (its Kind), earliest first, for a store
// outside this module.
const (
	FeedStart   = feed.Start
	FeedLegacy  = feed.Legacy
	FeedCurrent = feed.Current
)

// ErrFeedPosition is what a [Store]'s Feed returns (wrapped) for a position
// it never gave: one from another database or store.
var ErrFeedPosition = errors.New("ingest: not a position of this store's feed")

// FeedRead is what a [Store]'s Feed reads: at most Limit events after After
// that the filter selects, in feed order. Limit 0 reads nothing and answers
// the head: Next is the position of the last readable event.
type FeedRead struct {
	After FeedPosition
	Limit int
	FeedFilter
}

// FeedFilter selects events of the feed; an empty string matches
// everything.
type FeedFilter struct {
	Cloud, Platform, ResourceType, ProjectID, EventType string
}

// Match reports whether f selects e.
func (f FeedFilter) Match(e *event.Event) bool {
	return (f.Cloud == "" || f.Cloud == e.Cloud) && (f.Platform == "" || f.Platform == e.Platform) &&
		(f.ResourceType == "" || f.ResourceType == e.ResourceType) &&
		(f.ProjectID == "" || f.ProjectID == e.ProjectID) && (f.EventType == "" || f.EventType == e.EventType)
}

// FeedEvent is one stored event as the feed carries it.
type FeedEvent struct {
	StoredEvent
	// Position is the event's place in the feed.
	Position FeedPosition
	// Late is true when the event's timestamp was before its resource's
	// last_event_at when it was stored: history before it changed. A
	// batch's events enter the feed oldest first, so Late compares with
	// what was stored before the batch; an event of the batch is never
	// late against another of it.
	Late bool
}

// FeedBatch is what a [Store]'s Feed returns: the events, where the next
// read starts (past events the filter did not select when the store
// stopped scanning early; never before FeedRead.After) and whether nothing
// readable lay beyond it.
type FeedBatch = feed.Page[FeedEvent]

// MaxFeedScan bounds how many events a store examines in one filtered feed
// read; a read that examined that many returns what it selected, with Next
// after the last one examined.
const MaxFeedScan = 10000

// FeedQuery is one read of the lifecycle feed (GET /api/v1/events/feed).
type FeedQuery struct {
	// After is "" for the beginning of history, "now" for the current head,
	// else a cursor the feed returned (FeedItem.Position or
	// FeedPage.NextCursor).
	After string
	// Limit is 1..1000; 0 means DefaultLimit.
	Limit int
	// Wait, 0..MaxFeedWait, is how long to wait for an event when none is
	// there yet.
	Wait time.Duration
	FeedFilter
}

// FeedItem is one event of a [FeedPage]: the stored event as [Service.Events]
// returns it with its cursor and whether it came late.
type FeedItem struct {
	StoredEvent
	Position string
	Late     bool
}

// MarshalJSON encodes it as the StoredEvent's members followed by
// "position" and "late".
func (it FeedItem) MarshalJSON() ([]byte, error) {
	b, err := it.StoredEvent.MarshalJSON()
	if err != nil {
		return nil, err
	}
	b = b[:len(b)-1]
	b = append(b, `,"position":`...)
	b = strconv.AppendQuote(b, it.Position)
	b = append(b, `,"late":`...)
	b = strconv.AppendBool(b, it.Late)
	return append(b, '}'), nil
}

// UnmarshalJSON decodes what [FeedItem.MarshalJSON] encodes: an object
// whose members "received_at" (RFC 3339), "position" (a string) and "late"
// (a boolean) are all required, every other member being the event's,
// decoded strictly with [event.Decode] (its error, an
// [*event.ValidationError], is returned as it is). A duplicate member name
// or a missing one of the three is an error.
func (it *FeedItem) UnmarshalJSON(b []byte) error {
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.ReadToken(); err != nil {
		return fmt.Errorf("ingest: feed item: %w", err)
	} else if tok.Kind() != '{' {
		return fmt.Errorf("ingest: feed item: must be a JSON object, not %v", tok.Kind())
	}
	var (
		out                          FeedItem
		rest                         = []byte{'{'}
		hasReceived, hasPos, hasLate bool
	)
	for dec.PeekKind() == '"' {
		name, err := dec.ReadValue()
		if err != nil {
			return fmt.Errorf("ingest: feed item: %w", err)
		}
		name = bytes.Clone(name)
		text, err := jsontext.AppendUnquote(nil, name)
		if err != nil {
			return fmt.Errorf("ingest: feed item: %w", err)
		}
		val, err := dec.ReadValue()
		if err != nil {
			return fmt.Errorf("ingest: feed item: %w", err)
		}
		switch string(text) {
		case "received_at":
			hasReceived, err = true, json.Unmarshal(val, &out.ReceivedAt)
		case "position":
			hasPos, err = true, json.Unmarshal(val, &out.Position)
		case "late":
			hasLate, err = true, json.Unmarshal(val, &out.Late)
		default:
			if len(rest) > 1 {
				rest = append(rest, ',')
			}
			rest = append(append(append(rest, name...), ':'), val...)
			continue
		}
		if err != nil {
			return fmt.Errorf("ingest: feed item: %s: %w", text, err)
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return fmt.Errorf("ingest: feed item: %w", err)
	}
	for _, m := range [...]struct {
		name string
		ok   bool
	}{{"received_at", hasReceived}, {"position", hasPos}, {"late", hasLate}} {
		if !m.ok {
			return fmt.Errorf("ingest: feed item: %s is required", m.name)
		}
	}
	e, err := event.Decode(append(rest, '}'))
	if err != nil {
		return err
	}
	out.Event = e
	*it = out
	return nil
}

// FeedPage is one answer of the lifecycle feed.
type FeedPage struct {
	// Items is never nil.
	Items []FeedItem `json:"items"`
	// NextCursor is where the next read starts, also when Items is empty.
	NextCursor string `json:"next_cursor"`
	// CaughtUp is true when nothing readable lay after NextCursor.
	CaughtUp bool `json:"caught_up"`
}

// Validate returns an [*event.ValidationError] listing every bad parameter
// of q (/after, /limit, /wait and the text filters), or nil.
func (q FeedQuery) Validate() error {
	var ps page.Params
	q.check(&ps)
	return ps.Err()
}

func (q FeedQuery) check(ps *page.Params) (after FeedPosition, head bool, limit int) {
	for _, t := range [...]struct{ name, v string }{
		{"cloud", q.Cloud}, {"platform", q.Platform}, {"resource_type", q.ResourceType},
		{"project_id", q.ProjectID}, {"event_type", q.EventType},
	} {
		ps.Text(t.name, t.v)
	}
	limit = ps.Limit(q.Limit)
	if q.Wait < 0 || q.Wait > MaxFeedWait {
		*ps = append(*ps, event.Problem{Member: "/wait", Rule: event.RuleMaximum, Message: "must be from 0 to 30 seconds"})
	}
	switch q.After {
	case "":
	case "now":
		head = true
	default:
		p, ok := DecodeFeedCursor(q.After)
		if !ok {
			*ps = append(*ps, badAfter())
		}
		after = p
	}
	return after, head, limit
}

// DecodeFeedCursor reads a cursor of the lifecycle feed (a position or
// next_cursor [Service.Feed] gave): ok is false for a cursor that is
// malformed, of another feed, or names a position no stored event can have
// (see legacyPosition). Every reader of such a cursor decodes it here.
func DecodeFeedCursor(cursor string) (p FeedPosition, ok bool) {
	p, err := feed.Decode(feed.Lifecycle, cursor)
	return p, err == nil && legacyPosition(p)
}

// legacyPosition reports whether p, when Legacy, is one a stored event can
// have: a timestamp of years 1 to 9999 and an id of UTF-8 text without NUL.
// A cursor's checksum is no secret, so a client can forge any position; one
// no event can have must be refused here, not sent to the store.
func legacyPosition(p FeedPosition) bool {
	if p.Kind != feed.Legacy {
		return true
	}
	y := p.Time.Year()
	return y >= 1 && y <= 9999 && utf8.ValidString(p.ID) && !strings.ContainsRune(p.ID, 0)
}

func badAfter() event.Problem {
	return event.Problem{Member: "/after", Rule: event.RuleFormat, Message: "must be now or a cursor this feed returned"}
}

// Feed reads the lifecycle feed: at most q.Limit events after q.After that
// the filters select, waiting up to q.Wait for one when there is none yet,
// and at most [MaxPageBytes] of item bytes (at least one item). It returns
// an [*event.ValidationError] listing every bad parameter (a cursor that
// is tampered, of another feed or another database is /after), ctx's error
// when it ends the wait, or the store's error wrapped. The items' payloads
// are shared with the feed's other readers (and, in memory, the store):
// read-only.
func (s *Service) Feed(ctx context.Context, q FeedQuery) (FeedPage, error) {
	var ps page.Params
	after, head, limit := q.check(&ps)
	if err := ps.Err(); err != nil {
		return FeedPage{}, err
	}
	if head {
		var err error
		if after, err = s.feed.Head(ctx); err != nil {
			return FeedPage{}, fmt.Errorf("ingest: read the feed's head: %w", err)
		}
	}
	p, err := s.feed.Read(ctx, after, q.FeedFilter, limit, q.Wait)
	if errors.Is(err, ErrFeedPosition) {
		return FeedPage{}, &event.ValidationError{Problems: []event.Problem{badAfter()}}
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return FeedPage{}, ctxErr
		}
		return FeedPage{}, fmt.Errorf("ingest: read the feed: %w", err)
	}
	n := page.Cut(p.Items, len(p.Items), func(e ringEvent) int { return StoredEventBytes(e.StoredEvent) })
	if n < len(p.Items) {
		p.Items, p.Next, p.CaughtUp = p.Items[:n], p.Items[n-1].Position, false
	}
	out := FeedPage{Items: make([]FeedItem, len(p.Items)), NextCursor: feed.Encode(feed.Lifecycle, p.Next), CaughtUp: p.CaughtUp}
	for i, e := range p.Items {
		out.Items[i] = FeedItem{StoredEvent: e.StoredEvent, Position: e.cursor, Late: e.Late}
	}
	return out, nil
}

// ringEvent is a feed event as the hub keeps it: with its cursor, encoded
// once for every reader.
type ringEvent struct {
	FeedEvent
	cursor string
}

// newFeedHub is the hub of s's feed over its store.
func newFeedHub(st Store, opts FeedOptions) *feed.Hub[ringEvent, FeedFilter] {
	return feed.NewHub(feed.Source[ringEvent, FeedFilter]{
		Read: func(ctx context.Context, after feed.Position, f FeedFilter, limit int) (feed.Page[ringEvent], error) {
			b, err := st.Feed(ctx, FeedRead{After: after, Limit: limit, FeedFilter: f})
			p := feed.Page[ringEvent]{Items: make([]ringEvent, len(b.Items)), Next: b.Next, CaughtUp: b.CaughtUp}
			for i, e := range b.Items {
				p.Items[i] = ringEvent{FeedEvent: e, cursor: feed.Encode(feed.Lifecycle, e.Position)}
			}
			return p, err
		},
		Head: func(ctx context.Context) (feed.Position, error) {
			b, err := st.Feed(ctx, FeedRead{})
			return b.Next, err
		},
		Pos:   func(e ringEvent) feed.Position { return e.Position },
		Match: func(f FeedFilter, e ringEvent) bool { return f.Match(&e.Event) },
		Size:  func(e ringEvent) int { return StoredEventBytes(e.StoredEvent) },
	}, feed.Options{Poll: opts.Poll})
}

// FeedOptions tune the lifecycle feed of a [Service].
type FeedOptions struct {
	// Poll is how often the feed looks for events stored by other
	// replicas when nothing woke it (default 500ms): the most a follower
	// on another replica waits, without [Service.FeedNotify].
	Poll time.Duration
	// Committed, when not nil, is called after each batch that stored an
	// event, once its commit has returned: the place for a post-commit
	// wake-up of the other replicas (pgstore.DB.NotifyFeed). It must not
	// block.
	Committed func()
}

// FeedNotify tells the feed that events were stored by another replica
// (a post-commit wake-up such as PostgreSQL's NOTIFY), so that waiting
// readers get them now rather than at the next poll. Events stored through
// s wake its readers without it.
func (s *Service) FeedNotify() { s.feed.Notify() }
