package projection

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/internal/page"
)

// Events reads the start of one resource's stored history for
// [Service.Get]; *ingest.Service is one.
type Events interface {
	// ResourceHistory returns the resource's first stored events by
	// (timestamp, event_id), at most ingest.MaxLimit of them and at most
	// ingest.MaxPageBytes of item bytes (at least one), and the cursor of
	// GET /api/v1/events that lists the rest; nil when they are the whole
	// history.
	ResourceHistory(ctx context.Context, k Key) ([]event.Event, *string, error)
}

// Service reads and rebuilds the projection. It is safe for concurrent use.
type Service struct {
	store  Store
	events Events
}

// New returns the Service over store, reading a resource's history through
// events. Both are required.
func New(store Store, events Events) (*Service, error) {
	var errs []error
	if store == nil {
		errs = append(errs, errors.New("projection: store is required"))
	}
	if events == nil {
		errs = append(errs, errors.New("projection: events is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Service{store: store, events: events}, nil
}

// Filter selects one page of the projection (GET /api/v1/resources).
// Empty strings and a zero AliveAt match everything.
type Filter struct {
	Cloud        string
	Platform     string
	ResourceType string
	ProjectID    string
	State        string
	// Status keeps active, deleted or all resources ([Status.Match]); ""
	// means all. Any other value is refused (/status, rule enum).
	Status Status
	// AliveAt keeps the resources alive at that instant (see
	// [Query.AliveAt]).
	AliveAt time.Time
	// Limit is 1..1000; 0 means 100.
	Limit int
	// Cursor is "" for the first page, else a NextCursor of an earlier page.
	Cursor string
}

// Page is one page of the projection, ordered by [Key].
type Page struct {
	Items []Resource `json:"items"`
	// NextCursor continues the listing; nil on the last page.
	NextCursor *string `json:"next_cursor"`
}

// Detail is one resource's row and the start of its event history
// (canonical-event.md, Event; the Reporting API's resource read).
type Detail struct {
	Resource Resource `json:"resource"`
	// Events are the resource's first stored events ([Events]), put in
	// fold order ([Compare]); never nil. When the history has more, a page
	// boundary may fall between events of equal timestamp.
	Events []event.Event `json:"events"`
	// EventsNextCursor is nil when Events is the whole history; otherwise
	// it is a cursor of GET /api/v1/events (with this resource's cloud,
	// resource_type and resource_id) that lists the rest.
	EventsNextCursor *string `json:"events_next_cursor"`
}

// Validate returns an [*event.ValidationError] listing every bad parameter
// of f (a text filter that is not valid UTF-8 or holds a NUL, /status,
// /limit, /cursor), or nil. [Service.List] calls it; an HTTP adapter calls
// it to list these problems beside its own.
func (f Filter) Validate() error {
	var ps page.Params
	f.check(&ps)
	return ps.Err()
}

// check adds a problem to ps for each bad parameter of f, and returns the
// limit and the position after which to list.
func (f Filter) check(ps *page.Params) (limit int, after *Key) {
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

func encodeKeyCursor(k Key) string {
	b, err := json.Marshal([]string{"r1", k.Cloud, k.ResourceType, k.ResourceID})
	if err != nil {
		panic(err) // three strings always encode
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeKeyCursor(c string) (Key, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return Key{}, false
	}
	var parts []string
	if err := json.Unmarshal(b, &parts); err != nil || len(parts) != 4 || parts[0] != "r1" || !page.CursorText(parts[1:]...) {
		return Key{}, false
	}
	return Key{Cloud: parts[1], ResourceType: parts[2], ResourceID: parts[3]}, true
}

// List returns one page of the projection. Items is never nil. It returns
// an [*event.ValidationError] listing every bad parameter ([Filter.Validate]),
// or the store's error wrapped.
func (s *Service) List(ctx context.Context, f Filter) (Page, error) {
	var ps page.Params
	limit, after := f.check(&ps)
	if err := ps.Err(); err != nil {
		return Page{}, err
	}
	q := Query{
		Cloud: f.Cloud, Platform: f.Platform, ResourceType: f.ResourceType, ProjectID: f.ProjectID,
		State: f.State, Status: f.Status, AliveAt: f.AliveAt, Limit: limit + 1, After: after, MaxBytes: page.MaxBytes,
	}
	items, err := s.store.List(ctx, q)
	if err != nil {
		return Page{}, fmt.Errorf("projection: list resources: %w", err)
	}
	out := Page{}
	out.Items, out.NextCursor = page.Paginate(items, limit, Resource.Bytes, func(r Resource) string { return encodeKeyCursor(r.Key) })
	return out, nil
}

// Get returns one resource's row and the start of its event history, or an
// error matching store.ErrNotFound when the projection has no such
// resource. A key that is not valid UTF-8 or holds a NUL is an
// [*event.ValidationError].
func (s *Service) Get(ctx context.Context, k Key) (Detail, error) {
	if err := page.CheckText("cloud", k.Cloud, "resource_type", k.ResourceType, "resource_id", k.ResourceID); err != nil {
		return Detail{}, err
	}
	r, err := s.store.Get(ctx, k)
	if err != nil {
		return Detail{}, fmt.Errorf("projection: get resource: %w", err)
	}
	h, next, err := s.events.ResourceHistory(ctx, k)
	if err != nil {
		return Detail{}, err // ResourceHistory's own error names what failed
	}
	if h == nil {
		h = []event.Event{}
	}
	slices.SortStableFunc(h, func(a, b event.Event) int { return Compare(&a, &b) })
	return Detail{Resource: r, Events: h, EventsNextCursor: next}, nil
}

// Rebuild recomputes the rows q selects from the stored events, in bounded
// transactions, calling progress after each ([Store.Rebuild]); it returns
// how many resources it rebuilt. The result equals the incremental
// projection and a rebuild is idempotent, so it is safe to run beside live
// ingestion and to repeat.
func (s *Service) Rebuild(ctx context.Context, q RebuildQuery, progress func(done int)) (int, error) {
	if err := page.CheckText("cloud", q.Cloud, "resource_type", q.ResourceType); err != nil {
		return 0, err
	}
	n, err := s.store.Rebuild(ctx, q, progress)
	if err != nil {
		return n, fmt.Errorf("projection: rebuild resources: %w", err)
	}
	return n, nil
}

// Count counts the rows by (platform, cloud, resource_type, state), ordered
// by those four: a deleted resource keeps its row, in state "deleted". The
// server's gauge tally_current_resources is refreshed from it; its cost is
// one aggregate read (one GROUP BY on PostgreSQL).
func (s *Service) Count(ctx context.Context) ([]Count, error) {
	counts, err := s.store.Count(ctx)
	if err != nil {
		return nil, fmt.Errorf("projection: count resources: %w", err)
	}
	return counts, nil
}
