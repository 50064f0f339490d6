package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/cors"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/ingest/reconcile"
	"github.com/tallyhq/tally/ingest/usage"
	"github.com/tallyhq/tally/internal/httpbody"
	"github.com/tallyhq/tally/internal/problem"
	"github.com/tallyhq/tally/route"
)

// DefaultBodyBudgetBytes is the default of [Options].BodyBudgetBytes: 64 MiB,
// eight bodies of the default cap at once.
const DefaultBodyBudgetBytes = 64 << 20

// DefaultBodyBudgetWait is the default of [Options].BodyBudgetWait: 5 s,
// about two turns of the default budget at the rate measured on a 2-core
// machine (README, Reliability).
const DefaultBodyBudgetWait = 5 * time.Second

// DefaultBodyStallTimeout is the default of [Options].BodyStallTimeout:
// 10 s. A client on a poor link that is still sending pauses far less; one
// that has sent nothing for that long is holding its share of the body
// budget from the others.
const DefaultBodyStallTimeout = 10 * time.Second

// DefaultFeedMaxSubscribers is the default of [Options].FeedMaxSubscribers.
const DefaultFeedMaxSubscribers = 2048

// Store is what the server needs from storage: the store of every area it
// serves, as one database hands them out (store/memstore.DB and
// store/pgstore.DB: Ingest(), Correlate(), and pgstore's Ping).
type Store struct {
	// Ingest serves the ingestion routes. Required.
	Ingest ingest.Store
	// Projection serves the /api/v1/resources routes and the gauge
	// tally_current_resources; the rows Ingest keeps. Required.
	Projection projection.Store
	// Correlate serves the correlation routes. Required.
	Correlate correlate.Store
	// Usage serves GET /api/v1/usage, a resource's /lifecycle, a
	// project's /summary and GET /api/v1/resources?at=, over the events
	// Ingest stores. Nil takes Ingest when it implements usage.Store (the
	// Ingest stores of memstore and pgstore do); otherwise those routes are
	// not served.
	Usage usage.Store
	// Reconcile serves the reconciliation routes (POST
	// /api/v1/clouds/{cloud}/sync, GET /api/v1/sync-runs); the database of
	// Ingest and Projection. Required.
	Reconcile reconcile.Store
	// Ping, when not nil, tells /readyz whether the database answers
	// (pgstore.DB.Ping). Nil: always ready (the in-memory store).
	Ping func(ctx context.Context) error
	// FeedLag, when not nil, reports how long the oldest open writing
	// transaction has held the change feeds back (pgstore.DB.FeedLag),
	// read at each scrape into tally_feed_lag_seconds. Nil: no lag (the
	// in-memory store reads in commit order).
	FeedLag func(ctx context.Context) (time.Duration, error)
	// Leader, when not nil, tells whether this process leads the replicas
	// that share the database (pgstore.DB.Leader): only the leader exports
	// tally_current_resources, which counts the whole database, so that
	// Tally's alert rules (sum by cloud and resource_type) count each
	// resource once however many replicas run. Nil: this process exports
	// it (the in-memory store, one process).
	Leader func(ctx context.Context) (bool, error)
	// Replica, when not nil, serves the read-only routes over lifecycle
	// events from a streaming replica of Ingest's database ([Replica]).
	// It needs Usage (or an Ingest that implements usage.Store).
	Replica *Replica
	// NotifyFeed, when not nil, is called after each commit the change
	// feeds carry, to wake the other replicas' feeds (pgstore.DB.NotifyFeed;
	// tallyd --feed-notify). Nil: other replicas find it by polling.
	NotifyFeed func()
}

