// Package correlatehttp serves the correlated events of
// [github.com/tallyhq/tally/correlate] over HTTP, as Meshery's events API
// has them (event-correlation.md); [Handler.Routes] lists the routes with
// the roles that may call each (createEvent, getEvents, marking an event
// read or unread, soft delete, and, with Options.Feed, the change feed by
// long poll and as Server-Sent Events).
//
// The adapter is thin, and built as ingest/ingesthttp is: [New] over the
// [correlate.Service], routes as data that the server mounts behind its own
// authentication (see [github.com/tallyhq/tally/route]), handlers that
// decode, call the service and encode, and one function that maps errors
// to RFC 9457 problem details. Every rule (the state machine, the status
// code of a create, validation, who reads what) lives in package
// correlate, and so does the counting of dispositions
// ([correlate.Options].Observer). An internal error is logged (key "err")
// and the client gets generic text; a client that went away gets no
// answer (its connection is closed, never an implicit 200), logged at
// debug level.
//
// CORS is the server's job: a server answering browsers on another origin
// lists Event-Disposition in Access-Control-Expose-Headers.
package correlatehttp

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/internal/httpbody"
	"github.com/tallyhq/tally/internal/problem"
	"github.com/tallyhq/tally/internal/sse"
	"github.com/tallyhq/tally/route"
	"github.com/tallyhq/tally/store"
)

// DispositionHeader is the response header that carries the
// [correlate.Disposition] of every 2xx answer of createEvent.
const DispositionHeader = "Event-Disposition"

// IdempotencyKeyHeader is the request header (IETF
// draft-ietf-httpapi-idempotency-key-header) accepted as the create's
// idempotencyKey.
const IdempotencyKeyHeader = "Idempotency-Key"

// Options configures a [Handler].
type Options struct {
	// CallerFrom returns the authenticated caller of a request, as the
	// server's authentication put it there; false answers 401. Required.
	// Its Caller.AllUsers decides whether getEvents lists the whole
	// organization (a reader) or the caller's own (organization, user).
	CallerFrom func(*http.Request) (correlate.Caller, bool)
	// Logger receives internal errors (key "err"); nil discards them, as
	// every Options.Logger of the module does.
	Logger *slog.Logger
	// MaxBodyBytes caps a request body; 0 means
	// [route.DefaultMaxBodyBytes] (8 MiB); it must not be negative. A body
	// over it is answered 413.
	MaxBodyBytes int64
	// Subscribers admits and counts the Server-Sent Events subscribers of
	// GET /api/events/subscribe; nil admits every one and counts nothing.
	Subscribers route.Subscribers
	// Stream tunes those streams; the zero value takes internal/sse's
	// defaults (writes of at most 256 KiB, a reset when one takes the
	// client more than 10 s, a comment every 10 s).
	Stream StreamOptions
}

// StreamOptions tune a Server-Sent Events stream of a change feed.
type StreamOptions = sse.StreamOptions

// Handler serves the events API. It is safe for concurrent use.
type Handler struct {
	svc  *correlate.Service
	opts Options
	log  *slog.Logger
	// frames is the encoding of the feed's recent changes, shared by its
	// subscribers.
	frames *sse.Cache
}

// New returns a Handler over svc. It returns an error (every problem joined)
// when svc or opts.CallerFrom is nil or opts.MaxBodyBytes is negative.
func New(svc *correlate.Service, opts Options) (*Handler, error) {
	var errs []error
	if svc == nil {
		errs = append(errs, errors.New("correlatehttp: a service is required"))
	}
	if opts.CallerFrom == nil {
		errs = append(errs, errors.New("correlatehttp: CallerFrom is required"))
	}
	if opts.MaxBodyBytes < 0 {
		errs = append(errs, fmt.Errorf("correlatehttp: MaxBodyBytes must not be negative, is %d", opts.MaxBodyBytes))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = route.DefaultMaxBodyBytes
	}
	h := &Handler{svc: svc, opts: opts, log: opts.Logger, frames: sse.NewCache(0, 0)}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	return h, nil
}

