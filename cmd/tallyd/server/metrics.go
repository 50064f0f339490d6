package server

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/reconcile"
	"github.com/tallyhq/tally/internal/httpbody"
)

// MaxLabelValues is how many distinct values each metric label whose
// values come from input keeps (the hostile-input rules, Metric labels from input): 100
// per label (platform, resource_type and cloud), the first seen by the
// process; any further value is counted under [OtherLabelValue]. A single
// POST of 300 resource types thus adds at most 100 series, ever.
const MaxLabelValues = 100

// OtherLabelValue is the label value that stands for every value beyond
// [MaxLabelValues].
const OtherLabelValue = "other"

// MetricsMaxRequestsInFlight and MetricsTimeout bound GET /metrics
// (promhttp.HandlerOpts): at most 4 scrapes at once (a further one is
// answered 503), each cut off after 10 s (Prometheus's default scrape
// timeout; answered 503).
const (
	MetricsMaxRequestsInFlight = 4
	MetricsTimeout             = 10 * time.Second
)

// boundedLabel maps input to at most max distinct label values.
type boundedLabel struct {
	mu   sync.Mutex
	seen map[string]struct{}
	max  int
}

func newBoundedLabel(max int) *boundedLabel {
	return &boundedLabel{seen: map[string]struct{}{}, max: max}
}

// value is v when v is one of the first max distinct values seen (or one
// more fits), else OtherLabelValue. Bytes of v that are not UTF-8 are
// replaced by U+FFFD first: Prometheus refuses (panics on) such a label
// value, and an embedder may count a run whose cloud it refused for them.
func (b *boundedLabel) value(v string) string {
	v = strings.ToValidUTF8(v, "\uFFFD")
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.seen[v]; ok {
		return v
	}
	if len(b.seen) >= b.max {
		return OtherLabelValue
	}
	b.seen[v] = struct{}{}
	return v
}

// Metrics holds tally's Prometheus collectors, registered on a private
// registry (never the global one), so that several handlers may live in one
// process and an embedding program decides what it exposes. Safe for
// concurrent use.
type Metrics struct {
	registry *prometheus.Registry

	unvalidatedSize *prometheus.CounterVec
	eventsIngested  *prometheus.CounterVec
	eventsRejected  *prometheus.CounterVec
	resources       *resourcesGauge
	ingested        prometheus.Counter
	duplicates      prometheus.Counter
	rejected        *prometheus.CounterVec
	dispositions    *prometheus.CounterVec
	feedSubscribers *prometheus.GaugeVec
	feedItems       *prometheus.CounterVec
	feedResets      *prometheus.CounterVec
	replays         *prometheus.CounterVec
	httpDuration    *prometheus.HistogramVec
	credReloads     *prometheus.CounterVec
	syncRuns        *prometheus.CounterVec
	syncReconciled  *prometheus.CounterVec
	syncErrors      *prometheus.CounterVec
	readFallbacks   *prometheus.CounterVec
	rateLimited     *prometheus.CounterVec

	// Labels whose values come from input, each bounded.
	platformLabel, resourceTypeLabel, cloudLabel, stateLabel *boundedLabel
}

// MetricsOptions configures [NewMetrics].
type MetricsOptions struct {
	// Build labels the gauge tally_build_info; zero: [ReadBuild]("").
	Build Build
}

