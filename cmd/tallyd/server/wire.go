package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/correlate/correlatehttp"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/ingesthttp"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/ingest/reconcile"
	"github.com/tallyhq/tally/ingest/usage"
	"github.com/tallyhq/tally/internal/problem"
	"github.com/tallyhq/tally/route"
)

// services are the library's services a Handler keeps.
type services struct {
	ingest      *ingest.Service
	correlate   *correlate.Service
	subscribers *subscribers
}

// apiRoutes builds the library's services over st's stores and returns the
// routes of their HTTP adapters, as the adapters list them (with the roles
// that may call each), and the correlation service. The adapters hold no rule; the server only mounts
// what they list.
func apiRoutes(st Store, cfg Options) ([]route.Route, services, error) {
	isvc, err := ingest.New(st.Ingest, ingest.Options{
		RequireSizeSchema: cfg.RequireSizeSchema,
		Observer:          cfg.Metrics.IngestObserver(),
		Now:               cfg.Now,
		Logger:            cfg.Logger,
		Feed:              ingest.FeedOptions{Committed: st.NotifyFeed},
	})
	if err != nil {
		return nil, services{}, err
	}
	pst := st.Projection
	var reads *replicaReads
	if st.Replica != nil {
		reads = &replicaReads{Replica: *st.Replica, fallbacks: cfg.Metrics.readFallbacks}
		pst = replicaProjection{Store: st.Projection, reads: reads}
	}
	psvc, err := projection.New(pst, isvc)
	if err != nil {
		return nil, services{}, err
	}
	cfg.Metrics.countResourcesWith(psvc.Count, st.Leader)
	subs := newSubscribers(cfg.FeedMaxSubscribers, cfg.Metrics)
	var usvc *usage.Service
	ust := st.Usage
	if ust == nil {
		ust, _ = st.Ingest.(usage.Store)
	}
	if ust != nil && reads != nil {
		ust = replicaUsage{primary: ust, reads: reads}
	}
	if ust != nil {
		if usvc, err = usage.New(ust); err != nil {
			return nil, services{}, err
		}
	}
	rsvc, err := reconcile.New(isvc, st.Projection, st.Reconcile, reconcile.Options{Observer: cfg.Metrics.ReconcileObserver(), Now: cfg.Now})
	if err != nil {
		return nil, services{}, err
	}
	ih, err := ingesthttp.New(isvc, psvc, ingesthttp.Options{
		Reconcile:      rsvc,
		ReconcilerFrom: reconcilerCaller,
		CallerFrom:     ingestCaller,
		Logger:         cfg.Logger,
		MaxBodyBytes:   cfg.MaxBodyBytes,
		Subscribers:    subs,
		Stream:         ingesthttp.StreamOptions{Hijack: true, Heartbeat: cfg.FeedHeartbeat},
		Usage:          usvc,
		Admit:          cfg.Authenticator.admitItems(cfg.Metrics),
	})
	if err != nil {
		return nil, services{}, err
	}
	csvc, err := correlate.New(st.Correlate, correlate.Options{
		Now: cfg.Now, Observer: cfg.Metrics.CorrelateObserver(), LegacyCreate200: cfg.LegacyCreate200,
		IdempotencyRetention: cfg.IdempotencyRetention, Feed: correlate.FeedOptions{Committed: st.NotifyFeed},
	})
	if err != nil {
		return nil, services{}, err
	}
	ch, err := correlatehttp.New(csvc, correlatehttp.Options{
		CallerFrom:   correlateCaller,
		Logger:       cfg.Logger,
		MaxBodyBytes: cfg.MaxBodyBytes,
		Subscribers:  subs,
		Stream:       correlatehttp.StreamOptions{Hijack: true, Heartbeat: cfg.FeedHeartbeat},
	})
	if err != nil {
		return nil, services{}, err
	}
	events := ch.Routes()
	for i := range events {
		// Correlated events are always scoped to an organization, which a
		// read credential may lack.
		events[i].Handler = needOrganization(events[i].Handler)
	}
	lifecycle := ih.Routes()
	if reads != nil {
		for i, r := range lifecycle {
			if replicaRoutes[r.Pattern()] {
				lifecycle[i].Handler = withAsOf(r.Handler)
			}
		}
	}
	return slices.Concat(lifecycle, events), services{isvc, csvc, subs}, nil
}

