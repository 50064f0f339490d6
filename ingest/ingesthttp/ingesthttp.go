// Package ingesthttp is the HTTP adapter of the ingestion library
// (canonical-event.md, Delivery; the reference server rules, Routes): thin handlers that decode a
// request, call [ingest.Service], and encode the answer. No rule lives here.
//
// # Mounting
//
// A program builds a [Handler] with [New] and mounts the routes that
// [Handler.Routes] returns, each with the roles that may call it, behind its
// own authentication (see [github.com/tallyhq/tally/route]):
//
//	h, err := ingesthttp.New(svc, proj, ingesthttp.Options{CallerFrom: callerFrom, Logger: logger})
//	route.Mount(mux, h.Routes(), func(rt route.Route) http.Handler { return myAuth(rt.Roles, rt.Handler) })
//
// cmd/tallyd/server mounts them so; its package documentation lists every
// route with its roles, checked against Routes by a test.
//
// Every error is an RFC 9457 problem body ([github.com/tallyhq/tally/internal/problem]);
// one function maps the library's errors to answers. An internal error is
// logged (key "err") and answered 500 with generic text; a client that went
// away gets no answer, logged at debug level.
package ingesthttp

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/ingest/reconcile"
	"github.com/tallyhq/tally/ingest/usage"
	"github.com/tallyhq/tally/internal/httpbody"
	"github.com/tallyhq/tally/internal/problem"
	"github.com/tallyhq/tally/internal/sse"
	"github.com/tallyhq/tally/route"
	"github.com/tallyhq/tally/store"
)

// Options configures a [Handler].
type Options struct {
	// CallerFrom returns the authenticated caller of a request to POST
	// /api/v1/events, as the server's authentication put it there; false
	// answers 401. Required. The handler stores events under source
	// collector whatever Caller.Source says.
	CallerFrom func(*http.Request) (ingest.Caller, bool)
	// Logger receives internal errors (key "err"); nil discards them, as
	// every Options.Logger of the module does.
	Logger *slog.Logger
	// MaxBodyBytes caps a request body; 0 means
	// [route.DefaultMaxBodyBytes] (8 MiB); it must not be negative. A body
	// over it is answered 413.
	MaxBodyBytes int64
	// Subscribers admits and counts the Server-Sent Events subscribers of
	// GET /api/v1/events/feed; nil admits every one and counts nothing.
	Subscribers route.Subscribers
	// Stream tunes those streams; the zero value takes internal/sse's
	// defaults (writes of at most 256 KiB, a reset when one takes the
	// client more than 10 s, a comment every 10 s).
	Stream StreamOptions
	// Usage, when not nil, serves the usage routes (GET /api/v1/usage, a
	// resource's /lifecycle, a project's /summary) and GET
	// /api/v1/resources?at=; nil leaves them out of [Handler.Routes] (and
	// answers at= 400).
	Usage *usage.Service
	// Reconcile, when not nil, serves POST /api/v1/clouds/{cloud}/sync and
	// GET /api/v1/sync-runs (package ingest/reconcile); nil leaves both
	// routes out of [Handler.Routes].
	Reconcile *reconcile.Service
	// ReconcilerFrom returns the authenticated caller of POST
	// /api/v1/clouds/{cloud}/sync with its (platform, cloud) scope; false
	// answers 401. Required with Reconcile.
	ReconcilerFrom func(*http.Request) (ingest.Caller, bool)
	// Admit, when not nil, is asked whether the n items of a POST
	// /api/v1/events body may be ingested now, once the body is split
	// into them; when it answers false it has written the answer (tallyd:
	// 429 rate_limited with Retry-After) and nothing is stored.
	Admit func(w http.ResponseWriter, r *http.Request, n int) bool
}

// StreamOptions tune a Server-Sent Events stream of a change feed.
type StreamOptions = sse.StreamOptions

// Handler serves the ingestion routes. It is safe for concurrent use.
type Handler struct {
	svc  *ingest.Service
	proj *projection.Service
	opts Options
	log  *slog.Logger
	// frames is the encoding of the feed's recent items, shared by its
	// subscribers.
	frames *sse.Cache
}