// NewMetrics returns the collectors registered on reg, and the Go runtime
// and process collectors with them. A nil reg gets a new private registry.
// Errors: a collector already registered on reg.
func NewMetrics(reg *prometheus.Registry, opts MetricsOptions) (*Metrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	if opts.Build == (Build{}) {
		opts.Build = ReadBuild("")
	}
	m := &Metrics{
		registry:          reg,
		platformLabel:     newBoundedLabel(MaxLabelValues),
		resourceTypeLabel: newBoundedLabel(MaxLabelValues),
		cloudLabel:        newBoundedLabel(MaxLabelValues),
		stateLabel:        newBoundedLabel(MaxLabelValues),
		// The existing-clients rules, /metrics: the series Tally's published alert rules
		// query (TallyCloudEventsSilent, TallyEventsRejected).
		eventsIngested: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_events_ingested_total",
			Help: "Events newly stored, by cloud (an ingest credential's scope; 100 distinct values, then other) and pipeline (source: collector or reconciliation).",
		}, []string{"cloud", "source"}),
		eventsRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_events_rejected_total",
			Help: "Items refused, by the cloud of the sending credential's scope (100 distinct values, then other; empty for a caller without scope) and reason kind: schema, size_schema or scope.",
		}, []string{"cloud", "reason"}),
		resources: newResourcesGauge(),
		// canonical-event.md, Size schemas: "the server counts such events
		// in tally_ingest_unvalidated_size_total{platform,resource_type}".
		unvalidatedSize: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_ingest_unvalidated_size_total",
			Help: "Accepted events whose payload.size was not validated because no size schema is registered for their (platform, resource_type); each label keeps 100 distinct values, then other.",
		}, []string{"platform", "resource_type"}),
		ingested: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tally_ingest_events_ingested_total",
			Help: "Canonical events newly stored.",
		}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tally_ingest_events_duplicate_total",
			Help: "Items acknowledged as duplicates: their (event_id, timestamp) was stored already or came earlier in the batch.",
		}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_ingest_events_rejected_total",
			Help: "Items refused, by reason kind: schema, size_schema or scope (the text of the reason before its first colon).",
		}, []string{"reason"}),
		dispositions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_correlate_dispositions_total",
			Help: "createEvent answers by disposition: created, incremented, resolved, replayed.",
		}, []string{"disposition"}),
		replays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_projection_replays_total",
			Help: "Late events (older than their resource's last folded event) that made the projection replay the resource's history, by cloud (100 distinct values, then other).",
		}, []string{"cloud"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tally_http_request_duration_seconds",
			Help:    "HTTP request durations by route pattern (method and path, as registered) and status code sent (aborted: the connection was closed without an answer).",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "code"}),
		feedSubscribers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tally_feed_subscribers",
			Help: "Server-Sent Events subscribers now streaming, by feed: lifecycle (GET /api/v1/events/feed) or correlated (GET /api/events/subscribe).",
		}, []string{"feed"}),
		feedItems: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_feed_items_delivered_total",
			Help: "Items sent to Server-Sent Events subscribers, by feed.",
		}, []string{"feed"}),
		feedResets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_feed_resets_total",
			Help: "Streams ended with event: reset because their subscriber read too slowly, by feed.",
		}, []string{"feed"}),
		credReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_credentials_reloads_total",
			Help: "Reloads of the credentials file (SIGHUP), by result: success (the new set is in use) or failure (the file was refused; the old set stays).",
		}, []string{"result"}),
		// The series of Tally's sync (B42Labs/tally, "How reconciliation
		// observes a cloud"), which its alert rules read.
		syncRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_sync_runs_total",
			Help: "Reconciliation runs, by cloud (100 distinct values, then other) and status: completed, partial (some synthetic events refused), failed (nothing written) or invalid (the observation was refused).",
		}, []string{"cloud", "status"}),
		syncReconciled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_sync_resources_reconciled_total",
			Help: "Resources a reconciliation run corrected, by cloud (100 distinct values, then other) and action: created, updated or deleted (a recorded run reports all three, zeros included; unchanged and skipped resources are in the run's record only).",
		}, []string{"cloud", "action"}),
		syncErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_sync_errors_total",
			Help: "Errors of reconciliation runs, by cloud (100 distinct values, then other): each refused synthetic event, and one per failed or invalid run.",
		}, []string{"cloud"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_rate_limited_total",
			Help: "Requests answered 429 rate_limited, by credential (the credentials file's names) and limit: requests or items (its rate_limit).",
		}, []string{"credential", "limit"}),
		readFallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_read_replica_fallbacks_total",
			Help: "Reads of the read-only routes that the primary answered instead of the read replica (--read-database-url), by reason: unavailable (the replica did not answer) or behind (it has not replayed the as_of asked for).",
		}, []string{"reason"}),
	}
	m.credReloads.WithLabelValues("success")
	m.readFallbacks.WithLabelValues("unavailable")
	m.readFallbacks.WithLabelValues("behind")
	m.credReloads.WithLabelValues("failure")
	for _, k := range ingest.Kinds() {
		m.rejected.WithLabelValues(string(k)) // every kind shows, at 0
	}
	for _, d := range correlate.Dispositions() {
		m.dispositions.WithLabelValues(string(d))
	}
	for _, c := range []prometheus.Collector{
		m.unvalidatedSize, m.eventsIngested, m.eventsRejected, m.resources, m.ingested, m.duplicates, m.rejected, m.dispositions, m.feedSubscribers, m.feedItems, m.feedResets, m.replays, m.httpDuration, m.credReloads,
		m.syncRuns, m.syncReconciled, m.syncErrors, m.readFallbacks, m.rateLimited, buildInfoGauge(opts.Build),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// IngestObserver returns m as the observer of the ingestion pipeline
// (ingest.Options.Observer), projection replays included.
func (m *Metrics) IngestObserver() ingest.Observer { return ingestObserver{m} }

// CorrelateObserver returns m as the observer of createEvent
// (correlate.Options.Observer): it counts
// tally_correlate_dispositions_total{disposition}.
func (m *Metrics) CorrelateObserver() correlate.Observer { return correlateObserver{m} }

// ingestObserver adapts [Metrics] to ingest.Observer.
type ingestObserver struct{ m *Metrics }

func (o ingestObserver) Ingested(cloud string, source event.Source, n int) {
	o.m.ingested.Add(float64(n))
	o.m.eventsIngested.WithLabelValues(o.m.cloudLabel.value(cloud), string(source)).Add(float64(n))
}

func (o ingestObserver) Duplicates(n int) { o.m.duplicates.Add(float64(n)) }

func (o ingestObserver) Rejected(cloud string, kind ingest.Kind, n int) {
	o.m.rejected.WithLabelValues(string(kind)).Add(float64(n))
	o.m.eventsRejected.WithLabelValues(o.m.cloudLabel.value(cloud), string(kind)).Add(float64(n))
}
func (o ingestObserver) UnvalidatedSize(platform, resourceType string, n int) {
	o.m.unvalidatedSize.WithLabelValues(o.m.platformLabel.value(platform), o.m.resourceTypeLabel.value(resourceType)).Add(float64(n))
}

func (o ingestObserver) ProjectionReplays(cloud string, n int) {
	o.m.replays.WithLabelValues(o.m.cloudLabel.value(cloud)).Add(float64(n))
}

// ReconcileObserver returns m as the observer of reconciliation runs
// (reconcile.Options.Observer): tally_sync_runs_total{cloud,status},
// tally_sync_resources_reconciled_total{cloud,action} and
// tally_sync_errors_total{cloud}.
func (m *Metrics) ReconcileObserver() reconcile.Observer { return reconcileObserver{m} }

// reconcileObserver adapts [Metrics] to reconcile.Observer.
type reconcileObserver struct{ m *Metrics }

func (o reconcileObserver) Run(cloud string, status ingest.SyncStatus) {
	o.m.syncRuns.WithLabelValues(o.m.cloudLabel.value(cloud), string(status)).Inc()
}

func (o reconcileObserver) Reconciled(cloud string, action reconcile.Action, n int) {
	o.m.syncReconciled.WithLabelValues(o.m.cloudLabel.value(cloud), string(action)).Add(float64(n))
}

func (o reconcileObserver) Errors(cloud string, n int) {
	o.m.syncErrors.WithLabelValues(o.m.cloudLabel.value(cloud)).Add(float64(n))
}

// correlateObserver adapts [Metrics] to correlate.Observer.
type correlateObserver struct{ m *Metrics }

func (o correlateObserver) Disposition(d correlate.Disposition) {
	o.m.dispositions.WithLabelValues(string(d)).Inc()
}

// ObserveConns registers gauges of l on m's registry:
// tally_http_connections_open, tally_http_connections_max and the counter
// tally_http_connections_shed_total (idle connections closed at the cap).
// Errors: l's collectors are registered already.
func (m *Metrics) ObserveConns(l *ConnLimiter) error {
	return registerAll(m.registry,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tally_http_connections_open",
			Help: "Connections open now.",
		}, func() float64 { return float64(l.Open()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tally_http_connections_max",
			Help: "The cap on open connections; at it, the longest-idle connection is closed for a new one.",
		}, func() float64 { return float64(l.Max()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tally_http_connections_shed_total",
			Help: "Idle connections closed to make room for new ones at the cap.",
		}, func() float64 { return float64(l.Shed()) }),
	)
}

// CreatePipelines is what the primary database's pipelined creates
// counted so far (pgstore.DB.PipelineStats), as
// [Metrics.ObserveCreatePipelines] exports it: the pipelines sent, the
// creates they carried, the pipelines rerun statement by statement
// after their one transaction failed, and the creates that bypassed the
// pipelines while every one had stalled.
type CreatePipelines struct {
	Pipelines, Creates, Reruns, Bypasses int64
}

// ObserveCreatePipelines registers the counters
// tally_correlate_pipelines_total, tally_correlate_pipelined_creates_total,
// tally_correlate_pipeline_reruns_total and
// tally_correlate_pipeline_bypasses_total over read, which is called at
// every scrape and must not block (docs/operations.md, Metrics). Errors:
// registered already.
func (m *Metrics) ObserveCreatePipelines(read func() CreatePipelines) error {
	return registerAll(m.registry,
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tally_correlate_pipelines_total",
			Help: "Pipelines of creates without an idempotencyKey sent to the database, each one write and one transaction.",
		}, func() float64 { return float64(read().Pipelines) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tally_correlate_pipelined_creates_total",
			Help: "Creates those pipelines carried (divided by the pipelines: their mean length).",
		}, func() float64 { return float64(read().Creates) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tally_correlate_pipeline_reruns_total",
			Help: "Pipelines whose one transaction failed (a statement's error, a deadlock, a failed commit), their creates then run one by one.",
		}, func() float64 { return float64(read().Reruns) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tally_correlate_pipeline_bypasses_total",
			Help: "Creates without an idempotencyKey run alone on a connection of their own because every pipeline that may run at once had stalled (waiting on a lock, or a slow database).",
		}, func() float64 { return float64(read().Bypasses) }),
	)
}