// Options configures [New].
type Options struct {
	// Authenticator maps bearer tokens to credentials. Required.
	Authenticator *Authenticator
	// Logger receives one line per request, every internal error, and the
	// library's own logs (an ingest item whose checks panicked). Nil
	// discards, as every Options.Logger of the module does.
	Logger *slog.Logger
	// Metrics holds the Prometheus collectors /metrics serves. Nil creates
	// one on a new private registry.
	Metrics *Metrics
	// MaxBodyBytes caps every request body, as sent and as decoded; a
	// larger one is answered 413. Zero means route.DefaultMaxBodyBytes
	// (8 MiB).
	MaxBodyBytes int64
	// BodyBudgetBytes bounds the decoded request body bytes that all
	// requests hold at once (the hostile-input rules, Memory per request): a body that
	// does not fit waits up to BodyBudgetWait, then is answered 503 with
	// Retry-After: 1. Zero means [DefaultBodyBudgetBytes]; it must be at
	// least MaxBodyBytes.
	BodyBudgetBytes int64
	// BodyBudgetWait is how long a body waits for the budget. Zero means
	// [DefaultBodyBudgetWait]; it must not be negative.
	BodyBudgetWait time.Duration
	// BodyStallTimeout fails a request body from which no byte arrives for
	// that long: it is answered 408 body_timeout (Connection: close) and
	// its share of the body budget is given back at once, so uploads that
	// stop cannot hold the budget until the read timeout. A body that
	// keeps arriving, however slowly, is not cut off by it. Zero means
	// [DefaultBodyStallTimeout]; it must not be negative.
	BodyStallTimeout time.Duration
	// FeedMaxSubscribers bounds the Server-Sent Events subscribers of both
	// change feeds together (GET /api/v1/events/feed with Accept:
	// text/event-stream, GET /api/events/subscribe); one more is answered
	// 503 busy with Retry-After. Each also holds a connection, counted
	// against the connection limit. Zero means
	// [DefaultFeedMaxSubscribers]; it must not be negative.
	FeedMaxSubscribers int
	// FeedHeartbeat is the longest a change-feed stream stays silent: with
	// nothing to send, it writes a comment line. A stream over HTTP/1.x
	// also finds then that its client has gone (it has no reader on its
	// connection), so a subscriber that left holds its place under
	// FeedMaxSubscribers and its connection for at most this long. Zero
	// means 10 s; it must be between 0 and the feeds' longest wait, 30 s
	// (ingest.MaxFeedWait).
	FeedHeartbeat time.Duration
	// RequireSizeSchema refuses an event whose (platform, resource_type)
	// has no size schema instead of accepting it unvalidated
	// (canonical-event.md, Size schemas).
	RequireSizeSchema bool
	// LegacyCreate200 answers a legacy createEvent (neither correlationKey
	// nor idempotencyKey) 200 instead of 201, with Event-Disposition:
	// created, as event-correlation.md (`Event-Disposition`) allows:
	// released Meshery Servers treat every status but 200 from their remote
	// provider as a failure (docs/decisions.md, Legacy create answer). Off by
	// default (correlate.Options.LegacyCreate200).
	LegacyCreate200 bool
	// IdempotencyRetention is how long a bound idempotencyKey of createEvent
	// replays (correlate.Options.IdempotencyRetention;
	// event-correlation.md, Idempotency, names no window). Zero (the
	// default) keeps every key forever; it must not be negative. When set,
	// [Handler.RunIdempotencyPurge] forgets keys bound longer ago.
	IdempotencyRetention time.Duration
	// CORSAllowedOrigins are the origins a browser may call the API from
	// ("*" for any; a single "*" wildcard within an origin is allowed, as
	// in "https://*.example.com"). Empty: no CORS headers at all.
	CORSAllowedOrigins []string
	// Now is the clock of the library. Nil means time.Now.
	Now func() time.Time
}

// Handler is the whole HTTP API of tally. Build it with [New].
type Handler struct {
	correlate   *correlate.Service
	ingest      *ingest.Service
	subscribers *subscribers
	mux         *http.ServeMux
	handler     http.Handler
	routes      []route.Route
	metrics     *Metrics
	draining    *atomic.Bool // set by Drain: /readyz answers 503
}

// Drain marks the server as leaving: from now on /readyz answers 503 busy
// (with Retry-After), so that a load balancer stops routing new requests
// to it, while every other route keeps serving. A graceful shutdown calls
// it, waits for the balancer to notice (tallyd's --shutdown-delay), then
// closes the listener. Safe for concurrent use; it cannot be undone.
func (h *Handler) Drain() { h.draining.Store(true) }

// ServeHTTP serves the API.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.handler.ServeHTTP(w, r) }

// FeedNotify tells both change feeds that another replica committed (a
// post-commit wake-up such as pgstore.DB.ListenFeed delivers), so that
// their waiting readers get it now rather than at the next poll.
func (h *Handler) FeedNotify() {
	h.ingest.FeedNotify()
	h.correlate.FeedNotify()
}