// ingestCaller is the ingest.Caller of an authenticated request: the
// credential's name (for audit rows) and its (platform, cloud) scope.
func ingestCaller(r *http.Request) (ingest.Caller, bool) {
	c, ok := CredentialFrom(r.Context())
	if !ok || !c.Has(route.RoleIngest) {
		return ingest.Caller{}, false
	}
	return ingest.Caller{Credential: c.Name, Platform: c.Platform, Cloud: c.Cloud}, true
}

// reconcilerCaller is the ingest.Caller of an authenticated request to
// POST /api/v1/clouds/{cloud}/sync: the credential's name and its
// (platform, cloud) scope, which a reconcile credential always has.
func reconcilerCaller(r *http.Request) (ingest.Caller, bool) {
	c, ok := CredentialFrom(r.Context())
	if !ok || !c.Has(route.RoleReconcile) {
		return ingest.Caller{}, false
	}
	return ingest.Caller{Credential: c.Name, Platform: c.Platform, Cloud: c.Cloud}, true
}

// correlateCaller is the correlate.Caller of an authenticated request: the
// credential's organization and user (event-correlation.md, Scope and
// invariant). A credential with the read role reads its whole organization
// (AllUsers; docs/decisions.md, Who reads correlated events); it still creates
// and changes events as its own (organization, user).
func correlateCaller(r *http.Request) (correlate.Caller, bool) {
	c, ok := CredentialFrom(r.Context())
	if !ok || c.Organization == "" {
		return correlate.Caller{}, false
	}
	return correlate.Caller{Organization: c.Organization, User: c.User, AllUsers: c.Has(route.RoleRead)}, true
}

// needOrganization answers 403 for a credential with no organization (a
// read credential may have none): correlated events are always scoped to
// one.
func needOrganization(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := CredentialFrom(r.Context()); ok && c.Organization == "" {
			problem.Write(w, problem.Forbidden("Credential "+quote(c.Name)+" has no organization; correlated events are scoped to one."))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// subscribers is the route.Subscribers of both change feeds: one limit
// over both (Options.FeedMaxSubscribers) and their metrics. Its count is
// also how [Handler.WaitStreams] knows that every stream has ended: a
// stream on a hijacked connection leaves after closing it.
type subscribers struct {
	max  int64
	n    atomic.Int64
	m    *Metrics
	stop context.Context    // done after end
	end  context.CancelFunc // ends every stream, and every later one at once
}

func newSubscribers(max int, m *Metrics) *subscribers {
	if max == 0 {
		max = DefaultFeedMaxSubscribers
	}
	stop, end := context.WithCancel(context.Background())
	return &subscribers{max: int64(max), m: m, stop: stop, end: end}
}

func (s *subscribers) Admit(feed string) (context.Context, bool) {
	if s.n.Add(1) > s.max {
		s.n.Add(-1)
		return nil, false
	}
	s.m.feedSubscribers.WithLabelValues(feed).Inc()
	return s.stop, true
}

func (s *subscribers) Leave(feed string, reset bool) {
	s.n.Add(-1)
	s.m.feedSubscribers.WithLabelValues(feed).Dec()
	if reset {
		s.m.feedResets.WithLabelValues(feed).Inc()
	}
}

// wait waits until no stream is admitted, or ctx ends.
func (s *subscribers) wait(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for s.n.Load() > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("server: %d feed streams still open: %w", s.n.Load(), ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

func (s *subscribers) Delivered(feed string, n int) {
	s.m.feedItems.WithLabelValues(feed).Add(float64(n))
}