// Routes returns the events API with the roles that may call each route:
// the one list of them (the one-API-shape rules, HTTP: one route table). getEvents admits
// an events caller (its own events) and a reader of the organization (all
// of its events; docs/decisions.md, Who reads correlated events), and so do
// the feed routes (GET /api/events/feed and /api/events/subscribe), the
// summary (GET /api/events/summary) and the aggregate (GET /api/events).
func (h *Handler) Routes() []route.Route {
	events := []route.Role{route.RoleEvents}
	rs := []route.Route{
		{Method: http.MethodPost, Path: "/api/events", Roles: events, Handler: h.handle(h.create)},
		{Method: http.MethodGet, Path: "/api/events/list", Roles: []route.Role{route.RoleEvents, route.RoleRead}, Handler: h.handle(h.list)},
		{Method: http.MethodPut, Path: "/api/events/{id}/status", Roles: events, Handler: h.handle(h.setStatus)},
		{Method: http.MethodDelete, Path: "/api/events/{id}", Roles: events, Handler: h.handle(h.delete)},
		{Method: http.MethodPut, Path: "/api/events/status", Roles: events, Handler: h.handle(h.setStatuses)},
		{Method: http.MethodPost, Path: "/api/events/delete", Roles: events, Handler: h.handle(h.deleteMany)},
		// Meshery Server's remote provider bulk-deletes with DELETE /api/events.
		{Method: http.MethodDelete, Path: "/api/events", Roles: events, Handler: h.handle(h.deleteMany)},
		{Method: http.MethodGet, Path: "/api/events/types", Roles: []route.Role{route.RoleEvents, route.RoleRead}, Handler: h.handle(h.types)},
		{Method: http.MethodGet, Path: "/api/events/summary", Roles: []route.Role{route.RoleEvents, route.RoleRead}, Handler: h.handle(h.summary)},
		{Method: http.MethodGet, Path: "/api/events", Roles: []route.Role{route.RoleEvents, route.RoleRead}, Handler: h.handle(h.aggregate)},
		{Method: http.MethodGet, Path: "/api/events/feed", Roles: []route.Role{route.RoleEvents, route.RoleRead}, Handler: h.handle(h.feedPoll)},
		{Method: http.MethodGet, Path: "/api/events/subscribe", Roles: []route.Role{route.RoleEvents, route.RoleRead}, Handler: h.handle(h.subscribe)},
	}
	return rs
}

// handle adapts the handler shape of this package (and of ingesthttp): a
// function that writes its answer or returns the error that Handler.fail
// maps.
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

// caller is the request's caller, or [problem.ErrNoCaller].
func (h *Handler) caller(r *http.Request) (correlate.Caller, error) {
	c, ok := h.opts.CallerFrom(r)
	if !ok {
		return correlate.Caller{}, problem.ErrNoCaller
	}
	return c, nil
}

// invalid is the error of a request body that breaks the rules listed in
// ps: 400 invalid_event, with title (the operation's: "Invalid event",
// "Invalid status update", …).
func invalid(title string, ps []event.Problem) *problem.Error {
	d := problem.New(problem.CodeInvalidEvent, "The request breaks the rules listed in errors.", ps...)
	d.Title = title
	return &problem.Error{Details: d}
}

// invalidQuery is the error of malformed getEvents parameters, answered
// as every bad parameter is (problem.InvalidParameter).
func invalidQuery(ps []event.Problem) *problem.Error {
	return &problem.Error{Details: problem.InvalidParameter(ps...)}
}

// fail is the one place errors become answers. The cases every handler
// shares (a client gone, a refused request or body, no caller, the store
// unavailable, anything else logged and answered 500 with generic text)
// are [problem.Fail]'s; only correlation's own are here: a validation
// error is 400 with every problem, a missing or out-of-scope event 404.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	problem.Fail(w, r, h.log, "correlatehttp", err, func(err error) (problem.Details, bool) {
		var ve *event.ValidationError
		switch {
		case errors.As(err, &ve):
			e := invalid("Invalid event", ve.Problems)
			switch r.Method {
			case http.MethodGet:
				e = invalidQuery(ve.Problems)
			case http.MethodPut:
				e.Details.Title = "Invalid status update"
			}
			return e.Details, true
		case errors.Is(err, store.ErrNotFound):
			return problem.NotFound("No such event."), true
		}
		return problem.Details{}, false
	})
}

func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return httpbody.Read(w, r, h.opts.MaxBodyBytes)
}