// EndStreams ends every Server-Sent Events stream of the change feeds, and
// every one that starts later at once, so that a graceful shutdown does not
// wait for them (register it with http.Server.RegisterOnShutdown). A
// client resumes on another replica from its Last-Event-ID.
//
// A stream over HTTP/1.x runs on its hijacked connection, after its
// handler has returned (docs/operations.md, Change feeds): the server
// neither counts it among its active connections nor closes it, so only
// EndStreams ends it; call [Handler.WaitStreams] after
// http.Server.Shutdown to wait for those streams before closing the store
// they read.
func (h *Handler) EndStreams() { h.subscribers.end() }

// WaitStreams waits until every change-feed stream has ended and closed
// its connection (after [Handler.EndStreams], each does so at once), or
// ctx ends (the error then says how many are still open).
func (h *Handler) WaitStreams(ctx context.Context) error { return h.subscribers.wait(ctx) }

// Metrics returns the collectors the handler reports to.
func (h *Handler) Metrics() *Metrics { return h.metrics }

// Routes lists every route the handler serves, in registration order: the
// adapters' routes as they list them, then the public ones (/metrics,
// /healthz, /readyz, /openapi.yaml). Each Handler is the route as mounted,
// behind the server's authentication and body checks (but not its logging,
// metrics, panic recovery or CORS, which wrap the whole [Handler]). The
// package documentation, the OpenAPI document and the README's table are
// checked against it.
func (h *Handler) Routes() []route.Route { return slices.Clone(h.routes) }

// PurgeIdempotencyKeys forgets the createEvent idempotency keys bound
// longer ago than Options.IdempotencyRetention and returns how many
// (correlate.Service.PurgeIdempotencyKeys); with no retention it forgets
// nothing and returns 0. Errors are the store's (store.ErrUnavailable when
// the database does not answer). Safe for concurrent use.
func (h *Handler) PurgeIdempotencyKeys(ctx context.Context) (int64, error) {
	return h.correlate.PurgeIdempotencyKeys(ctx)
}

// IdempotencyPurgeInterval is how often [Handler.RunIdempotencyPurge]
// purges for a retention r: r/4, at least a minute and at most an hour, so
// a key outlives its retention by at most a quarter of it (or an hour).
func IdempotencyPurgeInterval(r time.Duration) time.Duration {
	return min(max(r/4, time.Minute), time.Hour)
}