// New returns a Handler over svc and proj, the projection service over
// the same store (the /api/v1/resources routes). It returns an error (every
// problem joined) when svc, proj or opts.CallerFrom is nil or
// opts.MaxBodyBytes is negative, or when opts.Reconcile is set without
// opts.ReconcilerFrom.
func New(svc *ingest.Service, proj *projection.Service, opts Options) (*Handler, error) {
	var errs []error
	if svc == nil {
		errs = append(errs, errors.New("ingesthttp: a service is required"))
	}
	if proj == nil {
		errs = append(errs, errors.New("ingesthttp: a projection service is required"))
	}
	if opts.CallerFrom == nil {
		errs = append(errs, errors.New("ingesthttp: CallerFrom is required"))
	}
	if opts.MaxBodyBytes < 0 {
		errs = append(errs, fmt.Errorf("ingesthttp: MaxBodyBytes must not be negative, is %d", opts.MaxBodyBytes))
	}
	if opts.Reconcile != nil && opts.ReconcilerFrom == nil {
		errs = append(errs, errors.New("ingesthttp: ReconcilerFrom is required with Reconcile"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = route.DefaultMaxBodyBytes
	}
	h := &Handler{svc: svc, proj: proj, opts: opts, log: opts.Logger, frames: sse.NewCache(0, 0)}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	return h, nil
}

// Routes returns the ingestion routes with the roles that may call each:
// the one list of them (the one-API-shape rules, HTTP: one route table).
func (h *Handler) Routes() []route.Route {
	readers := []route.Role{route.RoleRead, route.RoleAdmin}
	admin := []route.Role{route.RoleAdmin}
	rs := []route.Route{
		{Method: http.MethodPost, Path: "/api/v1/events", Roles: []route.Role{route.RoleIngest}, Handler: h.handle(h.postEvents)},
		{Method: http.MethodGet, Path: "/api/v1/events", Roles: readers, Handler: h.handle(h.listEvents)},
		{Method: http.MethodGet, Path: "/api/v1/events/feed", Roles: readers, Handler: h.handle(h.followEvents)},
		{Method: http.MethodGet, Path: "/api/v1/rejected-events", Roles: admin, Handler: h.handle(h.listRejectedEvents)},
		{Method: http.MethodGet, Path: "/api/v1/audit", Roles: admin, Handler: h.handle(h.listAudit)},
		{Method: http.MethodGet, Path: "/api/v1/resource-types", Roles: readers, Handler: h.handle(h.listResourceTypes)},
		{Method: http.MethodGet, Path: "/api/v1/resource-types/{platform}/{resource_type}", Roles: readers, Handler: h.handle(h.getResourceType)},
		{Method: http.MethodPut, Path: "/api/v1/resource-types/{platform}/{resource_type}", Roles: admin, Handler: h.handle(h.putResourceType)},
		{Method: http.MethodGet, Path: "/api/v1/resources", Roles: readers, Handler: h.handle(h.listResources)},
		{Method: http.MethodGet, Path: "/api/v1/resources/{cloud}/{resource_type}/{resource_id}", Roles: readers, Handler: h.handle(h.getResource)},
		{Method: http.MethodGet, Path: "/api/v1/resources/{cloud}/{resource_type}/{resource_id}/events", Roles: readers, Handler: h.handle(h.getResourceEvents)},
	}
	if h.opts.Usage != nil {
		rs = append(rs,
			route.Route{Method: http.MethodGet, Path: "/api/v1/resources/{cloud}/{resource_type}/{resource_id}/lifecycle", Roles: readers, Handler: h.handle(h.getLifecycle)},
			route.Route{Method: http.MethodGet, Path: "/api/v1/projects/{cloud}/{project_id}/summary", Roles: readers, Handler: h.handle(h.getSummary)},
			route.Route{Method: http.MethodGet, Path: "/api/v1/usage", Roles: readers, Handler: h.handle(h.getUsage)},
		)
	}
	if h.opts.Reconcile != nil {
		rs = append(rs,
			route.Route{Method: http.MethodPost, Path: "/api/v1/clouds/{cloud}/sync", Roles: []route.Role{route.RoleReconcile}, Handler: h.handle(h.postSync)},
			route.Route{Method: http.MethodGet, Path: "/api/v1/sync-runs", Roles: readers, Handler: h.handle(h.listSyncRuns)},
		)
	}
	return rs
}

// eventParams are the query parameters of GET /api/v1/events: the
// Reporting API's filters and paging.
var eventParams = []string{"cloud", "platform", "project_id", "resource_type", "resource_id", "event_type", "source", "from", "to", "limit", "cursor"}

// resourceParams are the query parameters of GET /api/v1/resources.
var resourceParams = []string{"cloud", "platform", "resource_type", "project_id", "state", "status", "alive_at", "at", "limit", "cursor"}

// pageParams are the query parameters of GET /api/v1/rejected-events, and
// with action those of GET /api/v1/audit.
var (
	pageParams  = []string{"from", "to", "limit", "cursor"}
	auditParams = append(slices.Clip(pageParams), "action")
)

// handle adapts the handler shape of this package (and of correlatehttp):
// a function that writes its answer or returns the error that Handler.fail
// maps. Each function checks its own query parameters, so that an unknown
// one is refused 400 naming it (the existing-clients rules: nothing is silently ignored) in
// the same answer as every other bad parameter of the request (the one-API-shape rules:
// one error lists every problem): params.err with the route's parameter
// names on a route that takes parameters, noParams on one that takes none.
func (h *Handler) handle(fn func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A query string that does not parse is refused before anything
		// reads it: net/url would drop every parameter.
		if ps := problem.ParseQuery(r); ps != nil {
			problem.Write(w, problem.InvalidParameter(ps...))
			return
		}
		if err := fn(w, r); err != nil {
			h.fail(w, r, err)
		}
	})
}

