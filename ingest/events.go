package ingest

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/internal/page"
)

// MaxHistory bounds the events [Service.ResourceEvents] answers at once, as
// the Reporting API's unpaginated per-resource read does; a longer history is
// [ErrHistoryTooLong], and [Service.Events] pages it.
const MaxHistory = 10000

// ErrHistoryTooLong is returned by [Service.ResourceEvents] for a resource
// with more than [MaxHistory] stored events.
var ErrHistoryTooLong = errors.New("ingest: the resource's history is longer than one answer holds")

// ErrTooManyMonths is returned (wrapped, with the store's bound and the
// first event past it) by a store's Commit, and so by [Service.Ingest],
// for a batch whose events fall in more months without storage than the
// store makes at once (pgstore's partitions: pgstore.MaxPartitionsPerBatch).
// Nothing of the batch is stored; the same events sent in batches of fewer
// months are. The HTTP layer answers 400 naming the timestamp.
var ErrTooManyMonths = errors.New("ingest: the batch's events fall in more months without a partition than one batch makes")

// MarshalJSON encodes e as the event's own members followed by
// "received_at" (RFC 3339, UTC): the Reporting API's StoredEvent.
func (e StoredEvent) MarshalJSON() ([]byte, error) {
	b, err := e.Event.MarshalJSON()
	if err != nil {
		return nil, err
	}
	ts, err := json.Marshal(e.ReceivedAt.UTC())
	if err != nil {
		return nil, err
	}
	b = b[:len(b)-1] // the event's closing brace
	b = append(b, `,"received_at":`...)
	b = append(b, ts...)
	return append(b, '}'), nil
}

// UnmarshalJSON decodes what [StoredEvent.MarshalJSON] writes: the event's
// members, strictly as [event.Decode] reads them, and "received_at"
// (required, RFC 3339).
func (e *StoredEvent) UnmarshalJSON(b []byte) error {
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return errors.New("ingest: a stored event must be a JSON object")
	}
	rest := []byte{'{'}
	var received *time.Time
	for dec.PeekKind() != '}' {
		name, err := dec.ReadValue()
		if err != nil {
			return fmt.Errorf("ingest: stored event: %w", err)
		}
		name = bytes.Clone(name)
		v, err := dec.ReadValue()
		if err != nil {
			return fmt.Errorf("ingest: stored event: %w", err)
		}
		if string(name) == `"received_at"` {
			var t time.Time
			if err := json.Unmarshal(v, &t); err != nil {
				return fmt.Errorf("ingest: stored event: received_at: %w", err)
			}
			received = &t
			continue
		}
		if len(rest) > 1 {
			rest = append(rest, ',')
		}
		rest = append(append(append(rest, name...), ':'), v...)
	}
	if received == nil {
		return errors.New("ingest: stored event: received_at is required")
	}
	ev, err := event.Decode(append(rest, '}'))
	if err != nil {
		return err
	}
	*e = StoredEvent{Event: ev, ReceivedAt: received.UTC()}
	return nil
}

// EventFilter selects one page of stored events (GET /api/v1/events, with
// the Reporting API's filters). Empty strings match everything.
type EventFilter struct {
	Cloud, Platform, ProjectID, ResourceType, ResourceID, EventType string
	// Source is "", collector or reconciliation.
	Source event.Source
	// From and To bound the event timestamp to [From, To); a zero value
	// leaves that end open.
	From, To time.Time
	// Limit is 1..1000; 0 means DefaultLimit.
	Limit int
	// Cursor is "" for the first page, else a NextCursor of an earlier page.
	Cursor string
}

// EventPage is one page of stored events, ordered by (timestamp, event_id).
type EventPage struct {
	Items []StoredEvent `json:"items"`
	// NextCursor continues the listing; nil on the last page.
	NextCursor *string `json:"next_cursor"`
}

// Validate returns an [*event.ValidationError] listing every bad parameter
// of f (a text filter that is not valid UTF-8 or holds a NUL, /source not
// collector or reconciliation, /limit, /cursor), or nil.
func (f EventFilter) Validate() error {
	var ps page.Params
	f.check(&ps)
	return ps.Err()
}

func (f EventFilter) check(ps *page.Params) (limit int, after *EventPosition) {
	for _, t := range [...]struct{ name, v string }{
		{"cloud", f.Cloud}, {"platform", f.Platform}, {"project_id", f.ProjectID},
		{"resource_type", f.ResourceType}, {"resource_id", f.ResourceID}, {"event_type", f.EventType},
	} {
		ps.Text(t.name, t.v)
	}
	switch f.Source {
	case "", event.SourceCollector, event.SourceReconciliation:
	default:
		*ps = append(*ps, event.Problem{Member: "/source", Rule: event.RuleEnum, Message: "must be collector or reconciliation"})
	}
	limit = ps.Limit(f.Limit)
	if f.Cursor != "" {
		p, ok := decodeEventCursor(f.Cursor)
		if !ok {
			ps.BadCursor()
		}
		after = &p
	}
	return limit, after
}

