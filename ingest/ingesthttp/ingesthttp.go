// Package ingesthttp is the HTTP adapter of the ingestion library
// (canonical-event.md, Delivery; issue 5, Routes): thin handlers that decode a
// request, call [ingest.Service], and encode the answer. No rule lives here.
//
// # Mounting
//
// A program builds a [Handler] with [New] and mounts it with
// [Handler.Register] on its own *http.ServeMux, passing a wrap function that
// authenticates the request and checks the route's role before the body is
// read:
//
//	h, err := ingesthttp.New(svc, ingesthttp.Options{CallerFrom: callerFrom, Logger: logger, MaxBodyBytes: maxBody})
//	h.Register(mux, func(role string, next http.Handler) http.Handler { return myAuth(role, next) })
//
// (cmd/tallyd/server mounts the exported handler methods one by one, with
// its own role table.)
//
// The routes, with the role each is registered under:
//
//	POST /api/v1/events                                     ingest
//	GET  /api/v1/rejected-events                            admin
//	GET  /api/v1/resource-types                             read
//	GET  /api/v1/resource-types/{platform}/{resource_type}  read
//	PUT  /api/v1/resource-types/{platform}/{resource_type}  admin
//	GET  /api/v1/audit                                      admin
//	GET  /api/v1/resources                                  read
//	GET  /api/v1/resources/{cloud}/{resource_type}/{resource_id}  read
//
// Every error is an RFC 9457 problem body ([github.com/tallyhq/tally/internal/problem]).
// An internal error is logged with the injected *slog.Logger and answered
// 500 with generic text.
package ingesthttp

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/internal/httpbody"
	"github.com/tallyhq/tally/internal/problem"
	"github.com/tallyhq/tally/store"
)

// DefaultMaxBodyBytes is the request body cap when [Options].MaxBodyBytes is
// 0: 8 MiB.
const DefaultMaxBodyBytes = 8 << 20

// The roles [Handler.Register] passes to its wrap function.
const (
	RoleIngest = "ingest"
	RoleRead   = "read"
	RoleAdmin  = "admin"
)

// Options configures a [Handler].
type Options struct {
	// CallerFrom returns the authenticated caller of a request to POST
	// /api/v1/events, as the server's authentication put it there; false
	// answers 401 with WWW-Authenticate: Bearer. Required. The handler
	// stores events under source collector whatever Caller.Source says.
	CallerFrom func(*http.Request) (ingest.Caller, bool)
	// Logger receives internal errors; nil discards them.
	Logger *slog.Logger
	// MaxBodyBytes caps a request body; 0 means DefaultMaxBodyBytes; it must
	// not be negative. A body over it is answered 413.
	MaxBodyBytes int64
}

// Handler serves the ingestion routes. It is safe for concurrent use.
type Handler struct {
	svc  *ingest.Service
	opts Options
	log  *slog.Logger
}