// noParams refuses any query parameter on a route that takes none.
func noParams(r *http.Request) error {
	var ps params
	return ps.err(nil, r)
}

func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return httpbody.Read(w, r, h.opts.MaxBodyBytes)
}

// postEvents serves POST /api/v1/events (canonical-event.md, Delivery): the
// body is one event or an array of at most 1000 ([ingest.SplitBatch]). It
// answers 200 with the [ingest.Result] whatever the items did; 401 when
// CallerFrom finds no caller; 413 for more than 1000 items or a body over
// the cap (nothing stored); 400 for a body that is not JSON; Admit's answer
// when it refuses the items (nothing stored); 500 when the store fails
// (nothing stored).
func (h *Handler) postEvents(w http.ResponseWriter, r *http.Request) error {
	if err := noParams(r); err != nil {
		return err
	}
	caller, ok := h.opts.CallerFrom(r)
	if !ok {
		return problem.ErrNoCaller
	}
	caller.Source = event.SourceCollector
	body, err := h.readBody(w, r)
	if err != nil {
		return err
	}
	items, err := ingest.SplitBatch(body)
	// The items are copies: nothing holds the body any more, and the next
	// request's body reuses its memory.
	httpbody.Recycle(body)
	if err != nil {
		return err
	}
	if h.opts.Admit != nil && !h.opts.Admit(w, r, len(items)) {
		return nil
	}
	res, err := h.svc.Ingest(r.Context(), caller, items)
	if err != nil {
		return err
	}
	problem.WriteJSON(w, http.StatusOK, res)
	return nil
}

// RejectedEvent is one item of GET /api/v1/rejected-events: a dead letter,
// in the shape of Tally's dead letters. ID is the dead letter's UUID
// ([ingest.DeadLetter].UUID). The item's bytes, when kept, are in exactly
// one of three members, the others null: Raw, the item as the JSON value
// it is when its bytes are one valid JSON value (RFC 8259 and RFC 7493: no
// member twice) nested at most [event.MaxDepth] deep, written byte for
// byte as received; else RawText, the
// bytes as a string when they are valid UTF-8; else RawBytes, their
// standard base64. All three are null when the item was larger than the
// kept cap; RawSize tells its size in bytes.
type RejectedEvent struct {
	ID         string         `json:"id"`
	Raw        jsontext.Value `json:"raw"`
	RawText    *string        `json:"raw_text"`
	RawBytes   *string        `json:"raw_bytes"`
	RawSize    int            `json:"raw_size"`
	Reason     string         `json:"reason"`
	EventID    string         `json:"event_id"`
	ReceivedAt time.Time      `json:"received_at"`
}