// create is createEvent: POST /api/events with a payload. The
// Idempotency-Key header, when present, is the idempotencyKey (an RFC 8941
// sf-string like "abc" or a bare token); a body idempotencyKey that
// disagrees with it is a 400, listed with every problem of the body.
func (h *Handler) create(w http.ResponseWriter, r *http.Request) error {
	caller, err := h.caller(r)
	if err != nil {
		return err
	}
	// The existing-clients rules: nothing is silently ignored; createEvent takes no query
	// parameter, so one is 400 invalid_parameter naming it, as on every
	// other correlation route.
	if err := noParams(r); err != nil {
		return err
	}
	body, err := h.readBody(w, r)
	if err != nil {
		return err
	}
	p, ce, ps, err := decodeCreate(r, body)
	if err != nil {
		return err
	}
	decoded := len(ps) == 0
	dataPrefix := ""
	if ce != nil {
		dataPrefix = ce.dataPrefix
	}
	ps = append(ps, applyTraceparent(r, &p, dataPrefix, decoded)...)
	if values, ok := r.Header[IdempotencyKeyHeader]; ok {
		key := headerKey(values)
		// The header carries the idempotencyKey member (docs/decisions.md,
		// Idempotency-Key request header), so its problems name that member.
		const member = "/idempotencyKey"
		switch n := utf8.RuneCountInString(key); {
		case len(values) > 1:
			ps = append(ps, event.Problem{Member: member, Rule: event.RuleFormat,
				Message: "the " + IdempotencyKeyHeader + " header must be given once"})
		case n == 0:
			ps = append(ps, event.Problem{Member: member, Rule: event.RuleMinLength,
				Message: "the " + IdempotencyKeyHeader + " header must not be empty"})
		case n > correlate.MaxKeyLen:
			ps = append(ps, event.Problem{Member: member, Rule: event.RuleMaxLength,
				Message: fmt.Sprintf("the %s header must be at most %d characters", IdempotencyKeyHeader, correlate.MaxKeyLen)})
		case decoded && p.IdempotencyKey != "" && p.IdempotencyKey != key:
			ps = append(ps, event.Problem{Member: member, Rule: event.RuleConst,
				Message: "must equal the " + IdempotencyKeyHeader + " header when both are given"})
		case decoded:
			p.IdempotencyKey = key
		}
	}
	if ce != nil && decoded && ce.id != "" {
		// docs/decisions.md, CloudEvents HTTP binding: "ce-id is the idempotency
		// key"; source and id identify a CloudEvent, so the key is made of
		// both (correlate.CloudEventKey). A key the client also gave must be
		// the event's id: one create has one identity.
		if p.IdempotencyKey != "" && p.IdempotencyKey != ce.id {
			ps = append(ps, event.Problem{Member: dataPrefix + "/idempotencyKey", Rule: event.RuleConst,
				Message: fmt.Sprintf("must equal %s (%q) when both are given", ce.name("id"), ce.id)})
		} else {
			p.IdempotencyKey = correlate.CloudEventKey(p.Source, ce.id)
		}
	}
	if len(ps) > 0 {
		return invalid("Invalid event", ps)
	}
	e, d, err := h.svc.Create(r.Context(), caller, p)
	if err != nil {
		return err
	}
	w.Header().Set(DispositionHeader, string(d))
	problem.WriteJSON(w, h.svc.StatusCode(p, d), e)
	return nil
}

// headerKey is the Idempotency-Key value: an sf-string ("…", with \" and
// \\ escapes) is unquoted; anything else is taken as it is, trimmed.
func headerKey(values []string) string {
	v := strings.TrimSpace(values[0])
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		var b strings.Builder
		for i := 1; i < len(v)-1; i++ {
			c := v[i]
			if c == '\\' && i+1 < len(v)-1 {
				i++
				c = v[i]
			}
			b.WriteByte(c)
		}
		return b.String()
	}
	return v
}

// listParams are the query parameters of getEvents; any other is refused
// (the existing-clients rules: "An unknown query parameter is refused with 400 naming it").
var listParams = []string{"page", "pageSize", "pagesize", "search", "sort", "order", "filter",
	"category", "action", "severity", "status", "correlationKey", "resolved"}

// singleListParams are the getEvents parameters that take one value; a
// repeated one is refused (category, action, severity and status are
// lists, every value honoured).
var singleListParams = []string{"page", "pageSize", "pagesize", "search", "sort", "order", "filter", "correlationKey", "resolved"}

// pageSizeSpellings refuses pageSize and Meshery's pagesize given with
// different values (pagesize=100&pageSize=5): one of them would be
// silently ignored. The same value under both spellings is accepted.
func pageSizeSpellings(v url.Values) []event.Problem {
	if a, b := v.Get("pageSize"), v.Get("pagesize"); a != "" && b != "" && a != b {
		return []event.Problem{{Member: "/pagesize", Rule: event.RuleConst,
			Message: "must equal pageSize (its other spelling) when both are given"}}
	}
	return nil
}

// sortAliases maps the column names Meshery's UI sends as sort (its
// notificationCenter.ts sends sort=created_at) to the fields they name.
var sortAliases = map[string]correlate.SortField{
	"created_at": correlate.SortCreatedAt,
	"updated_at": correlate.SortUpdatedAt,
	"system_id":  correlate.SortSystemID,
}