// New returns a Handler over svc. It returns an error (every problem joined)
// when svc or opts.CallerFrom is nil or opts.MaxBodyBytes is negative.
func New(svc *ingest.Service, opts Options) (*Handler, error) {
	var errs []error
	if svc == nil {
		errs = append(errs, errors.New("ingesthttp: a service is required"))
	}
	if opts.CallerFrom == nil {
		errs = append(errs, errors.New("ingesthttp: CallerFrom is required"))
	}
	if opts.MaxBodyBytes < 0 {
		errs = append(errs, fmt.Errorf("ingesthttp: MaxBodyBytes must not be negative, is %d", opts.MaxBodyBytes))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	h := &Handler{svc: svc, opts: opts, log: opts.Logger}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	return h, nil
}

// Register mounts every route on mux, each wrapped by wrap with its role
// (see the package documentation). wrap must authenticate before the body
// is read; pass a function returning h unchanged to mount them unguarded.
func (h *Handler) Register(mux *http.ServeMux, wrap func(role string, h http.Handler) http.Handler) {
	mux.Handle("POST /api/v1/events", wrap(RoleIngest, http.HandlerFunc(h.PostEvents)))
	mux.Handle("GET /api/v1/rejected-events", wrap(RoleAdmin, http.HandlerFunc(h.ListRejectedEvents)))
	mux.Handle("GET /api/v1/resource-types", wrap(RoleRead, http.HandlerFunc(h.ListResourceTypes)))
	mux.Handle("GET /api/v1/resource-types/{platform}/{resource_type}", wrap(RoleRead, http.HandlerFunc(h.GetResourceType)))
	mux.Handle("PUT /api/v1/resource-types/{platform}/{resource_type}", wrap(RoleAdmin, http.HandlerFunc(h.PutResourceType)))
	mux.Handle("GET /api/v1/audit", wrap(RoleAdmin, http.HandlerFunc(h.ListAudit)))
	mux.Handle("GET /api/v1/resources", wrap(RoleRead, http.HandlerFunc(h.ListResources)))
	mux.Handle("GET /api/v1/resources/{cloud}/{resource_type}/{resource_id}", wrap(RoleRead, http.HandlerFunc(h.GetResource)))
}

// PostEvents serves POST /api/v1/events (canonical-event.md, Delivery): the
// body is one event or an array of at most 1000 ([ingest.SplitBatch]). It
// answers 200 with the [ingest.Result] whatever the items did; 401 when
// CallerFrom finds no caller; 413 for more than 1000 items or a body over
// the cap (nothing stored); 400 for a body that is not JSON; 500 when the
// store fails (nothing stored).
func (h *Handler) PostEvents(w http.ResponseWriter, r *http.Request) {
	caller, ok := h.opts.CallerFrom(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", "Bearer")
		problem.Write(w, problem.New(http.StatusUnauthorized, "unauthorized", "Unauthorized", "a valid bearer token is required"))
		return
	}
	caller.Source = event.SourceCollector
	body, err := httpbody.Read(w, r, h.opts.MaxBodyBytes)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	items, err := ingest.SplitBatch(bytes.NewReader(body))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	res, err := h.svc.Ingest(r.Context(), caller, items)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// RejectedEvent is one item of GET /api/v1/rejected-events: a dead letter.
// Raw holds the item's bytes as a string when they are valid UTF-8
// (RawEncoding "utf-8"), else their standard base64 (RawEncoding
// "base64"); both are null when the item was larger than the kept cap,
// RawSize then telling its size in bytes.
type RejectedEvent struct {
	ID          int64     `json:"id"`
	Raw         *string   `json:"raw"`
	RawEncoding *string   `json:"raw_encoding"`
	RawSize     int       `json:"raw_size"`
	Reason      string    `json:"reason"`
	EventID     string    `json:"event_id"`
	ReceivedAt  time.Time `json:"received_at"`
}

type rejectedPage struct {
	Items      []RejectedEvent `json:"items"`
	NextCursor *string         `json:"next_cursor"`
}

func rejectedEvent(dl ingest.DeadLetter) RejectedEvent {
	out := RejectedEvent{ID: dl.ID, RawSize: dl.RawSize, Reason: dl.Reason, EventID: dl.EventID, ReceivedAt: dl.ReceivedAt}
	if dl.Raw != nil {
		raw, enc := string(dl.Raw), "utf-8"
		if !utf8.Valid(dl.Raw) {
			raw, enc = base64.StdEncoding.EncodeToString(dl.Raw), "base64"
		}
		out.Raw, out.RawEncoding = &raw, &enc
	}
	return out
}

// ListRejectedEvents serves GET /api/v1/rejected-events (canonical-event.md,
// Delivery): query parameters from and to (RFC 3339; the window on when an
// item was refused, [from, to)), limit (1..1000, default 100) and cursor
// (the next_cursor of an earlier page). It answers
// {"items":[RejectedEvent…],"next_cursor":null|"…"}, oldest first, or 400
// naming the malformed parameter.
func (h *Handler) ListRejectedEvents(w http.ResponseWriter, r *http.Request) {
	page, ok := parsePage(w, r)
	if !ok {
		return
	}
	p, err := h.svc.DeadLetters(r.Context(), page)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := rejectedPage{Items: make([]RejectedEvent, 0, len(p.Items)), NextCursor: p.NextCursor}
	for _, dl := range p.Items {
		out.Items = append(out.Items, rejectedEvent(dl))
	}
	writeJSON(w, http.StatusOK, out)
}

// ListAudit serves GET /api/v1/audit: query parameter action (every action
// when absent) and the paging of [Handler.ListRejectedEvents]. It answers
// {"items":[{"id","at","action","credential","event_id","platform","cloud"}…],"next_cursor":null|"…"}.
func (h *Handler) ListAudit(w http.ResponseWriter, r *http.Request) {
	page, ok := parsePage(w, r)
	if !ok {
		return
	}
	p, err := h.svc.Audit(r.Context(), r.URL.Query().Get("action"), page)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

type resourceTypeList struct {
	Items []ingest.ResourceType `json:"items"`
}

// ListResourceTypes serves GET /api/v1/resource-types (canonical-event.md,
// Size schemas): {"items":[{"platform","resource_type","size_schema","version","updated_at"}…]},
// ordered by platform then resource_type.
func (h *Handler) ListResourceTypes(w http.ResponseWriter, r *http.Request) {
	rts, err := h.svc.ResourceTypes(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, resourceTypeList{Items: rts})
}

// GetResourceType serves GET /api/v1/resource-types/{platform}/{resource_type}:
// the registry row {"platform","resource_type","size_schema","version","updated_at"},
// or 404.
func (h *Handler) GetResourceType(w http.ResponseWriter, r *http.Request) {
	rt, err := h.svc.ResourceType(r.Context(), r.PathValue("platform"), r.PathValue("resource_type"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rt)
}

// PutResourceType serves PUT /api/v1/resource-types/{platform}/{resource_type}:
// the body is the JSON Schema document itself (not wrapped), which becomes
// the pair's size schema exactly as sent. It answers 200 with the stored row
// (as GetResourceType), 400 with the compiler's message when the document
// does not compile, or 413 for a body over the cap.
func (h *Handler) PutResourceType(w http.ResponseWriter, r *http.Request) {
	body, err := httpbody.Read(w, r, h.opts.MaxBodyBytes)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	rt, err := h.svc.PutResourceType(r.Context(), r.PathValue("platform"), r.PathValue("resource_type"), jsontext.Value(body))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rt)
}

// ListResources serves GET /api/v1/resources, the projection of current
// resources (canonical-event.md, Event): query parameters cloud, platform,
// resource_type, project_id, state (each an exact match), alive_at (RFC
// 3339: the resources alive at that instant), limit (1..1000, default 100)
// and cursor. It answers {"items":[Resource…],"next_cursor":null|"…"},
// ordered by (cloud, resource_type, resource_id), or 400 naming the
// malformed parameter.
func (h *Handler) ListResources(w http.ResponseWriter, r *http.Request) {
	limit, cursor, ok := parseLimitCursor(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	f := ingest.ResourceFilter{
		Cloud: q.Get("cloud"), Platform: q.Get("platform"), ResourceType: q.Get("resource_type"),
		ProjectID: q.Get("project_id"), State: q.Get("state"), Limit: limit, Cursor: cursor,
	}
	if v := q.Get("alive_at"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			badParam(w, "alive_at", "must be an RFC 3339 date-time, such as 2026-03-01T12:00:00Z")
			return
		}
		f.AliveAt = t.UTC()
	}
	p, err := h.svc.Resources(r.Context(), f)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// GetResource serves GET /api/v1/resources/{cloud}/{resource_type}/{resource_id}:
// {"resource":Resource,"events":[Event…]} with the events in fold order, or
// 404 when the projection has no such resource.
func (h *Handler) GetResource(w http.ResponseWriter, r *http.Request) {
	d, err := h.svc.Resource(r.Context(), ingest.ResourceKey{
		Cloud: r.PathValue("cloud"), ResourceType: r.PathValue("resource_type"), ResourceID: r.PathValue("resource_id"),
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// parsePage reads from, to, limit and cursor, or answers 400 naming the
// first malformed parameter.
func parsePage(w http.ResponseWriter, r *http.Request) (ingest.Page, bool) {
	q := r.URL.Query()
	var p ingest.Page
	for _, f := range []struct {
		name string
		dst  *time.Time
	}{{"from", &p.From}, {"to", &p.To}} {
		if v := q.Get(f.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return badParam(w, f.name, "must be an RFC 3339 date-time, such as 2026-03-01T12:00:00Z")
			}
			*f.dst = t.UTC()
		}
	}
	limit, cursor, ok := parseLimitCursor(w, r)
	p.Limit, p.Cursor = limit, cursor
	return p, ok
}

// parseLimitCursor reads limit and cursor, or answers 400 naming the
// malformed one.
func parseLimitCursor(w http.ResponseWriter, r *http.Request) (limit int, cursor string, ok bool) {
	q := r.URL.Query()
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > ingest.MaxLimit {
			_, ok := badParam(w, "limit", fmt.Sprintf("must be an integer from 1 to %d", ingest.MaxLimit))
			return 0, "", ok
		}
		limit = n
	}
	cursor = q.Get("cursor")
	if _, has := q["cursor"]; has && cursor == "" {
		_, ok := badParam(w, "cursor", "must be the next_cursor of an earlier page")
		return 0, "", ok
	}
	return limit, cursor, true
}

// badParam answers 400 naming the parameter.
func badParam(w http.ResponseWriter, param, msg string) (ingest.Page, bool) {
	problem.Write(w, problem.New(http.StatusBadRequest, "invalid_parameter", "Invalid query parameter", param+": "+msg,
		problem.Member{Member: param, Message: msg}))
	return ingest.Page{}, false
}

// fail maps an error of the library to its answer; the one place that does.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	if httpbody.Answer(w, r, h.log, err) {
		return
	}
	var (
		schema *ingest.SchemaError
		param  *ingest.ParamError
	)
	switch {
	case errors.As(err, &param):
		problem.Write(w, problem.New(http.StatusBadRequest, "invalid_parameter", "Invalid parameter",
			param.Param+": "+param.Message, problem.Member{Member: param.Param, Rule: "utf8", Message: param.Message}))
	case errors.Is(err, ingest.ErrBatchTooLarge):
		problem.Write(w, problem.New(http.StatusRequestEntityTooLarge, "batch_too_large", "Batch too large",
			fmt.Sprintf("a batch holds at most %d events; nothing was stored", ingest.MaxBatch)))
	case errors.Is(err, ingest.ErrNotJSON):
		problem.Write(w, problem.New(http.StatusBadRequest, "invalid_body", "Body is not JSON",
			"the body must be one JSON object or an array of them"))
	case errors.Is(err, ingest.ErrBadCursor):
		problem.Write(w, problem.New(http.StatusBadRequest, "invalid_parameter", "Invalid query parameter",
			"cursor: must be the next_cursor of an earlier page", problem.Member{Member: "cursor", Message: "must be the next_cursor of an earlier page"}))
	case errors.Is(err, ingest.ErrBadLimit):
		msg := fmt.Sprintf("must be an integer from 1 to %d", ingest.MaxLimit)
		problem.Write(w, problem.New(http.StatusBadRequest, "invalid_parameter", "Invalid query parameter",
			"limit: "+msg, problem.Member{Member: "limit", Message: msg}))
	case errors.As(err, &schema):
		problem.Write(w, problem.New(http.StatusBadRequest, "invalid_size_schema", "Invalid size schema", schema.Message))
	case errors.Is(err, store.ErrNotFound):
		problem.Write(w, problem.New(http.StatusNotFound, "not_found", "Not found", "nothing is stored under "+r.URL.Path))
	case problem.Unavailable(err):
		h.log.WarnContext(r.Context(), "ingesthttp: store unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		problem.WriteUnavailable(w)
	default:
		h.log.ErrorContext(r.Context(), "ingesthttp: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		problem.Write(w, problem.New(http.StatusInternalServerError, "internal", "Internal error", "the request could not be completed; nothing was stored"))
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v, json.Deterministic(true))
	if err != nil {
		problem.Write(w, problem.New(http.StatusInternalServerError, "internal", "Internal error", "the answer could not be encoded"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
