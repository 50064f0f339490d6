// Package correlatehttp serves the correlated events of
// [github.com/tallyhq/tally/correlate] over HTTP, as Meshery's events API
// has them (event-correlation.md):
//
//	POST   /api/events              createEvent
//	GET    /api/events/list         getEvents
//	PUT    /api/events/{id}/status  mark an event read or unread
//	DELETE /api/events/{id}         soft-delete an event
//
// The adapter is thin: it authenticates through a function the server
// supplies, decodes, calls the [correlate.Service], and encodes. Every rule
// (the state machine, the status code of a create, validation) lives in
// package correlate. Errors are mapped to RFC 9457 problem details in one
// function; an internal error is logged and the client gets generic text.
//
// CORS is the server's job: a server answering browsers on another origin
// lists Event-Disposition in Access-Control-Expose-Headers.
package correlatehttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/internal/httpbody"
	"github.com/tallyhq/tally/internal/problem"
	"github.com/tallyhq/tally/store"
)

// DispositionHeader is the response header that carries the
// [correlate.Disposition] of every 2xx answer of createEvent.
const DispositionHeader = "Event-Disposition"

// IdempotencyKeyHeader is the request header (IETF
// draft-ietf-httpapi-idempotency-key-header) accepted as the create's
// idempotencyKey.
const IdempotencyKeyHeader = "Idempotency-Key"

// DefaultMaxBodyBytes caps a request body when Options.MaxBodyBytes is 0.
const DefaultMaxBodyBytes = 1 << 20

// Observer is told the disposition of every successful create, for
// example to count them in a metric. Implementations must be safe for
// concurrent use and should not block.
type Observer interface {
	ObserveDisposition(correlate.Disposition)
}

// Options configures a [Handler].
type Options struct {
	// Service answers every request. Required.
	Service *correlate.Service
	// CallerFrom authenticates a request: it returns the caller and true,
	// or false when the request carries no valid credentials (answered 401
	// with WWW-Authenticate: Bearer). It runs before the body is read.
	// Required.
	CallerFrom func(*http.Request) (correlate.Caller, bool)
	// Logger receives internal errors. Nil discards them.
	Logger *slog.Logger
	// Observer, when set, is told every create's disposition.
	Observer Observer
	// MaxBodyBytes caps request bodies (413 beyond it); 0 means
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
}

// Handler serves the events API. It is an http.Handler for the four routes
// above (404 or 405 for anything else), and can instead register them on a
// server's own mux with [Handler.Register]. Safe for concurrent use.
type Handler struct {
	opts Options
	mux  *http.ServeMux
}

// New returns a Handler. Errors (joined): no Service, no CallerFrom, a
// negative MaxBodyBytes.
func New(opts Options) (*Handler, error) {
	var errs []error
	if opts.Service == nil {
		errs = append(errs, errors.New("correlatehttp: Service is nil"))
	}
	if opts.CallerFrom == nil {
		errs = append(errs, errors.New("correlatehttp: CallerFrom is nil"))
	}
	if opts.MaxBodyBytes < 0 {
		errs = append(errs, errors.New("correlatehttp: MaxBodyBytes is negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	h := &Handler{opts: opts, mux: http.NewServeMux()}
	h.Register(h.mux)
	return h, nil
}

// Register adds the four routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.Handle("POST /api/events", h.authenticated(h.create))
	mux.Handle("GET /api/events/list", h.authenticated(h.list))
	mux.Handle("PUT /api/events/{id}/status", h.authenticated(h.setStatus))
	mux.Handle("DELETE /api/events/{id}", h.authenticated(h.delete))
}

// ServeHTTP serves the four routes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

type handlerFunc func(w http.ResponseWriter, r *http.Request, caller correlate.Caller) error

// authenticated checks credentials before anything reads the body, and
// maps the error the handler returns.
func (h *Handler) authenticated(fn handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller, ok := h.opts.CallerFrom(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", "Bearer")
			problem.Write(w, problem.New(http.StatusUnauthorized, "unauthorized", "Unauthorized",
				"The request carries no valid credentials."))
			return
		}
		if err := fn(w, r, caller); err != nil {
			h.writeError(w, r, err)
		}
	})
}