func encodeEventCursor(p EventPosition) string {
	b, err := json.Marshal([]any{"e1", p.Timestamp.UnixMicro(), p.EventID})
	if err != nil {
		panic(err) // a string and an integer always encode
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeEventCursor(c string) (EventPosition, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return EventPosition{}, false
	}
	var parts struct {
		tag string
		us  int64
		id  string
	}
	var raw []jsontext.Value
	if err := json.Unmarshal(b, &raw); err != nil || len(raw) != 3 ||
		json.Unmarshal(raw[0], &parts.tag) != nil || parts.tag != "e1" ||
		json.Unmarshal(raw[1], &parts.us) != nil || json.Unmarshal(raw[2], &parts.id) != nil {
		return EventPosition{}, false
	}
	at, ok := page.CursorTime(parts.us)
	if !ok || !page.CursorText(parts.id) {
		return EventPosition{}, false
	}
	return EventPosition{Timestamp: at, EventID: parts.id}, true
}

// Events lists one page of stored events, oldest first by (timestamp,
// event_id), each with when it was received (the Reporting API's GET
// /api/v1/events). Items is never nil. It returns an
// [*event.ValidationError] listing every bad parameter, or the store's
// error wrapped.
func (s *Service) Events(ctx context.Context, f EventFilter) (EventPage, error) {
	var ps page.Params
	limit, after := f.check(&ps)
	if err := ps.Err(); err != nil {
		return EventPage{}, err
	}
	items, err := s.store.Events(ctx, EventQuery{
		Cloud: f.Cloud, Platform: f.Platform, ProjectID: f.ProjectID, ResourceType: f.ResourceType,
		ResourceID: f.ResourceID, EventType: f.EventType, Source: f.Source,
		From: page.CeilMicro(f.From), To: page.CeilMicro(f.To), After: after, Limit: limit + 1, MaxBytes: MaxPageBytes,
	})
	if err != nil {
		return EventPage{}, fmt.Errorf("ingest: list events: %w", err)
	}
	out := EventPage{}
	out.Items, out.NextCursor = page.Paginate(items, limit, StoredEventBytes, storedEventCursor)
	return out, nil
}

// storedEventCursor is the cursor of [Service.Events] that continues after e.
func storedEventCursor(e StoredEvent) string {
	return encodeEventCursor(EventPosition{Timestamp: e.Event.Timestamp, EventID: e.Event.EventID})
}

// ResourceEvents returns the stored history of one resource by
// (timestamp, event_id), each event with when it was received (GET
// /api/v1/resources/{cloud}/{resource_type}/{resource_id}/events); Items is
// never nil. A history over [MaxPageBytes] of item bytes comes back cut
// there, NextCursor a cursor of [Service.Events] that lists the rest; more
// than [MaxHistory] events within the budget is [ErrHistoryTooLong].
func (s *Service) ResourceEvents(ctx context.Context, k projection.Key) (EventPage, error) {
	if err := page.CheckText("cloud", k.Cloud, "resource_type", k.ResourceType, "resource_id", k.ResourceID); err != nil {
		return EventPage{}, err
	}
	items, err := s.store.Events(ctx, EventQuery{
		Cloud: k.Cloud, ResourceType: k.ResourceType, ResourceID: k.ResourceID, Limit: MaxHistory + 1, MaxBytes: MaxPageBytes,
	})
	if err != nil {
		return EventPage{}, fmt.Errorf("ingest: get resource events: %w", err)
	}
	if page.Cut(items, MaxHistory+1, StoredEventBytes) > MaxHistory {
		return EventPage{}, ErrHistoryTooLong
	}
	out := EventPage{}
	out.Items, out.NextCursor = page.Paginate(items, MaxHistory, StoredEventBytes, storedEventCursor)
	return out, nil
}

// ResourceHistory returns the first stored events of one resource by
// (timestamp, event_id), at most [MaxLimit] of them and at most
// [MaxPageBytes] of item bytes (at least one), and, when the history has
// more, the cursor of [Service.Events] (filtered on this resource) that
// lists the rest: what [projection.Service.Get] embeds in a resource's read.
// The key is not checked (Get checks it).
func (s *Service) ResourceHistory(ctx context.Context, k projection.Key) ([]event.Event, *string, error) {
	items, err := s.store.Events(ctx, EventQuery{
		Cloud: k.Cloud, ResourceType: k.ResourceType, ResourceID: k.ResourceID, Limit: MaxLimit + 1, MaxBytes: MaxPageBytes,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("ingest: get resource history: %w", err)
	}
	items, next := page.Paginate(items, MaxLimit, StoredEventBytes, storedEventCursor)
	h := make([]event.Event, len(items))
	for i := range items {
		h[i] = items[i].Event
	}
	return h, next, nil
}
