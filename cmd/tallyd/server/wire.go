package server

import (
	"net/http"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/correlate/correlatehttp"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/ingesthttp"
	"github.com/tallyhq/tally/internal/problem"
)

// apiRoutes builds the library's services over cfg.Store and the routes of
// their HTTP adapters, each with the roles that may call it. The adapters
// hold no rule; this function only decides who may call what.
func apiRoutes(cfg Config) ([]route, error) {
	isvc, err := ingest.New(cfg.Store, ingest.Options{
		RequireSizeSchema: cfg.RequireSizeSchema,
		Observer:          cfg.Metrics.IngestObserver(),
		Now:               cfg.Now,
	})
	if err != nil {
		return nil, err
	}
	ih, err := ingesthttp.New(isvc, ingesthttp.Options{
		CallerFrom:   ingestCaller,
		Logger:       cfg.Logger,
		MaxBodyBytes: cfg.MaxBodyBytes,
	})
	if err != nil {
		return nil, err
	}
	csvc, err := correlate.New(cfg.Store, correlate.Options{Now: cfg.Now})
	if err != nil {
		return nil, err
	}
	ch, err := correlatehttp.New(correlatehttp.Options{
		Service:      csvc,
		CallerFrom:   correlateCaller,
		Logger:       cfg.Logger,
		Observer:     cfg.Metrics,
		MaxBodyBytes: cfg.MaxBodyBytes,
	})
	if err != nil {
		return nil, err
	}
	// correlatehttp routes by itself; each pattern below reaches it only
	// after the roles are checked, and with an organization to scope to.
	events := needOrganization(ch)

	readers := []Role{RoleRead, RoleAdmin}
	return []route{
		{"POST /api/v1/events", []Role{RoleIngest}, http.HandlerFunc(ih.PostEvents)},
		{"GET /api/v1/rejected-events", []Role{RoleAdmin}, http.HandlerFunc(ih.ListRejectedEvents)},
		{"GET /api/v1/resource-types", readers, http.HandlerFunc(ih.ListResourceTypes)},
		{"GET /api/v1/resource-types/{platform}/{resource_type}", readers, http.HandlerFunc(ih.GetResourceType)},
		{"PUT /api/v1/resource-types/{platform}/{resource_type}", []Role{RoleAdmin}, http.HandlerFunc(ih.PutResourceType)},
		{"GET /api/v1/audit", []Role{RoleAdmin}, http.HandlerFunc(ih.ListAudit)},
		{"GET /api/v1/resources", readers, http.HandlerFunc(ih.ListResources)},
		{"GET /api/v1/resources/{cloud}/{resource_type}/{resource_id}", readers, http.HandlerFunc(ih.GetResource)},

		{"POST /api/events", []Role{RoleEvents}, events},
		{"GET /api/events/list", []Role{RoleEvents, RoleRead}, events},
		{"PUT /api/events/{id}/status", []Role{RoleEvents}, events},
		{"DELETE /api/events/{id}", []Role{RoleEvents}, events},
	}, nil
}

var _ correlatehttp.Observer = (*Metrics)(nil)

// ingestCaller is the ingest.Caller of an authenticated request: the
// credential's name (for audit rows) and its (platform, cloud) scope.
func ingestCaller(r *http.Request) (ingest.Caller, bool) {
	c, ok := CredentialFrom(r.Context())
	if !ok || !c.Has(RoleIngest) {
		return ingest.Caller{}, false
	}
	return ingest.Caller{Credential: c.Name, Platform: c.Platform, Cloud: c.Cloud}, true
}

// correlateCaller is the correlate.Caller of an authenticated request: the
// credential's organization and user (event-correlation.md, Scope and
// invariant). A credential with the read role reads its whole organization
// (AllUsers; DECISIONS.md, Who reads correlated events); it still creates
// and changes events as its own (organization, user).
func correlateCaller(r *http.Request) (correlate.Caller, bool) {
	c, ok := CredentialFrom(r.Context())
	if !ok || c.Organization == "" {
		return correlate.Caller{}, false
	}
	return correlate.Caller{Organization: c.Organization, User: c.User, AllUsers: c.Has(RoleRead)}, true
}

// needOrganization answers 403 for a credential with no organization (a
// read credential may have none): correlated events are always scoped to
// one.
func needOrganization(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := CredentialFrom(r.Context()); ok && c.Organization == "" {
			problem.Write(w, problem.New(http.StatusForbidden, "forbidden", "Forbidden",
				"Credential "+quote(c.Name)+" has no organization; correlated events are scoped to one."))
			return
		}
		next.ServeHTTP(w, r)
	})
}