// EventStorage is the state of the events table that
// [Metrics.ObserveEventStorage] reports (pgstore.DB.EventStorage).
type EventStorage struct {
	// Partitions counts the partitions of events.
	Partitions int
	// Horizon is the retention horizon, OldestEvent the oldest stored
	// event's timestamp; zero when none.
	Horizon, OldestEvent time.Time
	// PartitionsDropped and EventsDropped count what retention dropped.
	PartitionsDropped, EventsDropped int64
}

// ObserveEventStorage registers, over read (called at most once a second,
// within one second; a failed read reports the last values and is logged
// at debug level): the gauges tally_events_partitions,
// tally_events_horizon_timestamp_seconds and
// tally_events_oldest_timestamp_seconds (Unix seconds; 0 when none), and
// the counters tally_retention_partitions_dropped_total and
// tally_retention_events_dropped_total (docs/operations.md, Retention).
// Errors: registered already.
func (m *Metrics) ObserveEventStorage(read func(context.Context) (EventStorage, error), log *slog.Logger) error {
	var (
		mu   sync.Mutex
		last EventStorage
		at   time.Time
	)
	get := func() EventStorage {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(at) < time.Second {
			return last
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := read(ctx)
		if err != nil {
			if log != nil {
				log.Debug("event storage", "err", err)
			}
			return last
		}
		last, at = st, time.Now()
		return st
	}
	unix := func(t time.Time) float64 {
		if t.IsZero() {
			return 0
		}
		return float64(t.UnixMicro()) / 1e6
	}
	return registerAll(m.registry,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tally_events_partitions",
			Help: "Partitions of the events table (one per UTC month, and events_legacy on a converted database).",
		}, func() float64 { return float64(get().Partitions) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tally_events_horizon_timestamp_seconds",
			Help: "The retention horizon (Unix seconds): events before it are no longer kept and are refused; 0 when none.",
		}, func() float64 { return unix(get().Horizon) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tally_events_oldest_timestamp_seconds",
			Help: "Timestamp of the oldest stored event (Unix seconds); 0 when none.",
		}, func() float64 { return unix(get().OldestEvent) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tally_retention_partitions_dropped_total",
			Help: "Partitions of events dropped by retention, by every process.",
		}, func() float64 { return float64(get().PartitionsDropped) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tally_retention_events_dropped_total",
			Help: "Events dropped with those partitions.",
		}, func() float64 { return float64(get().EventsDropped) }),
	)
}