// list is getEvents: GET /api/events/list (@meshery/schemas v1beta3).
// Parameters: page (0-based), pageSize (or Meshery's pagesize), search,
// sort (a [correlate.SortField], or created_at, updated_at, system_id),
// order (asc or desc, or Meshery Server's "<sort> <asc|desc>"), filter (a
// JSON object whose members category, action, severity and status each
// hold a string or an array of strings; the other members of meshkit's
// EventsFilter, which Meshery Server sends, are read as filterParams
// says),
// category, action, severity, status (each repeatable, comma-separated or
// a JSON array of strings such as ["error","warning"], which Meshery's UI
// sends; any of the values matches; a member given both in filter and as
// a parameter is refused, 400 naming /filter/<member> with rule conflict),
// correlationKey, and resolved (true: resolved events only; false: open
// events only). An unknown parameter is refused, named. The answer is
// {"page","pageSize","totalCount","readCount","countBySeverityLevel","data"}.
func (h *Handler) list(w http.ResponseWriter, r *http.Request) error {
	caller, err := h.caller(r)
	if err != nil {
		return err
	}
	v := r.URL.Query()
	ps := problem.UnknownParameters(v, listParams)
	ps = append(ps, problem.RepeatedParameters(v, singleListParams)...)
	ps = append(ps, pageSizeSpellings(v)...)
	pageNo, size := pageParams(v, &ps)
	q, paging := filterParams(v, &ps)
	q.Page, q.PageSize = pagingParams(v, paging, pageNo, size, &ps)
	q.Sort, q.Order = orderParams(v, paging, true, &ps)
	// Every bad parameter at once: the adapter's own (not an integer, not a
	// boolean) and the library's judgement of the rest.
	var ve *event.ValidationError
	if errors.As(q.Validate(), &ve) {
		ps = append(ps, ve.Problems...)
	}
	if len(ps) > 0 {
		return invalidQuery(ps)
	}
	page, err := h.svc.List(r.Context(), caller, q)
	if err != nil {
		return err
	}
	problem.WriteJSON(w, http.StatusOK, wirePage{Page: page, PageSizeAlias: page.PageSize, TotalCountAlias: page.TotalCount,
		ReadCountAlias: page.ReadCount, CountBySeverityLevelAlias: page.CountBySeverityLevel})
	return nil
}

// wirePage is getEvents' answer: [correlate.Page], and its counts again
// under the snake_case names Meshery Server's remote provider decodes
// (page_size, total_count, read_count, count_by_severity_level; it reads
// no other spelling), so its notification center shows them.
type wirePage struct {
	correlate.Page
	PageSizeAlias             int                       `json:"page_size"`
	TotalCountAlias           int64                     `json:"total_count"`
	ReadCountAlias            int64                     `json:"read_count"`
	CountBySeverityLevelAlias []correlate.SeverityCount `json:"count_by_severity_level"`
}

// pageParams reads page and pageSize (or Meshery's pagesize) from v,
// appending a problem to ps for a value that is not an integer, or a page
// size of 0 (which would read as "the default": a client that asks for an
// empty page gets told); 0 for a parameter not given.
func pageParams(v url.Values, ps *[]event.Problem) (page, size int) {
	num := func(names ...string) int {
		for _, name := range names {
			if s := v.Get(name); s != "" {
				n, err := strconv.Atoi(s)
				switch {
				case err != nil:
					*ps = append(*ps, event.Problem{Member: "/" + name, Rule: event.RuleType, Message: "must be an integer"})
				case n == 0 && name != "page":
					*ps = append(*ps, event.Problem{Member: "/" + name, Rule: event.RuleMinimum, Message: fmt.Sprintf("must be between 1 and %d", correlate.MaxPageSize)})
				}
				return n
			}
		}
		return 0
	}
	return num("page"), num("pageSize", "pagesize")
}

// summaryParams are the query parameters of getEventSummaryByUser: those
// of getEvents but sort (its rows are users).
var (
	summaryParams       = slices.DeleteFunc(slices.Clone(listParams), func(p string) bool { return p == "sort" })
	singleSummaryParams = slices.DeleteFunc(slices.Clone(singleListParams), func(p string) bool { return p == "sort" })
)

// summary is getEventSummaryByUser: GET /api/events/summary
// (@meshery/schemas v1beta3 EventSummaryPage). Parameters: those of
// getEvents (page, pageSize or pagesize, search, order, filter and the
// filters) but sort; rows are ordered by user id, ascending unless
// order=desc. The answer is {"page","pageSize","totalCount","data"}, each
// row {"userId","totalCount","readCount","unreadCount",
// "countBySeverityLevel"}; an events caller gets its own row, a reader one
// per user of its organization.
func (h *Handler) summary(w http.ResponseWriter, r *http.Request) error {
	caller, err := h.caller(r)
	if err != nil {
		return err
	}
	v := r.URL.Query()
	ps := problem.UnknownParameters(v, summaryParams)
	ps = append(ps, problem.RepeatedParameters(v, singleSummaryParams)...)
	ps = append(ps, pageSizeSpellings(v)...)
	pageNo, size := pageParams(v, &ps)
	q, paging := filterParams(v, &ps)
	q.Page, q.PageSize = pagingParams(v, paging, pageNo, size, &ps)
	_, q.Order = orderParams(v, paging, false, &ps)
	var ve *event.ValidationError
	if errors.As(q.Validate(), &ve) {
		ps = append(ps, ve.Problems...)
	}
	if len(ps) > 0 {
		return invalidQuery(ps)
	}
	page, err := h.svc.Summary(r.Context(), caller, q)
	if err != nil {
		return err
	}
	problem.WriteJSON(w, http.StatusOK, page)
	return nil
}