// RejectedPage is one page of GET /api/v1/rejected-events.
type RejectedPage struct {
	Items      []RejectedEvent `json:"items"`
	NextCursor *string         `json:"next_cursor"`
}

func rejectedEvent(dl ingest.DeadLetter) RejectedEvent {
	out := RejectedEvent{ID: dl.UUID, Raw: jsontext.Value("null"), RawSize: dl.RawSize, Reason: dl.Reason, EventID: dl.EventID, ReceivedAt: dl.ReceivedAt}
	switch raw := dl.Raw; {
	case raw == nil:
	case jsontext.Value(raw).IsValid() && event.Depth(raw) <= event.MaxDepth:
		// Deeper, the page would cross every decoder's depth limit.
		out.Raw = jsontext.Value(raw)
	case utf8.Valid(raw):
		text := string(raw)
		out.RawText = &text
	default:
		b64 := base64.StdEncoding.EncodeToString(raw)
		out.RawBytes = &b64
	}
	return out
}

// listRejectedEvents serves GET /api/v1/rejected-events (canonical-event.md,
// Delivery): query parameters from and to (RFC 3339; the window on when an
// item was refused, [from, to)), limit (1..1000, default 100) and cursor
// (the next_cursor of an earlier page). It answers
// {"items":[RejectedEvent…],"next_cursor":null|"…"}, oldest first, or 400
// naming the malformed parameters.
func (h *Handler) listRejectedEvents(w http.ResponseWriter, r *http.Request) error {
	page, err := parsePage(r, pageParams)
	if err != nil {
		return err
	}
	p, err := h.svc.DeadLetters(r.Context(), page)
	if err != nil {
		return err
	}
	out := RejectedPage{Items: make([]RejectedEvent, 0, len(p.Items)), NextCursor: p.NextCursor}
	for _, dl := range p.Items {
		out.Items = append(out.Items, rejectedEvent(dl))
	}
	problem.WriteJSON(w, http.StatusOK, out)
	return nil
}

// listAudit serves GET /api/v1/audit: query parameter action (every action
// when absent) and the paging of listRejectedEvents. It answers
// {"items":[{"id","at","action","credential","event_id","platform","cloud"}…],"next_cursor":null|"…"}.
func (h *Handler) listAudit(w http.ResponseWriter, r *http.Request) error {
	page, err := parsePage(r, auditParams)
	if err != nil {
		return err
	}
	p, err := h.svc.Audit(r.Context(), r.URL.Query().Get("action"), page)
	if err != nil {
		return err
	}
	problem.WriteJSON(w, http.StatusOK, p)
	return nil
}

type resourceTypeList struct {
	Items []ingest.ResourceType `json:"items"`
}

// listResourceTypes serves GET /api/v1/resource-types (canonical-event.md,
// Size schemas): {"items":[{"platform","resource_type","size_schema","version","updated_at"}…]},
// ordered by platform then resource_type.
func (h *Handler) listResourceTypes(w http.ResponseWriter, r *http.Request) error {
	if err := noParams(r); err != nil {
		return err
	}
	rts, err := h.svc.ResourceTypes(r.Context())
	if err != nil {
		return err
	}
	problem.WriteJSON(w, http.StatusOK, resourceTypeList{Items: rts})
	return nil
}

// getResourceType serves GET /api/v1/resource-types/{platform}/{resource_type}:
// the registry row {"platform","resource_type","size_schema","version","updated_at"},
// or 404.
func (h *Handler) getResourceType(w http.ResponseWriter, r *http.Request) error {
	if err := noParams(r); err != nil {
		return err
	}
	rt, err := h.svc.ResourceType(r.Context(), r.PathValue("platform"), r.PathValue("resource_type"))
	if err != nil {
		return err
	}
	problem.WriteJSON(w, http.StatusOK, rt)
	return nil
}