// requestError is a problem of the request itself, with its status and
// code, and the member problems when there are any.
type requestError struct {
	status  int
	code    string
	title   string
	detail  string
	members []problem.Member
}

func (e *requestError) Error() string { return e.code + ": " + e.detail }

func invalid(code, title string, ps []correlate.Problem) *requestError {
	members := make([]problem.Member, 0, len(ps))
	for _, p := range ps {
		members = append(members, problem.Member{Member: p.Member, Rule: p.Rule, Message: p.Message})
	}
	return &requestError{status: http.StatusBadRequest, code: code, title: title,
		detail: "The request breaks the rules listed in errors.", members: members}
}

// writeError is the one place errors become answers: a request problem
// keeps its status, a validation error is 400 with every problem, a missing
// or out-of-scope event is 404, and anything else is logged and answered
// 500 with generic text.
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var (
		re *requestError
		ve *correlate.ValidationError
	)
	if httpbody.Answer(w, r, h.opts.Logger, err) {
		return
	}
	switch {
	case errors.As(err, &re):
		problem.Write(w, problem.New(re.status, re.code, re.title, re.detail, re.members...))
	case errors.As(err, &ve):
		code, title := "invalid_event", "Invalid event"
		switch {
		case r.Method == http.MethodGet:
			code, title = "invalid_query", "Invalid query"
		case r.Method == http.MethodPut:
			title = "Invalid status update"
		}
		problem.Write(w, invalid(code, title, ve.Problems).problem())
	case errors.Is(err, store.ErrNotFound):
		problem.Write(w, problem.New(http.StatusNotFound, "not_found", "Not found", "No such event."))
	case problem.Unavailable(err):
		h.opts.Logger.WarnContext(r.Context(), "correlatehttp: store unavailable", "method", r.Method, "path", r.URL.Path, "error", err)
		problem.WriteUnavailable(w)
	default:
		if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
			return // the client went away; nobody reads the answer
		}
		h.opts.Logger.ErrorContext(r.Context(), "correlatehttp: internal error",
			"method", r.Method, "path", r.URL.Path, "error", err)
		problem.Write(w, problem.New(http.StatusInternalServerError, "internal", "Internal server error",
			"The server could not complete the request."))
	}
}

func (e *requestError) problem() problem.Details {
	return problem.New(e.status, e.code, e.title, e.detail, e.members...)
}

func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return httpbody.Read(w, r, h.opts.MaxBodyBytes)
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
	return nil
}