// RunIdempotencyPurge purges expired idempotency keys
// ([Handler.PurgeIdempotencyKeys]) at once and then every
// [IdempotencyPurgeInterval] of the retention, until ctx ends, logging each
// purge that forgot keys (info) or failed (warn; the next one retries).
// With no retention configured it returns at once. log may be nil.
func (h *Handler) RunIdempotencyPurge(ctx context.Context, retention time.Duration, log *slog.Logger) {
	if retention <= 0 {
		return
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	interval := IdempotencyPurgeInterval(retention)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, interval)
		n, err := h.PurgeIdempotencyKeys(pctx)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			log.WarnContext(ctx, "idempotency keys not purged; the next purge retries", "err", err, "next_in", interval)
		case n > 0:
			log.InfoContext(ctx, "idempotency keys purged", "keys", n, "retention", retention)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// New assembles tally's HTTP API on one mux: the ingestion routes
// (ingest/ingesthttp), the correlation routes (correlate/correlatehttp),
// /metrics, /healthz, /readyz and /openapi.yaml (the document of every
// route), behind bearer authentication by role, CORS and request logging.
// A program embedding tally mounts the result on its own mux.
//
// Each adapter's Routes says which roles may call each of its routes (the
// package documentation lists them); /metrics, /healthz, /readyz and
// /openapi.yaml are public.
//
// Request bodies are read by one reader (internal/httpbody): it decodes
// Content-Encoding gzip, deflate and zstd (any other coding: 415 with
// Accept-Encoding), caps the body as sent and as decoded (413), charges the
// body budget (503 with Retry-After), and answers a client's failure to
// send its body 400 or 408 (also when no byte of it arrives for
// BodyStallTimeout), or not at all when the client is gone.
//
// Errors (joined): a missing st.Ingest, st.Projection, st.Correlate, st.Reconcile or
// Authenticator, a negative MaxBodyBytes, BodyBudgetBytes, BodyBudgetWait
// or BodyStallTimeout, a FeedHeartbeat outside 0..30 s, a BodyBudgetBytes below
// MaxBodyBytes, or a library constructor's error.
func New(st Store, opts Options) (*Handler, error) {
	cfg, err := checkOptions(st, opts)
	if err != nil {
		return nil, err
	}
	budget, err := httpbody.NewBudget(cfg.BodyBudgetBytes, cfg.BodyBudgetWait, cfg.BodyStallTimeout)
	if err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Metrics == nil {
		m, err := NewMetrics(nil, MetricsOptions{})
		if err != nil {
			return nil, err
		}
		cfg.Metrics = m
	}
	if err := cfg.Metrics.observeBudget(budget); err != nil {
		return nil, err
	}
	if err := cfg.Metrics.observeFeedLag(st.FeedLag, cfg.Logger); err != nil {
		return nil, err
	}

	warnUncorrelated(cfg.Logger, cfg.Authenticator)
	draining := new(atomic.Bool)
	api, svcs, err := apiRoutes(st, cfg)
	if err != nil {
		return nil, err
	}
	routes := append(api,
		route.Route{Method: http.MethodGet, Path: "/metrics", Handler: cfg.Metrics.Handler()},
		route.Route{Method: http.MethodGet, Path: "/healthz", Handler: http.HandlerFunc(healthz)},
		route.Route{Method: http.MethodGet, Path: "/readyz", Handler: readyz(st, cfg.Logger, draining)},
		route.Route{Method: http.MethodGet, Path: "/openapi.yaml", Handler: http.HandlerFunc(serveOpenAPI)},
	)

	h := &Handler{correlate: svcs.correlate, ingest: svcs.ingest, subscribers: svcs.subscribers, mux: http.NewServeMux(), metrics: cfg.Metrics, draining: draining}
	route.Mount(h.mux, routes, func(rt route.Route) http.Handler {
		if len(rt.Roles) > 0 {
			rt.Handler = require(cfg.Authenticator, cfg.Metrics, rt.Roles, requireJSON(checkBody(cfg.Logger, cfg.MaxBodyBytes, budget.Handler(rt.Handler))))
			if rt.Method != http.MethodGet && rt.Method != http.MethodHead {
				rt.Handler = completeWrites(rt.Handler)
			}
		}
		h.routes = append(h.routes, rt)
		return rt.Handler
	})
	h.mux.Handle("/", notFound(h.mux))

	var hh http.Handler = h.mux
	hh = recoverPanics(cfg.Logger, hh)
	hh = logRequests(cfg.Logger, hh)
	hh = cfg.Metrics.instrument(hh)
	if len(cfg.CORSAllowedOrigins) > 0 {
		hh = cors.New(cors.Options{
			AllowedOrigins: cfg.CORSAllowedOrigins,
			AllowedMethods: []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete},
			// createEvent reads the CloudEvents binary-mode headers and W3C
			// traceparent (docs/decisions.md, CloudEvents HTTP binding).
			AllowedHeaders: []string{"Authorization", "Content-Type", "Idempotency-Key", "Traceparent",
				"Ce-Specversion", "Ce-Id", "Ce-Source", "Ce-Type", "Ce-Time", "Ce-Subject", "Ce-Dataschema"},
			ExposedHeaders: []string{"Event-Disposition", "WWW-Authenticate"},
			MaxAge:         600,
		}).Handler(hh)
	}
	h.handler = hh
	return h, nil
}

