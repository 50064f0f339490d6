package ingest

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/internal/page"
)

// ResourceFilter selects one page of the projection of current resources.
// Empty strings and a zero AliveAt match everything.
type ResourceFilter struct {
	Cloud        string
	Platform     string
	ResourceType string
	ProjectID    string
	State        string
	// Status keeps active, deleted or all resources (see
	// [ResourceQuery.Status]); "" means all. Any other value is refused
	// (/status, rule enum).
	Status Status
	// AliveAt keeps the resources alive at that instant (see
	// [ResourceQuery.AliveAt]).
	AliveAt time.Time
	// Limit is 1..1000; 0 means DefaultLimit.
	Limit int
	// Cursor is "" for the first page, else a NextCursor of an earlier page.
	Cursor string
}

// ResourcePage is one page of the projection, ordered by (cloud,
// resource_type, resource_id).
type ResourcePage struct {
	Items []Resource `json:"items"`
	// NextCursor continues the listing; nil on the last page.
	NextCursor *string `json:"next_cursor"`
}

// ResourceDetail is one resource's row and the start of its event history
// (canonical-event.md, Event; the Reporting API's resource read).
type ResourceDetail struct {
	Resource Resource `json:"resource"`
	// Events are the resource's first stored events by (timestamp,
	// event_id), at most [MaxLimit] of them and at most [MaxPageBytes] of
	// item bytes (at least one), put in fold order ([Compare]); never nil.
	// When the history has more, a page boundary may fall between events
	// of equal timestamp.
	Events []event.Event `json:"events"`
	// EventsNextCursor is nil when Events is the whole history; otherwise
	// it is a cursor of [Service.Events] (GET /api/v1/events with this
	// resource's cloud, resource_type and resource_id and cursor) that
	// lists the rest.
	EventsNextCursor *string `json:"events_next_cursor"`
}

// Validate returns an [*event.ValidationError] listing every bad parameter
// of f (a text filter that is not valid UTF-8 or holds a NUL, /limit,
// /cursor), or nil. [Service.Resources] calls it; an HTTP adapter calls it
// to list these problems beside its own.
func (f ResourceFilter) Validate() error {
	var ps page.Params
	f.check(&ps)
	return ps.Err()
}

// check adds a problem to ps for each bad parameter of f, and returns the
// limit and the position after which to list.
func (f ResourceFilter) check(ps *page.Params) (limit int, after *ResourceKey) {
	for _, t := range [...]struct{ name, v string }{
		{"cloud", f.Cloud}, {"platform", f.Platform}, {"resource_type", f.ResourceType},
		{"project_id", f.ProjectID}, {"state", f.State},
	} {
		ps.Text(t.name, t.v)
	}
	switch f.Status {
	case "", StatusActive, StatusDeleted, StatusAll:
	default:
		*ps = append(*ps, event.Problem{Member: "/status", Rule: event.RuleEnum, Message: "must be active, deleted or all"})
	}
	limit = ps.Limit(f.Limit)
	if f.Cursor != "" {
		k, ok := decodeKeyCursor(f.Cursor)
		if !ok {
			ps.BadCursor()
		}
		after = &k
	}
	return limit, after
}

func encodeKeyCursor(k ResourceKey) string {
	b, err := json.Marshal([]string{"r1", k.Cloud, k.ResourceType, k.ResourceID})
	if err != nil {
		panic(err) // three strings always encode
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeKeyCursor(c string) (ResourceKey, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return ResourceKey{}, false
	}
	var parts []string
	if err := json.Unmarshal(b, &parts); err != nil || len(parts) != 4 || parts[0] != "r1" || !page.CursorText(parts[1:]...) {
		return ResourceKey{}, false
	}
	return ResourceKey{Cloud: parts[1], ResourceType: parts[2], ResourceID: parts[3]}, true
}

// Resources lists one page of the projection of current resources
// (canonical-event.md, Event: derived from the events and rebuildable).
// Items is never nil. It returns an [*event.ValidationError] listing every
// bad parameter (a filter that is not valid UTF-8 or holds a NUL, /limit,
// /cursor), or the store's error wrapped.
func (s *Service) Resources(ctx context.Context, f ResourceFilter) (ResourcePage, error) {
	var ps page.Params
	limit, after := f.check(&ps)
	if err := ps.Err(); err != nil {
		return ResourcePage{}, err
	}
	q := ResourceQuery{
		Cloud: f.Cloud, Platform: f.Platform, ResourceType: f.ResourceType,
		ProjectID: f.ProjectID, State: f.State, Status: f.Status, AliveAt: f.AliveAt, Limit: limit + 1, After: after, MaxBytes: MaxPageBytes,
	}
	items, err := s.store.Resources(ctx, q)
	if err != nil {
		return ResourcePage{}, fmt.Errorf("ingest: list resources: %w", err)
	}
	out := ResourcePage{}
	out.Items, out.NextCursor = page.Paginate(items, limit, ResourceBytes, func(r Resource) string { return encodeKeyCursor(r.ResourceKey) })
	return out, nil
}

// Resource returns one resource's row and its event history, or an error
// matching store.ErrNotFound when the projection has no such resource.
func (s *Service) Resource(ctx context.Context, k ResourceKey) (ResourceDetail, error) {
	if err := page.CheckText("cloud", k.Cloud, "resource_type", k.ResourceType, "resource_id", k.ResourceID); err != nil {
		return ResourceDetail{}, err
	}
	r, err := s.store.Resource(ctx, k)
	if err != nil {
		return ResourceDetail{}, fmt.Errorf("ingest: get resource: %w", err)
	}
	items, err := s.store.Events(ctx, EventQuery{
		Cloud: k.Cloud, ResourceType: k.ResourceType, ResourceID: k.ResourceID, Limit: MaxLimit + 1, MaxBytes: MaxPageBytes,
	})
	if err != nil {
		return ResourceDetail{}, fmt.Errorf("ingest: get resource history: %w", err)
	}
	hp, next := page.Paginate(items, MaxLimit, StoredEventBytes, storedEventCursor)
	h := make([]event.Event, len(hp))
	for i := range hp {
		h[i] = hp[i].Event
	}
	slices.SortStableFunc(h, func(a, b event.Event) int { return Compare(&a, &b) })
	return ResourceDetail{Resource: r, Events: h, EventsNextCursor: next}, nil
}

// RebuildResources recomputes the projection rows q selects from the stored
// events, in bounded transactions, calling progress after each (see
// [ProjectionStore.RebuildResources]); it returns how many resources it
// rebuilt. The result equals the incremental projection, and a rebuild is
// idempotent, so it is safe to run beside live ingestion and to repeat.
func (s *Service) RebuildResources(ctx context.Context, q RebuildQuery, progress func(done int)) (int, error) {
	if err := page.CheckText("cloud", q.Cloud, "resource_type", q.ResourceType); err != nil {
		return 0, err
	}
	n, err := s.store.RebuildResources(ctx, q, progress)
	if err != nil {
		return n, fmt.Errorf("ingest: rebuild resources: %w", err)
	}
	return n, nil
}

// CountResources counts the resources of the projection by (platform,
// cloud, resource_type, state), ordered by those four: a deleted resource
// keeps its row, in state "deleted". The server's gauge
// tally_current_resources is refreshed from it. Its cost is one aggregate
// read of the projection (one GROUP BY on PostgreSQL).
func (s *Service) CountResources(ctx context.Context) ([]ResourceCount, error) {
	counts, err := s.store.CountResources(ctx)
	if err != nil {
		return nil, fmt.Errorf("ingest: count resources: %w", err)
	}
	return counts, nil
}