// aggregate is getEventsAggregate: GET /api/events?cumulative=true|false
// (@meshery/schemas v1beta3 EventsAggregate): {"audit":n,…}, one member
// per category of the events the caller lists. cumulative=true counts
// every event; false or absent only the unread ones
// ([correlate.Service.Aggregate]).
func (h *Handler) aggregate(w http.ResponseWriter, r *http.Request) error {
	caller, err := h.caller(r)
	if err != nil {
		return err
	}
	v := r.URL.Query()
	ps := problem.UnknownParameters(v, []string{"cumulative"})
	ps = append(ps, problem.RepeatedParameters(v, []string{"cumulative"})...)
	cumulative := false
	if s := v.Get("cumulative"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			ps = append(ps, event.Problem{Member: "/cumulative", Rule: event.RuleType, Message: "must be true or false"})
		}
		cumulative = b
	}
	if len(ps) > 0 {
		return invalidQuery(ps)
	}
	a, err := h.svc.Aggregate(r.Context(), caller, cumulative)
	if err != nil {
		return err
	}
	problem.WriteJSON(w, http.StatusOK, a)
	return nil
}

// filterParams reads getEvents' filters from v (search, category, action,
// severity, status, filter, correlationKey, resolved), appending a problem
// to ps for each value that does not parse; the feed routes take the same.
// It also returns what filter says of paging and order (meshkit's
// EventsFilter members limit, offset, order and sortOn), for the routes
// that page (pagingParams, orderParams); filter's search must agree
// with the search parameter when both are set.
func filterParams(v url.Values, ps *[]event.Problem) (correlate.Query, meshkitPaging) {
	values := func(name string) []string {
		out, err := multi(v[name])
		if err != nil {
			*ps = append(*ps, event.Problem{Member: "/" + name, Rule: event.RuleType, Message: err.Error()})
		}
		return out
	}
	q := correlate.Query{
		Search:         v.Get("search"),
		Category:       values("category"),
		Action:         values("action"),
		Severity:       typed[correlate.Severity](values("severity")),
		Status:         typed[correlate.Status](values("status")),
		CorrelationKey: v.Get("correlationKey"),
	}
	var paging meshkitPaging
	if s := v.Get("filter"); s != "" {
		f, fps := parseFilter(s)
		*ps = append(*ps, fps...)
		paging = f.paging
		if f.Search != "" {
			if q.Search != "" && q.Search != f.Search {
				*ps = append(*ps, event.Problem{Member: "/filter/search", Rule: event.RuleConflict,
					Message: "differs from the search parameter: give it one way, or the same text both ways"})
			}
			q.Search = f.Search
		}
		// A member given both ways is refused, not joined: Meshery reads
		// the two as both holding, and a union would widen the answer.
		for _, m := range []struct {
			name      string
			inFilter  bool
			parameter bool
		}{
			{"category", len(f.Category) > 0, len(q.Category) > 0},
			{"action", len(f.Action) > 0, len(q.Action) > 0},
			{"severity", len(f.Severity) > 0, len(q.Severity) > 0},
			{"status", len(f.Status) > 0, len(q.Status) > 0},
		} {
			if m.inFilter && m.parameter {
				*ps = append(*ps, event.Problem{Member: "/filter/" + m.name, Rule: event.RuleConflict,
					Message: "is also given as the " + m.name + " parameter: give it one way (both would have to hold)"})
			}
		}
		q.Category = append(q.Category, f.Category...)
		q.Action = append(q.Action, f.Action...)
		q.Severity = append(q.Severity, typed[correlate.Severity](f.Severity)...)
		q.Status = append(q.Status, typed[correlate.Status](f.Status)...)
	}
	if s := v.Get("resolved"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			*ps = append(*ps, event.Problem{Member: "/resolved", Rule: event.RuleType, Message: "must be true or false"})
		}
		q.Resolved = &b
	}
	return q, paging
}

// meshkitPaging is what the filter parameter says of paging and order:
// the members limit, offset, order and sortOn of meshkit's EventsFilter,
// which Meshery Server's remote provider sends as filter beside the page,
// pagesize and order parameters that say the same.
type meshkitPaging struct {
	Limit, Offset int
	Order, SortOn string
}

// pagingParams reconciles page and the page size with filter's limit and
// offset: a limit must equal the page size (it is the page size when no
// pageSize or pagesize is given), and an offset must be page × page size
// (it sets the page when no page is given). A disagreement is refused,
// 400 naming /filter/limit or /filter/offset, rule conflict.
func pagingParams(v url.Values, f meshkitPaging, page, size int, ps *[]event.Problem) (int, int) {
	if f.Limit > 0 {
		switch {
		case size == 0:
			size = f.Limit
		case size != f.Limit:
			*ps = append(*ps, event.Problem{Member: "/filter/limit", Rule: event.RuleConflict,
				Message: "must equal the page size (pageSize or pagesize) when both are given"})
		}
	}
	if f.Offset > 0 {
		effective := size
		if effective == 0 {
			effective = correlate.DefaultPageSize
		}
		switch {
		case v.Get("page") == "" && f.Offset%effective == 0:
			page = f.Offset / effective
		case f.Offset != page*effective:
			*ps = append(*ps, event.Problem{Member: "/filter/offset", Rule: event.RuleConflict,
				Message: fmt.Sprintf("must equal page × page size (%d × %d) when both are given", page, effective)})
		}
	}
	return page, size
}