// putResourceType serves PUT /api/v1/resource-types/{platform}/{resource_type}:
// the body is {"size_schema": <JSON Schema>}, the Reporting API's
// RegisterResourceType, or the bare JSON Schema document; the schema becomes
// the pair's size schema exactly as sent ([ingest.Service.PutResourceType]
// tells the two apart: a top-level member size_schema makes the wrapper).
// It answers 200 with the stored row (as getResourceType), 400
// invalid_size_schema listing every problem under errors (each keyword by
// its JSON Pointer into the body, /size_schema/… for the wrapper) when the
// document does not compile or the wrapper holds another member, or 413 for
// a body over the cap.
func (h *Handler) putResourceType(w http.ResponseWriter, r *http.Request) error {
	if err := noParams(r); err != nil {
		return err
	}
	body, err := h.readBody(w, r)
	if err != nil {
		return err
	}
	rt, err := h.svc.PutResourceType(r.Context(), r.PathValue("platform"), r.PathValue("resource_type"), body)
	var ve *event.ValidationError
	if errors.As(err, &ve) {
		return &sizeSchemaError{ve}
	}
	if err != nil {
		return err
	}
	problem.WriteJSON(w, http.StatusOK, rt)
	return nil
}

// sizeSchemaError is a refused PUT of a size schema, answered 400
// invalid_size_schema rather than invalid_parameter.
type sizeSchemaError struct{ *event.ValidationError }

func (e *sizeSchemaError) Unwrap() error { return e.ValidationError }

// listResources serves GET /api/v1/resources, the projection of current
// resources (canonical-event.md, Event): query parameters cloud, platform,
// resource_type, project_id, state (each an exact match), status (active:
// state not deleted, the default as in the Reporting API; deleted; all),
// alive_at (RFC
// 3339: the resources alive at that instant), limit (1..1000, default 100)
// and cursor. It answers {"items":[Resource…],"next_cursor":null|"…"},
// ordered by (cloud, resource_type, resource_id), or 400 naming the
// malformed parameters.
func (h *Handler) listResources(w http.ResponseWriter, r *http.Request) error {
	var ps params
	limit, cursor := ps.limitCursor(r)
	q := r.URL.Query()
	f := projection.Filter{
		Cloud: q.Get("cloud"), Platform: q.Get("platform"), ResourceType: q.Get("resource_type"),
		ProjectID: q.Get("project_id"), State: q.Get("state"), Status: projection.Status(q.Get("status")), Limit: limit, Cursor: cursor,
		AliveAt: ps.time(r, "alive_at"),
	}
	switch v, has := q["status"]; {
	case !has:
		f.Status = projection.StatusActive
	case v[0] == "":
		ps.add("status", event.RuleEnum, "must be active, deleted or all")
	}
	if _, has := q["at"]; has {
		if h.opts.Usage == nil {
			ps.add("at", event.RuleEnum, "this server does not serve resources at an instant")
		} else {
			return h.listResourcesAt(w, r, f, ps)
		}
	}
	if err := ps.err(f.Validate(), r, resourceParams...); err != nil {
		return err
	}
	p, err := h.proj.List(r.Context(), f)
	if err != nil {
		return err
	}
	problem.WriteJSON(w, http.StatusOK, p)
	return nil
}

// getResource serves GET /api/v1/resources/{cloud}/{resource_type}/{resource_id}:
// {"resource":Resource,"events":[Event…],"events_next_cursor":null|"…"}
// with the first events (at most ingest.MaxLimit and ingest.MaxPageBytes)
// in fold order, events_next_cursor continuing them with GET
// /api/v1/events filtered on the resource ([projection.Detail]), or 404
// when the projection has no such resource.
func (h *Handler) getResource(w http.ResponseWriter, r *http.Request) error {
	if err := noParams(r); err != nil {
		return err
	}
	d, err := h.proj.Get(r.Context(), projection.Key{
		Cloud: r.PathValue("cloud"), ResourceType: r.PathValue("resource_type"), ResourceID: r.PathValue("resource_id"),
	})
	if err != nil {
		return err
	}
	problem.WriteJSON(w, http.StatusOK, d)
	return nil
}