// observeBudget registers the gauges of the request body budget and the
// counter of the bodies it failed for stalling.
// observeFeedLag registers tally_feed_lag_seconds over lag (nil: always
// 0), read at each scrape within one second; a failed read reports the
// last value and is logged at debug level.
func (m *Metrics) observeFeedLag(lag func(context.Context) (time.Duration, error), log *slog.Logger) error {
	var last atomic.Int64
	return registerAll(m.registry, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tally_feed_lag_seconds",
		Help: "How long the oldest open writing transaction of the database has held the change feeds back (0 in memory).",
	}, func() float64 {
		if lag == nil {
			return 0
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		d, err := lag(ctx)
		if err != nil {
			if log != nil {
				log.Debug("feed lag", "err", err)
			}
			return time.Duration(last.Load()).Seconds()
		}
		last.Store(int64(d))
		return d.Seconds()
	}))
}

func (m *Metrics) observeBudget(b *httpbody.Budget) error {
	return registerAll(m.registry,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tally_http_body_budget_bytes",
			Help: "The budget of request body bytes held at once by all requests.",
		}, func() float64 { return float64(b.Size()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tally_http_body_budget_in_use_bytes",
			Help: "Request body bytes held now.",
		}, func() float64 { return float64(b.InUse()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tally_http_body_stalled_total",
			Help: "Request bodies answered 408 because no byte of theirs arrived for the body stall timeout.",
		}, func() float64 { return float64(b.Stalled()) }),
	)
}