// orderParams reads the order parameter, asc or desc, or as Meshery
// Server's remote provider sends it: a sort column, a space and a
// direction ("created_at desc"; "updated_at " with no direction), the
// column as the sort parameter names it; and reconciles it with the sort
// parameter and filter's sortOn and order, each of which must agree with
// the others when given (400 naming the member, rule conflict). sorts says
// whether the route sorts by a field at all (getEventSummaryByUser orders
// its rows by user only: a sort field there is refused).
func orderParams(v url.Values, f meshkitPaging, sorts bool, ps *[]event.Problem) (correlate.SortField, correlate.Order) {
	var sort, dir string
	switch fields := strings.Fields(v.Get("order")); len(fields) {
	case 0:
	case 1:
		if d := strings.ToLower(fields[0]); d == string(correlate.OrderAsc) || d == string(correlate.OrderDesc) {
			dir = d
		} else {
			sort = fields[0]
		}
	case 2:
		sort, dir = fields[0], strings.ToLower(fields[1])
	default:
		sort = "?"
	}
	if known := slices.Contains(correlate.SortFields(), correlate.SortField(sortName(sort))); sort != "" && (!known || !sorts) ||
		dir != "" && dir != string(correlate.OrderAsc) && dir != string(correlate.OrderDesc) {
		msg := `must be "asc" or "desc", or a sort field, a space and a direction ("created_at desc")`
		if !sorts {
			msg = `must be "asc" or "desc": the rows are users, ordered by userId`
		}
		*ps = append(*ps, event.Problem{Member: "/order", Rule: event.RuleEnum, Message: msg})
		sort, dir = "", ""
	}
	agree := func(member, have, given string, canon func(string) string) string {
		switch {
		case given == "":
		case have == "":
			return given
		case canon(have) != canon(given):
			*ps = append(*ps, event.Problem{Member: member, Rule: event.RuleConflict,
				Message: "disagrees with the order given elsewhere (order, sort, filter's order and sortOn): give it one way"})
		}
		return have
	}
	sort = agree("/sort", sort, v.Get("sort"), sortName)
	sort = agree("/filter/sortOn", sort, f.SortOn, sortName)
	dir = agree("/filter/order", dir, f.Order, strings.ToLower)
	if sort != "" && !sorts {
		*ps = append(*ps, event.Problem{Member: "/filter/sortOn", Rule: event.RuleEnum,
			Message: "must be unset: the rows are users, ordered by userId"})
		sort = ""
	}
	return correlate.SortField(sortName(sort)), correlate.Order(strings.ToLower(dir))
}

// sortName is the sort field s names: s, or the field of a column name
// Meshery sends (sortAliases).
func sortName(s string) string {
	if f, ok := sortAliases[s]; ok {
		return string(f)
	}
	return s
}

// eventsFilter is getEvents' filter parameter: a JSON object of the list
// filters, each a string or an array of strings, and of the other members
// of meshkit's EventsFilter (Meshery Server sends the whole struct).
type eventsFilter struct {
	Category, Action, Severity, Status []string
	Search                             string
	paging                             meshkitPaging
}

// inertFilterMembers are meshkit EventsFilter members tally does not
// filter by: null or [] (what Meshery Server sends when unset) is
// accepted, a value is refused, named.
var inertFilterMembers = []string{"actedUpon", "owner", "provider", "systemId"}

// parseFilter decodes the filter parameter, naming each problem by its
// pointer under /filter: not a JSON object, an unknown member, a value
// that is neither a string nor an array of strings.
func parseFilter(s string) (eventsFilter, []event.Problem) {
	var f eventsFilter
	var raw map[string]jsontext.Value
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return f, []event.Problem{{Member: "/filter", Rule: event.RuleType,
			Message: "must be a JSON object whose members category, action, severity and status hold a string or an array of strings"}}
	}
	var ps []event.Problem
	fields := map[string]*[]string{"category": &f.Category, "action": &f.Action, "severity": &f.Severity, "status": &f.Status}
	texts := map[string]*string{"search": &f.Search, "order": &f.paging.Order, "sortOn": &f.paging.SortOn}
	counts := map[string]*int{"limit": &f.paging.Limit, "offset": &f.paging.Offset}
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		if p, ok := filterMember(name, raw[name], texts, counts); ok {
			if p != nil {
				ps = append(ps, *p)
			}
			continue
		}
		dst, ok := fields[name]
		if !ok {
			ps = append(ps, event.Problem{Member: "/filter/" + name, Rule: event.RuleAdditionalProperties,
				Message: "is not a filter of getEvents (category, action, severity, status)"})
			continue
		}
		vs, err := stringOrStrings(raw[name])
		if err != nil {
			ps = append(ps, event.Problem{Member: "/filter/" + name, Rule: event.RuleType, Message: err.Error()})
			continue
		}
		*dst = vs
	}
	return f, ps
}