// listEvents serves GET /api/v1/events (Tally's Reporting API listEvents):
// query parameters cloud, platform, project_id, resource_type, resource_id,
// event_type, source (each an exact match), from and to (RFC 3339, the
// window [from, to) on the event timestamp), limit (1..1000, default 100)
// and cursor. It answers {"items":[StoredEvent…],"next_cursor":null|"…"},
// ordered by (timestamp, event_id), each item the stored event with its
// received_at, or 400 naming the malformed parameters.
func (h *Handler) listEvents(w http.ResponseWriter, r *http.Request) error {
	var ps params
	limit, cursor := ps.limitCursor(r)
	q := r.URL.Query()
	f := ingest.EventFilter{
		Cloud: q.Get("cloud"), Platform: q.Get("platform"), ProjectID: q.Get("project_id"),
		ResourceType: q.Get("resource_type"), ResourceID: q.Get("resource_id"), EventType: q.Get("event_type"),
		Source: event.Source(q.Get("source")), From: ps.time(r, "from"), To: ps.time(r, "to"),
		Limit: limit, Cursor: cursor,
	}
	if err := ps.err(f.Validate(), r, eventParams...); err != nil {
		return err
	}
	p, err := h.svc.Events(r.Context(), f)
	if err != nil {
		return err
	}
	problem.WriteJSON(w, http.StatusOK, p)
	return nil
}

// feedParams are the query parameters of GET /api/v1/events/feed.
var feedParams = []string{"after", "limit", "wait", "cloud", "platform", "resource_type", "project_id", "event_type"}

// followEvents serves GET /api/v1/events/feed: one read of the lifecycle
// feed as JSON ([ingest.FeedPage]), or, for a request that accepts
// text/event-stream, the feed as Server-Sent Events from after (or the
// Last-Event-ID header, which wins) on, each item "event: event" with the
// FeedItem as data.
func (h *Handler) followEvents(w http.ResponseWriter, r *http.Request) error {
	var ps params
	limit, _ := ps.limitCursor(r)
	q := r.URL.Query()
	fq := ingest.FeedQuery{
		After: q.Get("after"), Limit: limit, Wait: ps.seconds(r, "wait", ingest.MaxFeedWait),
		FeedFilter: ingest.FeedFilter{
			Cloud: q.Get("cloud"), Platform: q.Get("platform"), ResourceType: q.Get("resource_type"),
			ProjectID: q.Get("project_id"), EventType: q.Get("event_type"),
		},
	}
	stream := sse.AcceptsEventStream(r)
	if id := r.Header.Get("Last-Event-ID"); stream && id != "" {
		fq.After = id
	}
	if err := ps.err(fq.Validate(), r, feedParams...); err != nil {
		return err
	}
	if !stream {
		p, err := h.svc.Feed(r.Context(), fq)
		if err != nil {
			return err
		}
		problem.WriteJSON(w, http.StatusOK, p)
		return nil
	}
	// The first read answers a bad cursor with 400 before the stream starts.
	first := fq
	first.Wait = 0
	p, err := h.svc.Feed(r.Context(), first)
	if err != nil {
		return err
	}
	frames, err := h.feedFrames(p)
	if err != nil {
		return err
	}
	// A stream's reads are no pages its client sees: without a limit, the
	// largest catches a subscriber up in fewer reads and writes.
	streamLimit := fq.Limit
	if !q.Has("limit") {
		streamLimit = ingest.MaxLimit
	}
	read := func(ctx context.Context, after string, wait time.Duration) ([]sse.Frame, string, error) {
		next := fq
		next.After, next.Wait = after, wait
		next.Limit = streamLimit
		p, err := h.svc.Feed(ctx, next)
		if err != nil {
			return nil, after, err
		}
		frames, err := h.feedFrames(p)
		return frames, p.NextCursor, err
	}
	return sse.ServeHTTP(w, r, h.opts.Subscribers, "lifecycle", fq.After, frames, p.NextCursor, read, h.opts.Stream)
}

