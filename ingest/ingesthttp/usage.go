package ingesthttp

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/ingest/usage"
	"github.com/tallyhq/tally/internal/problem"
)

// usageParams are the query parameters of GET /api/v1/usage.
var usageParams = []string{"from", "to", "window", "group_by", "quantity", "unit", "cloud", "platform", "project_id",
	"resource_type", "state", "as_of", "limit", "cursor"}

// summaryParams are the query parameters of GET
// /api/v1/projects/{cloud}/{project_id}/summary.
var summaryParams = []string{"from", "to"}

// UsageQuery reads the query parameters of GET /api/v1/usage (docs/usage.md)
// into a [usage.Query]: from and to (RFC 3339), window, group_by (a comma
// list), quantity, unit, the filters cloud, platform, project_id,
// resource_type and state, as_of, limit and cursor. It returns an
// [*event.ValidationError] listing every malformed, unknown or repeated
// parameter together with the library's judgement ([usage.Query.Validate]).
func UsageQuery(r *http.Request) (usage.Query, error) {
	var ps params
	limit, cursor := ps.limitCursor(r)
	q := r.URL.Query()
	uq := usage.Query{
		From: ps.time(r, "from"), To: ps.time(r, "to"), Window: usage.Window(q.Get("window")),
		Quantity: q.Get("quantity"), Unit: usage.Unit(q.Get("unit")),
		Cloud: q.Get("cloud"), Platform: q.Get("platform"), ProjectID: q.Get("project_id"),
		ResourceType: q.Get("resource_type"), State: q.Get("state"), AsOf: q.Get("as_of"), Limit: limit, Cursor: cursor,
	}
	if v, has := q["group_by"]; has {
		if v[0] == "" {
			ps.add("group_by", event.RuleEnum, "must be a comma list of keys")
		} else {
			uq.GroupBy = strings.Split(v[0], ",")
		}
	}
	for _, name := range []string{"window", "quantity", "unit", "as_of"} {
		if v, has := q[name]; has && v[0] == "" {
			ps.add(name, event.RuleEnum, "must not be empty")
		}
	}
	return uq, ps.err(withoutMembers(uq.Validate(), ps), r, usageParams...)
}

// withoutMembers drops from lib (an *event.ValidationError or nil) the
// problems of members ps already names: a malformed from is not also
// missing.
func withoutMembers(lib error, ps params) error {
	var ve *event.ValidationError
	if !errors.As(lib, &ve) {
		return lib
	}
	var keep []event.Problem
	for _, p := range ve.Problems {
		if !slices.ContainsFunc(ps, func(q event.Problem) bool { return q.Member == p.Member }) {
			keep = append(keep, p)
		}
	}
	if len(keep) == 0 {
		return nil
	}
	return &event.ValidationError{Problems: keep}
}

// getUsage serves GET /api/v1/usage: the [usage.Answer] of the query
// ([UsageQuery]); 400 naming every bad parameter; 422 result_too_large.
func (h *Handler) getUsage(w http.ResponseWriter, r *http.Request) error {
	q, err := UsageQuery(r)
	if err != nil {
		return err
	}
	a, err := h.opts.Usage.Usage(r.Context(), q)
	if err != nil {
		return err
	}
	problem.WriteJSON(w, http.StatusOK, a)
	return nil
}

// getLifecycle serves GET
// /api/v1/resources/{cloud}/{resource_type}/{resource_id}/lifecycle:
// Tally's Lifecycle shape ([usage.Lifecycle]); 404 for a resource with no
// stored event; 422 history_too_long past ingest.MaxHistory events.
func (h *Handler) getLifecycle(w http.ResponseWriter, r *http.Request) error {
	if err := noParams(r); err != nil {
		return err
	}
	l, err := h.opts.Usage.Lifecycle(r.Context(), projection.Key{
		Cloud: r.PathValue("cloud"), ResourceType: r.PathValue("resource_type"), ResourceID: r.PathValue("resource_id"),
	})
	if err != nil {
		return err
	}
	problem.WriteJSON(w, http.StatusOK, l)
	return nil
}

// getSummary serves GET /api/v1/projects/{cloud}/{project_id}/summary with
// from and to (both required): the [usage.ProjectSummary].
func (h *Handler) getSummary(w http.ResponseWriter, r *http.Request) error {
	var ps params
	q := usage.SummaryQuery{Cloud: r.PathValue("cloud"), ProjectID: r.PathValue("project_id"), From: ps.time(r, "from"), To: ps.time(r, "to")}
	if err := ps.err(nil, r, summaryParams...); err != nil {
		return err
	}
	s, err := h.opts.Usage.Summary(r.Context(), q)
	if err != nil {
		return err
	}
	problem.WriteJSON(w, http.StatusOK, s)
	return nil
}

// listResourcesAt serves GET /api/v1/resources?at=…: each resource as its
// events up to the instant make it ([usage.Service.At]).
func (h *Handler) listResourcesAt(w http.ResponseWriter, r *http.Request, f projection.Filter, ps params) error {
	at := ps.time(r, "at")
	if r.URL.Query().Get("at") == "" {
		ps.add("at", event.RuleRequired, "must be an RFC 3339 instant")
	}
	if err := ps.err(nil, r, resourceParams...); err != nil {
		return err
	}
	p, err := h.opts.Usage.At(r.Context(), f, at)
	if err != nil {
		return err
	}
	problem.WriteJSON(w, http.StatusOK, p)
	return nil
}

// usageProblem maps the usage library's own errors.
func usageProblem(err error) (problem.Details, bool) {
	var tl *usage.TooLargeError
	if errors.As(err, &tl) {
		return problem.New(problem.CodeResultTooLarge, "The usage query is too large: "+tl.Reason+"."), true
	}
	return problem.Details{}, false
}