// filterMember decodes one of filter's members that is not a list filter:
// a text (search, order, sortOn: a string or null), a count (limit,
// offset: a non-negative integer or null) or an inert member (null or
// []); ok is false for any other name, p the problem of a bad value.
func filterMember(name string, v jsontext.Value, texts map[string]*string, counts map[string]*int) (p *event.Problem, ok bool) {
	bad := func(msg string) *event.Problem {
		return &event.Problem{Member: "/filter/" + name, Rule: event.RuleType, Message: msg}
	}
	if dst, ok := texts[name]; ok {
		if v.Kind() != 'n' && (v.Kind() != '"' || json.Unmarshal(v, dst) != nil) {
			return bad("must be a string"), true
		}
		return nil, true
	}
	if dst, ok := counts[name]; ok {
		if v.Kind() != 'n' && (json.Unmarshal(v, dst) != nil || *dst < 0) {
			return bad("must be a non-negative integer"), true
		}
		return nil, true
	}
	if slices.Contains(inertFilterMembers, name) {
		vs, err := stringOrStrings(v)
		switch {
		case err != nil:
			return bad(err.Error()), true
		case len(vs) > 0:
			return &event.Problem{Member: "/filter/" + name, Rule: event.RuleAdditionalProperties,
				Message: "is not a filter of getEvents (category, action, severity, status): only null or [] is taken"}, true
		}
		return nil, true
	}
	return nil, false
}

var errStrings = errors.New("must be a string or an array of strings")

// stringOrStrings decodes a JSON string or array of strings, dropping
// empty strings; null is no value.
func stringOrStrings(v jsontext.Value) ([]string, error) {
	var out []string
	switch v.Kind() {
	case 'n':
		return nil, nil
	case '"':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, errStrings
		}
		out = []string{s}
	case '[':
		if err := json.Unmarshal(v, &out); err != nil {
			return nil, errStrings
		}
	default:
		return nil, errStrings
	}
	return slices.DeleteFunc(out, func(s string) bool { return s == "" }), nil
}

// multi splits repeated and comma-separated values, dropping empty ones; a
// value that starts with "[" is a JSON array of strings (Meshery's UI
// sends category=["istio"]), whose elements are taken whole.
func multi(values []string) ([]string, error) {
	var out []string
	for _, v := range values {
		if strings.HasPrefix(strings.TrimSpace(v), "[") {
			vs, err := stringOrStrings(jsontext.Value(strings.TrimSpace(v)))
			if err != nil {
				return nil, errors.New(`must be a value, values separated by commas, or a JSON array of strings such as ["a","b"]`)
			}
			out = append(out, vs...)
			continue
		}
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out, nil
}

func typed[T ~string](vs []string) []T {
	var out []T
	for _, v := range vs {
		out = append(out, T(v))
	}
	return out
}

// setStatus is PUT /api/events/{id}/status with {"status":"read"} or
// {"status":"unread"}; it answers 200 with the event.
func (h *Handler) setStatus(w http.ResponseWriter, r *http.Request) error {
	caller, err := h.caller(r)
	if err != nil {
		return err
	}
	if err := noParams(r); err != nil {
		return err
	}
	body, err := h.readBody(w, r)
	if err != nil {
		return err
	}
	var in struct {
		Status *correlate.Status `json:"status"`
	}
	if err := json.Unmarshal(body, &in, json.RejectUnknownMembers(true)); err != nil {
		return invalid("Invalid status update", []event.Problem{{
			Rule: event.RuleSyntax, Message: `the body must be {"status":"read"} or {"status":"unread"}`}})
	}
	if in.Status == nil {
		return invalid("Invalid status update", []event.Problem{{
			Member: "/status", Rule: event.RuleRequired, Message: "is required"}})
	}
	e, err := h.svc.SetStatus(r.Context(), caller, r.PathValue("id"), *in.Status)
	if err != nil {
		return err
	}
	problem.WriteJSON(w, http.StatusOK, statusUpdated{Message: "Event status updated", EventID: e.ID, Status: e.Status})
	return nil
}

// statusUpdated is @meshery/schemas v1beta3 UpdateEventStatusResponse.
type statusUpdated struct {
	Message string           `json:"message"`
	EventID string           `json:"eventId"`
	Status  correlate.Status `json:"status"`
}

// readIDs reads a bulk body: a JSON object with ids (an array of strings)
// and, when withStatus, status; any other member, or a member of the wrong
// type, is refused naming it.
func (h *Handler) readIDs(w http.ResponseWriter, r *http.Request, withStatus bool) ([]string, correlate.Status, error) {
	if err := noParams(r); err != nil {
		return nil, "", err
	}
	body, err := h.readBody(w, r)
	if err != nil {
		return nil, "", err
	}
	title, shape := "Invalid bulk delete", `{"ids":["<uuid>",…]}`
	if withStatus {
		title, shape = "Invalid bulk status update", `{"ids":["<uuid>",…],"status":"read"|"unread"}`
	}
	var raw map[string]jsontext.Value
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, "", invalid(title, []event.Problem{{Rule: event.RuleSyntax, Message: "the body must be " + shape}})
	}
	var (
		ps     []event.Problem
		ids    []string
		status correlate.Status
	)
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		v := raw[name]
		switch {
		case name == "ids":
			if v.Kind() != '[' || json.Unmarshal(v, &ids) != nil {
				ps = append(ps, event.Problem{Member: "/ids", Rule: event.RuleType, Message: "must be an array of strings"})
			}
		case name == "status" && withStatus:
			if v.Kind() != '"' || json.Unmarshal(v, &status) != nil {
				ps = append(ps, event.Problem{Member: "/status", Rule: event.RuleType, Message: "must be a string"})
			}
		default:
			ps = append(ps, event.Problem{Member: "/" + name, Rule: event.RuleAdditionalProperties, Message: "is not a member of " + shape})
		}
	}
	if _, ok := raw["ids"]; !ok {
		ps = append(ps, event.Problem{Member: "/ids", Rule: event.RuleRequired, Message: "is required"})
	}
	if _, ok := raw["status"]; withStatus && !ok {
		ps = append(ps, event.Problem{Member: "/status", Rule: event.RuleRequired, Message: "is required"})
	}
	if len(ps) > 0 {
		return nil, "", invalid(title, ps)
	}
	return ids, status, nil
}