func registerAll(reg *prometheus.Registry, cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// CredentialsReloaded counts one reload of the credentials file in
// tally_credentials_reloads_total{result}: result "success" when ok, else
// "failure".
func (m *Metrics) CredentialsReloaded(ok bool) {
	result := "failure"
	if ok {
		result = "success"
	}
	m.credReloads.WithLabelValues(result).Inc()
}

// Registry returns the registry the collectors are registered on.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Handler serves the registry in the Prometheus exposition format, at
// most [MetricsMaxRequestsInFlight] scrapes at once, each within
// [MetricsTimeout] (503 otherwise).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{
		Registry:            m.registry,
		MaxRequestsInFlight: MetricsMaxRequestsInFlight,
		Timeout:             MetricsTimeout,
	})
}

// instrument observes the duration of every request by the pattern the mux
// matched (r.Pattern, set in place by http.ServeMux) and the status written
// (code "aborted" for a connection closed without an answer, which a client
// that went away gets).
// Requests that matched no route share the route label "unmatched", so
// scanners cannot inflate the label set.
func (m *Metrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		returned := false
		defer func() {
			code := strconv.Itoa(sw.code())
			if !returned {
				// Only http.ErrAbortHandler gets here: the connection is
				// closed, with no answer when nothing was written.
				v := recover()
				if v == nil {
					return
				}
				defer panic(v)
				if sw.status == 0 {
					code = abortedStatus
				}
			}
			route := r.Pattern
			if route == "" || route == "/" {
				route = "unmatched"
			}
			m.httpDuration.WithLabelValues(route, code).Observe(time.Since(start).Seconds())
		}()
		next.ServeHTTP(sw, r)
		returned = true
	})
}

// statusWriter records the status a handler writes.
type statusWriter struct {
	http.ResponseWriter
	status   int
	hijacked bool // the handler took the connection over
}