// create is createEvent: POST /api/events with a payload. The
// Idempotency-Key header, when present, is the idempotencyKey (an RFC 8941
// sf-string like "abc" or a bare token); a body idempotencyKey that
// disagrees with it is a 400, listed with every problem of the body.
func (h *Handler) create(w http.ResponseWriter, r *http.Request, caller correlate.Caller) error {
	body, err := h.readBody(w, r)
	if err != nil {
		return err
	}
	p, err := correlate.DecodePayload(body)
	var ve *correlate.ValidationError
	if err != nil && !errors.As(err, &ve) {
		return err
	}
	var ps []correlate.Problem
	if ve != nil {
		ps = ve.Problems
	}
	if values, ok := r.Header[IdempotencyKeyHeader]; ok {
		key := headerKey(values)
		switch {
		case key == "" || len(key) > 255 || len(values) > 1:
			ps = append(ps, correlate.Problem{Member: IdempotencyKeyHeader, Rule: "format",
				Message: "must be one key of 1 to 255 bytes"})
		case ve == nil && p.IdempotencyKey != "" && p.IdempotencyKey != key:
			ps = append(ps, correlate.Problem{Member: IdempotencyKeyHeader, Rule: "conflict",
				Message: "disagrees with the body's idempotencyKey"})
		case ve == nil:
			p.IdempotencyKey = key
		}
	}
	if len(ps) > 0 {
		return invalid("invalid_event", "Invalid event", ps)
	}
	e, d, err := h.opts.Service.Create(r.Context(), caller, p)
	if err != nil {
		return err
	}
	if h.opts.Observer != nil {
		h.opts.Observer.ObserveDisposition(d)
	}
	w.Header().Set(DispositionHeader, string(d))
	return writeJSON(w, h.opts.Service.StatusCode(p, d), e)
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

// list is getEvents: GET /api/events/list. Parameters: page (0-based),
// pageSize (or Meshery's pagesize), search, order (asc or desc, by
// creation time), category, action, severity, status (each repeatable or
// comma-separated; any of the values matches), correlationKey, and
// resolved (true: resolved events only; false: open events only). The
// answer is {"page","pageSize","totalCount","data":[…]}.
func (h *Handler) list(w http.ResponseWriter, r *http.Request, caller correlate.Caller) error {
	v := r.URL.Query()
	var ps []correlate.Problem
	num := func(names ...string) int {
		for _, name := range names {
			if s := v.Get(name); s != "" {
				n, err := strconv.Atoi(s)
				switch {
				case err != nil:
					ps = append(ps, correlate.Problem{Member: name, Rule: "integer", Message: "must be an integer"})
				case n == 0 && name != "page":
					// 0 would read as "the default" below; a client that
					// asks for an empty page gets told.
					ps = append(ps, correlate.Problem{Member: name, Rule: "range", Message: fmt.Sprintf("must be between 1 and %d", correlate.MaxPageSize)})
				}
				return n
			}
		}
		return 0
	}
	q := correlate.Query{
		Page:           num("page"),
		PageSize:       num("pageSize", "pagesize"),
		Search:         v.Get("search"),
		Order:          correlate.Order(strings.ToLower(v.Get("order"))),
		Category:       multi(v["category"]),
		Action:         multi(v["action"]),
		Severity:       typed[correlate.Severity](multi(v["severity"])),
		Status:         typed[correlate.Status](multi(v["status"])),
		CorrelationKey: v.Get("correlationKey"),
	}
	if s := v.Get("resolved"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			ps = append(ps, correlate.Problem{Member: "resolved", Rule: "type", Message: "must be true or false"})
		}
		q.Resolved = &b
	}
	if len(ps) > 0 {
		return invalid("invalid_query", "Invalid query", ps)
	}
	page, err := h.opts.Service.List(r.Context(), caller, q)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, page)
}

// multi splits repeated and comma-separated values, dropping empty ones.
func multi(values []string) []string {
	var out []string
	for _, v := range values {
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
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
func (h *Handler) setStatus(w http.ResponseWriter, r *http.Request, caller correlate.Caller) error {
	body, err := h.readBody(w, r)
	if err != nil {
		return err
	}
	var in struct {
		Status *correlate.Status `json:"status"`
	}
	if err := json.Unmarshal(body, &in, json.RejectUnknownMembers(true)); err != nil {
		return invalid("invalid_event", "Invalid status update", []correlate.Problem{{
			Rule: "syntax", Message: `the body must be {"status":"read"} or {"status":"unread"}`}})
	}
	if in.Status == nil {
		return invalid("invalid_event", "Invalid status update", []correlate.Problem{{
			Member: "/status", Rule: "required", Message: "is required"}})
	}
	e, err := h.opts.Service.SetStatus(r.Context(), caller, r.PathValue("id"), *in.Status)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, e)
}

// delete is DELETE /api/events/{id}: a soft delete, answered 204.
func (h *Handler) delete(w http.ResponseWriter, r *http.Request, caller correlate.Caller) error {
	if _, err := h.opts.Service.Delete(r.Context(), caller, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