// checkOptions returns opts with its body limits defaulted, or every
// refusal New documents, joined.
func checkOptions(st Store, opts Options) (Options, error) {
	cfg := opts
	var errs []error
	if st.Ingest == nil {
		errs = append(errs, errors.New("server: Store.Ingest is required"))
	}
	if st.Projection == nil {
		errs = append(errs, errors.New("server: Store.Projection is required"))
	}
	if st.Reconcile == nil {
		errs = append(errs, errors.New("server: Store.Reconcile is required"))
	}
	if st.Correlate == nil {
		errs = append(errs, errors.New("server: Store.Correlate is required"))
	}
	if r := st.Replica; r != nil && (r.Projection == nil || r.Usage == nil || r.ReplayedAt == nil) {
		errs = append(errs, errors.New("server: Store.Replica needs Projection, Usage and ReplayedAt"))
	}
	if cfg.Authenticator == nil {
		errs = append(errs, errors.New("server: Authenticator is required"))
	}
	if cfg.MaxBodyBytes < 0 {
		errs = append(errs, errors.New("server: MaxBodyBytes is negative"))
	}
	if cfg.BodyBudgetBytes < 0 {
		errs = append(errs, errors.New("server: BodyBudgetBytes is negative"))
	}
	if cfg.BodyBudgetWait < 0 {
		errs = append(errs, errors.New("server: BodyBudgetWait is negative"))
	}
	if cfg.BodyStallTimeout < 0 {
		errs = append(errs, errors.New("server: BodyStallTimeout is negative"))
	}
	if cfg.FeedMaxSubscribers < 0 {
		errs = append(errs, errors.New("server: FeedMaxSubscribers is negative"))
	}
	if cfg.FeedHeartbeat < 0 || cfg.FeedHeartbeat > ingest.MaxFeedWait || cfg.FeedHeartbeat > correlate.MaxFeedWait {
		errs = append(errs, fmt.Errorf("server: FeedHeartbeat (%v) is not between 0 and %v", cfg.FeedHeartbeat, min(ingest.MaxFeedWait, correlate.MaxFeedWait)))
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = route.DefaultMaxBodyBytes
	}
	if cfg.BodyBudgetBytes == 0 {
		cfg.BodyBudgetBytes = max(DefaultBodyBudgetBytes, cfg.MaxBodyBytes)
	}
	if cfg.BodyBudgetWait == 0 {
		cfg.BodyBudgetWait = DefaultBodyBudgetWait
	}
	if cfg.BodyStallTimeout == 0 {
		cfg.BodyStallTimeout = DefaultBodyStallTimeout
	}
	if cfg.BodyBudgetBytes > 0 && cfg.BodyBudgetBytes < cfg.MaxBodyBytes {
		errs = append(errs, fmt.Errorf("server: BodyBudgetBytes (%d) is below MaxBodyBytes (%d): a body of the cap could never be read",
			cfg.BodyBudgetBytes, cfg.MaxBodyBytes))
	}
	return cfg, errors.Join(errs...)
}

// requireJSON answers 415 to a request whose Content-Type names a media
// type that is not JSON ([httpbody.IsJSON]: */json or */*+json, the types
// the CloudEvents JSON event format counts as JSON), before anything reads
// its body. A request without Content-Type is read as JSON (curl-like
// clients and the collectors of the reference implementation send none).
func requireJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ct := r.Header.Get("Content-Type"); ct != "" {
			if !httpbody.IsJSON(ct) {
				problem.Write(w, problem.UnsupportedMediaType())
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// checkBody refuses, before anything reads the body, a declared body over
// max (413) and a content coding the body reader does not decode (415 with
// Accept-Encoding); the adapters read the body with the same reader
// (internal/httpbody), which caps it as sent and as decoded.
func checkBody(log *slog.Logger, max int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := httpbody.Check(r, max); err != nil {
			problem.Fail(w, r, log, "tallyd", err, nil)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// notFound answers a request no route matched: 405 with Allow when the path
// exists for other methods, else 404, both as problem details.
func notFound(mux *http.ServeMux) http.Handler {
	methods := []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		for _, m := range methods {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, pattern := mux.Handler(probe); pattern != "/" && pattern != "" {
				allow = append(allow, m)
				if m == http.MethodGet {
					allow = append(allow, http.MethodHead)
				}
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			problem.Write(w, problem.MethodNotAllowed(r.Method+" is not allowed on "+r.URL.Path+"; allowed: "+strings.Join(allow, ", ")+"."))
			return
		}
		problem.Write(w, problem.NotFound("No route matches "+r.URL.Path+"; GET /openapi.yaml lists the routes."))
	})
}

func healthz(w http.ResponseWriter, _ *http.Request) {
	problem.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 when the store is reachable (a store without Ping
// always is), else 503; 503 busy once the server drains.
func readyz(st Store, log *slog.Logger, draining *atomic.Bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if draining.Load() {
			w.Header().Set("Retry-After", strconv.Itoa(problem.RetryAfterSeconds))
			problem.Write(w, problem.New(problem.CodeBusy, "The server is shutting down; send requests to another replica."))
			return
		}
		if st.Ping != nil {
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
			defer cancel()
			if err := st.Ping(ctx); err != nil {
				// The same answer as every route whose store is unavailable.
				log.ErrorContext(r.Context(), "readyz: store unavailable", "err", err)
				problem.WriteUnavailable(w)
				return
			}
		}
		problem.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
}

// completeWrites runs a write route (POST, PUT, DELETE) on a context that
// its client cannot cancel, keeping the request's values. net/http
// cancels a request's context when it reads EOF on the connection, which
// a client that half-closes its side after the body (shutdown(SHUT_WR))
// causes while it still waits for the answer; the store call then failed
// and nothing was stored. Once the body is read, the server completes the
// write and answers what it did (docs/decisions.md, A 2xx answer); the store's
// own timeouts (statement, acquire) bound the work, and an answer nobody
// reads is dropped by the connection. A body the client does not finish
// sending still fails as the connection does ([httpbody.Read]).
func completeWrites(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithoutCancel(r.Context())))
	})
}

// abortedStatus is the status the access log and the request metric
// record for a request answered with nothing: its connection was closed
// (panic(http.ErrAbortHandler)) because its client was gone.
const abortedStatus = "aborted"

// recoverPanics answers 500 for a handler that panicked (unless it had
// started its answer) and logs the panic. A handler that returns without
// writing anything never gets net/http's implicit 200 (docs/decisions.md, A 2xx
// answer: a request the server did not complete is never answered 2xx):
// when its client is gone (the request's context is cancelled) the
// connection is aborted, with no answer; otherwise it is a bug, logged and
// answered 500.
func recoverPanics(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.ErrorContext(r.Context(), "handler panicked", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v))
				if sw.status == 0 {
					problem.Write(sw, problem.Internal())
				}
			}
		}()
		next.ServeHTTP(sw, r)
		if sw.status == 0 {
			if r.Context().Err() != nil {
				log.InfoContext(r.Context(), "request: the client went away; connection closed without an answer", "method", r.Method, "path", r.URL.Path)
				panic(http.ErrAbortHandler)
			}
			log.ErrorContext(r.Context(), "handler wrote no answer", "method", r.Method, "path", r.URL.Path)
			problem.Write(sw, problem.Internal())
		}
	})
}