// feedFrames are the SSE frames of a feed page, each encoded once for
// every subscriber (an item's position names one stored event).
func (h *Handler) feedFrames(p ingest.FeedPage) ([]sse.Frame, error) {
	frames := make([]sse.Frame, len(p.Items))
	for i, it := range p.Items {
		fr, err := h.frames.Frame(it.Position, "event", it.MarshalJSON)
		if err != nil {
			return nil, err
		}
		frames[i] = fr
	}
	return frames, nil
}

type historyPage struct {
	Items      []ingest.StoredEvent `json:"items"`
	NextCursor *string              `json:"next_cursor"`
}

// getResourceEvents serves GET
// /api/v1/resources/{cloud}/{resource_type}/{resource_id}/events (Tally's
// Reporting API): {"items":[StoredEvent…],"next_cursor":null|"…"}, the
// history ordered by (timestamp, event_id), each event with its
// received_at; 404 when the projection has no such resource; 422
// history_too_long past ingest.MaxHistory events. A history over
// ingest.MaxPageBytes of item bytes is cut there, next_cursor then being a
// cursor of GET /api/v1/events filtered on the resource.
func (h *Handler) getResourceEvents(w http.ResponseWriter, r *http.Request) error {
	if err := noParams(r); err != nil {
		return err
	}
	k := projection.Key{Cloud: r.PathValue("cloud"), ResourceType: r.PathValue("resource_type"), ResourceID: r.PathValue("resource_id")}
	if _, err := h.proj.Get(r.Context(), k); err != nil {
		return err
	}
	p, err := h.svc.ResourceEvents(r.Context(), k)
	if err != nil {
		return err
	}
	problem.WriteJSON(w, http.StatusOK, historyPage{Items: p.Items, NextCursor: p.NextCursor})
	return nil
}

// params collects the problems of a request's query parameters, so that
// one answer lists them all: the adapter's own (a malformed time or
// integer) and the library's judgement of the rest. A problem's member is
// "/" + the parameter's name.
type params []event.Problem

// err returns the adapter's problems followed by those of lib (the
// library's Validate of the same parameters: an *event.ValidationError or
// nil) and one problem for each query parameter of r outside known
// ([problem.UnknownParameters]) and for each known one given more than
// once ([problem.RepeatedParameters]) as one *event.ValidationError, or nil when
// there are none.
func (ps params) err(lib error, r *http.Request, known ...string) error {
	var ve *event.ValidationError
	if errors.As(lib, &ve) {
		ps = append(ps, ve.Problems...)
	}
	ps = append(ps, problem.UnknownParameters(r.URL.Query(), known)...)
	// Every parameter of these routes takes one value.
	ps = append(ps, problem.RepeatedParameters(r.URL.Query(), known)...)
	if len(ps) == 0 {
		return nil
	}
	return &event.ValidationError{Problems: ps}
}

func (ps *params) add(name, rule, msg string) {
	*ps = append(*ps, event.Problem{Member: "/" + name, Rule: rule, Message: msg})
}

// seconds reads a parameter of whole seconds from 0 to max; zero when
// absent.
func (ps *params) seconds(r *http.Request, name string, max time.Duration) time.Duration {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	msg := fmt.Sprintf("must be an integer from 0 to %d (seconds)", int(max/time.Second))
	switch {
	case err != nil:
		ps.add(name, event.RuleType, msg)
	case n < 0:
		ps.add(name, event.RuleMinimum, msg)
	case time.Duration(n) > max/time.Second:
		ps.add(name, event.RuleMaximum, msg)
	default:
		return time.Duration(n) * time.Second
	}
	return 0
}