// setStatuses is bulkUpdateEventStatus: PUT /api/events/status with
// {"ids":[…],"status":"read"|"unread"}; it answers 200
// {"updated":[…]}, the ids of the caller's events it changed.
func (h *Handler) setStatuses(w http.ResponseWriter, r *http.Request) error {
	caller, err := h.caller(r)
	if err != nil {
		return err
	}
	ids, status, err := h.readIDs(w, r, true)
	if err != nil {
		return err
	}
	done, err := h.svc.SetStatuses(r.Context(), caller, ids, status)
	if err != nil {
		return err
	}
	problem.WriteJSON(w, http.StatusOK, struct {
		Updated []string `json:"updated"`
	}{nonNil(done)})
	return nil
}

// deleteMany is bulkDeleteEvents: POST /api/events/delete with
// {"ids":[…]}, or DELETE /api/events with the same body as Meshery
// Server's remote provider sends it; it answers 200 {"deleted":[…]}, the
// ids of the caller's events it soft-deleted.
func (h *Handler) deleteMany(w http.ResponseWriter, r *http.Request) error {
	caller, err := h.caller(r)
	if err != nil {
		return err
	}
	ids, _, err := h.readIDs(w, r, false)
	if err != nil {
		return err
	}
	done, err := h.svc.DeleteMany(r.Context(), caller, ids)
	if err != nil {
		return err
	}
	problem.WriteJSON(w, http.StatusOK, struct {
		Deleted []string `json:"deleted"`
	}{nonNil(done)})
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// types is getEventTypes: GET /api/events/types with page, pageSize (or
// pagesize; default and at most 100); it answers the distinct
// [{"category","action"}] pairs of the events the caller lists, ordered by
// category then action.
func (h *Handler) types(w http.ResponseWriter, r *http.Request) error {
	caller, err := h.caller(r)
	if err != nil {
		return err
	}
	v := r.URL.Query()
	ps := problem.UnknownParameters(v, []string{"page", "pageSize", "pagesize"})
	ps = append(ps, problem.RepeatedParameters(v, []string{"page", "pageSize", "pagesize"})...)
	ps = append(ps, pageSizeSpellings(v)...)
	page, size := pageParams(v, &ps)
	// Every bad parameter at once, as list does: the adapter's own and the
	// library's judgement of the page.
	var ve *event.ValidationError
	if errors.As((correlate.Query{Page: page, PageSize: size}).Validate(), &ve) {
		ps = append(ps, ve.Problems...)
	}
	if len(ps) > 0 {
		return invalidQuery(ps)
	}
	ts, err := h.svc.Types(r.Context(), caller, page, size)
	if err != nil {
		return err
	}
	problem.WriteJSON(w, http.StatusOK, ts)
	return nil
}

// noParams refuses any query parameter on a route that takes none.
func noParams(r *http.Request) error {
	if ps := problem.UnknownParameters(r.URL.Query(), nil); len(ps) > 0 {
		return invalidQuery(ps)
	}
	return nil
}

// delete is DELETE /api/events/{id}: a soft delete, answered 204.
func (h *Handler) delete(w http.ResponseWriter, r *http.Request) error {
	caller, err := h.caller(r)
	if err != nil {
		return err
	}
	if err := noParams(r); err != nil {
		return err
	}
	if _, err := h.svc.Delete(r.Context(), caller, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