// logRequests logs one line per request: method, route pattern, path,
// status (the status sent, a number; 0 with aborted=true for a connection
// closed without an answer; 200 with hijacked=true for a change-feed
// stream that took its connection over, logged when it starts), duration, and the name of the credential that made the call (""
// when none was presented or it was unknown; never the token); at debug level for the probes and /metrics, info
// otherwise.
func logRequests(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		note := &logNote{}
		inner := r.WithContext(context.WithValue(r.Context(), logNoteKey{}, note))
		status, aborted := 0, true
		defer func() {
			// The mux sets Pattern on the request it serves, which is inner;
			// the middleware outside this one (metrics) reads it from r.
			r.Pattern = inner.Pattern
			if aborted {
				// The handler did not return: only http.ErrAbortHandler
				// gets here (recoverPanics answered every other panic).
				v := recover()
				if v == nil {
					return
				}
				defer panic(v)
				status = sw.status // cut short after its status line, or 0
			}
			level := slog.LevelInfo
			switch r.Pattern {
			case "GET /healthz", "GET /readyz", "GET /metrics":
				level = slog.LevelDebug
			}
			attrs := []any{"method", r.Method, "route", r.Pattern, "path", r.URL.Path,
				"status", status, "duration", time.Since(start), "credential", note.credential}
			if aborted {
				attrs = append(attrs, "aborted", true)
			}
			if sw.hijacked {
				// A change-feed stream on its own connection: status 200
				// and the time to its start; it runs on after this line.
				attrs = append(attrs, "hijacked", true)
			}
			log.Log(r.Context(), level, "request", attrs...)
		}()
		next.ServeHTTP(sw, inner)
		status, aborted = sw.code(), false
	})
}

// warnUncorrelated warns once, at start, for each events credential with no
// user: correlation is scoped to (organization, user), so every create it
// makes is recorded as sent and never correlates (correlate.Service.Create).
func warnUncorrelated(log *slog.Logger, a *Authenticator) {
	for _, c := range a.Credentials() {
		if c.Has(route.RoleEvents) && c.User == "" {
			log.Warn("credential has the events role but no user: its creates never correlate (each is recorded as sent); give it a \"user\" to correlate",
				"credential", c.Name, "organization", c.Organization)
		}
	}
}