// time reads an RFC 3339 parameter, in UTC; zero when absent.
func (ps *params) time(r *http.Request, name string) time.Time {
	v := r.URL.Query().Get(name)
	if v == "" {
		return time.Time{}
	}
	t, err := event.ParseTime(v)
	if err != nil {
		ps.add(name, event.RuleFormat, event.TimeMessage(err))
		return time.Time{}
	}
	return t
}

// limitCursor reads limit and cursor; the library judges their range and
// form ([ingest.Page.Validate], [projection.Filter.Validate]).
func (ps *params) limitCursor(r *http.Request) (limit int, cursor string) {
	q := r.URL.Query()
	msg := fmt.Sprintf("must be an integer from 1 to %d", ingest.MaxLimit)
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil:
			ps.add("limit", event.RuleType, msg)
		case n == 0:
			// The library reads 0 as "the default"; a client that asks for
			// an empty page gets told.
			ps.add("limit", event.RuleMinimum, msg)
		default:
			limit = n
		}
	}
	cursor = q.Get("cursor")
	if _, has := q["cursor"]; has && cursor == "" {
		ps.add("cursor", event.RuleFormat, "must be the next_cursor of an earlier page")
	}
	return limit, cursor
}

// parsePage reads from, to, limit and cursor, and refuses a parameter
// outside known.
func parsePage(r *http.Request, known []string) (ingest.Page, error) {
	var ps params
	p := ingest.Page{From: ps.time(r, "from"), To: ps.time(r, "to")}
	p.Limit, p.Cursor = ps.limitCursor(r)
	return p, ps.err(p.Validate(), r, known...)
}

// fail maps an error of the library to its answer; the one place that
// does. The cases every handler shares (a client gone, a refused body, no
// caller, the store unavailable, anything else) are [problem.Fail]'s; only
// ingestion's own are here.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	problem.Fail(w, r, h.log, "ingesthttp", err, func(err error) (problem.Details, bool) {
		var (
			schema  *sizeSchemaError
			obs     *observationError
			invalid *event.ValidationError
		)
		switch {
		case errors.As(err, &obs):
			return problem.New(problem.CodeInvalidBody,
				"The observation breaks the rules listed in errors; nothing was changed.", obs.Problems...), true
		case errors.As(err, &schema):
			return problem.New(problem.CodeInvalidSizeSchema,
				"The size schema breaks the rules listed in errors; nothing was stored.", schema.Problems...), true
		case errors.As(err, &invalid):
			return problem.InvalidParameter(invalid.Problems...), true
		case errors.Is(err, ingest.ErrSyncTooLarge):
			return problem.New(problem.CodeBatchTooLarge,
				fmt.Sprintf("The run's drift is more than %d events; nothing was changed. Reconcile the cloud's resource types in separate runs.", ingest.MaxSyncBatch)), true
		case errors.Is(err, ingest.ErrBatchTooLarge):
			return problem.New(problem.CodeBatchTooLarge,
				fmt.Sprintf("A batch holds at most %d events; nothing was stored.", ingest.MaxBatch)), true
		case errors.Is(err, ingest.ErrTooManyMonths):
			// The store's detail follows its "/timestamp: " (pgstore's
			// months and bound).
			_, detail, _ := strings.Cut(err.Error(), "/timestamp: ")
			return problem.New(problem.CodeInvalidBody, "The batch's events fall in more months than one batch may add; nothing was stored.",
				event.Problem{Member: "/timestamp", Rule: event.RuleMaximum, Message: detail}), true
		case errors.Is(err, ingest.ErrHistoryTooLong):
			return problem.New(problem.CodeHistoryTooLong,
				fmt.Sprintf("The resource has more than %d stored events; page them with GET /api/v1/events.", ingest.MaxHistory)), true
		case errors.Is(err, usage.ErrResultTooLarge):
			return usageProblem(err)
		case errors.Is(err, ingest.ErrNotJSON):
			return problem.New(problem.CodeInvalidBody, "The body must be one JSON object or an array of them."), true
		case errors.Is(err, store.ErrNotFound):
			return problem.NotFound("Nothing is stored under " + r.URL.Path + "."), true
		}
		return problem.Details{}, false
	})
}