// Hijack takes the connection over (a change-feed stream over HTTP/1.x,
// which writes its 200 head itself and runs on after its handler returns)
// and records the answer as 200: the access log and the request metric
// count the stream as answered, its duration up to the hijack. The
// error, when the server's writer cannot be hijacked (HTTP/2), is
// http.ErrNotSupported as http.ResponseController reports it.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		if w.status == 0 {
			w.status = http.StatusOK
		}
		w.hijacked = true
	}
	return c, brw, err
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// PoolStats is one database connection pool's statistics at a scrape
// (pgxpool.Stat), as [Metrics.ObservePools] exports them.
type PoolStats struct {
	// Acquired, Idle and Total are the connections in use, idle and open
	// now (Total includes those being made); Max is the pool's cap.
	Acquired, Idle, Total, Max int32
	// Acquires counts the connections taken from the pool; AcquireDuration
	// is the time all of them waited together.
	Acquires        int64
	AcquireDuration time.Duration
	// EmptyAcquires counts the acquires that found no idle connection and
	// waited for one (or for a new one to be made); EmptyAcquireWait is
	// their wait together. CanceledAcquires counts the acquires whose
	// context ended first (the acquire timeout among them).
	EmptyAcquires    int64
	EmptyAcquireWait time.Duration
	CanceledAcquires int64
	// NewConns counts the connections made; LifetimeDestroyed and
	// IdleDestroyed those closed for their age or for idling.
	NewConns, LifetimeDestroyed, IdleDestroyed int64
}

// ObservePools registers the tally_db_pool_* series over pools, keyed by
// the value of their pool label (tallyd: primary, replica, probe); each
// read is called at every scrape and must not block. Errors: registered
// already.
func (m *Metrics) ObservePools(pools map[string]func() PoolStats) error {
	return registerAll(m.registry, poolCollector(pools))
}

// poolCollector is the collector of [Metrics.ObservePools].
type poolCollector map[string]func() PoolStats

var poolSeries = []struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(PoolStats) float64
}{
	{poolDesc("acquired_connections", "Connections of the pool in use now."), prometheus.GaugeValue, func(s PoolStats) float64 { return float64(s.Acquired) }},
	{poolDesc("idle_connections", "Idle connections of the pool now."), prometheus.GaugeValue, func(s PoolStats) float64 { return float64(s.Idle) }},
	{poolDesc("total_connections", "Connections of the pool open or being made now."), prometheus.GaugeValue, func(s PoolStats) float64 { return float64(s.Total) }},
	{poolDesc("max_connections", "The pool's cap on connections (--db-max-conns; 1 for the probe)."), prometheus.GaugeValue, func(s PoolStats) float64 { return float64(s.Max) }},
	{poolDesc("acquires_total", "Connections taken from the pool."), prometheus.CounterValue, func(s PoolStats) float64 { return float64(s.Acquires) }},
	{poolDesc("acquire_duration_seconds_total", "Time spent taking connections from the pool, all acquires together."), prometheus.CounterValue, func(s PoolStats) float64 { return s.AcquireDuration.Seconds() }},
	{poolDesc("empty_acquires_total", "Acquires that found no idle connection and waited (a pool too small, or connections held long)."), prometheus.CounterValue, func(s PoolStats) float64 { return float64(s.EmptyAcquires) }},
	{poolDesc("empty_acquire_wait_seconds_total", "Time those acquires waited, together."), prometheus.CounterValue, func(s PoolStats) float64 { return s.EmptyAcquireWait.Seconds() }},
	{poolDesc("canceled_acquires_total", "Acquires whose request ended first, the --db-acquire-timeout among them (answered 503)."), prometheus.CounterValue, func(s PoolStats) float64 { return float64(s.CanceledAcquires) }},
	{poolDesc("new_connections_total", "Connections the pool made."), prometheus.CounterValue, func(s PoolStats) float64 { return float64(s.NewConns) }},
	{poolDesc("lifetime_destroyed_connections_total", "Connections closed for reaching the pool's pool_max_conn_lifetime."), prometheus.CounterValue, func(s PoolStats) float64 { return float64(s.LifetimeDestroyed) }},
	{poolDesc("idle_destroyed_connections_total", "Connections closed for idling past the pool's pool_max_conn_idle_time."), prometheus.CounterValue, func(s PoolStats) float64 { return float64(s.IdleDestroyed) }},
}

func poolDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("tally_db_pool_"+name, help, []string{"pool"}, nil)
}

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, s := range poolSeries {
		ch <- s.desc
	}
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	for name, read := range c {
		st := read()
		for _, s := range poolSeries {
			ch <- prometheus.MustNewConstMetric(s.desc, s.kind, s.value(st), name)
		}
	}
}
