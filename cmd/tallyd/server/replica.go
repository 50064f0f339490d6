package server

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/ingest/usage"
	"github.com/tallyhq/tally/store"
)

// Replica is a streaming replica of the primary database ([Store.Replica];
// tallyd --read-database-url, docs/scale-out.md, Read replicas). It serves
// the read-only routes over lifecycle events that need no write and no
// history from the primary: GET /api/v1/resources (with at= too),
// GET /api/v1/usage, a resource's /lifecycle and a project's /summary.
//
// Such an answer says how fresh it is: the header Tally-As-Of carries
// ReplayedAt's instant (RFC 3339, UTC, microseconds), read before the
// data; a usage answer's as_of is, as always, the feed position it
// reflects. The primary answers instead, without the header, when the
// replica fails with an error matching [store.ErrUnavailable] (counted in
// tally_read_replica_fallbacks_total{reason="unavailable"}; the replica is
// then skipped, and those reads counted so too, for 5 s), and when a
// usage query's as_of is a position the replica has not replayed yet
// (reason "behind"), so the same as_of always gives the same answer.
type Replica struct {
	// Projection is the replica's projection (pgstore.DB.Projection of
	// the replica). Required.
	Projection projection.Store
	// Usage is the replica's usage store (pgstore.DB.Ingest of the
	// replica). Required.
	Usage usage.Store
	// ReplayedAt reports the commit instant of the last transaction the
	// replica replayed (pgstore.DB.ReplayedAt); the zero time leaves the
	// header out. Required.
	ReplayedAt func(ctx context.Context) (time.Time, error)
}

// replicaRoutes are the routes a [Replica] serves, by pattern.
var replicaRoutes = map[string]bool{
	"GET /api/v1/resources": true,
	"GET /api/v1/usage":     true,
	"GET /api/v1/resources/{cloud}/{resource_type}/{resource_id}/lifecycle": true,
	"GET /api/v1/projects/{cloud}/{project_id}/summary":                     true,
}

// AsOfHeader is the response header of an answer read from a [Replica].
const AsOfHeader = "Tally-As-Of"

// replicaRetryAfter is how long the replica is skipped after a read of
// it failed as unavailable: a replica whose host vanished answers nothing
// until the connection's timeout, which every read would wait before the
// primary answered.
const replicaRetryAfter = 5 * time.Second

// errReplicaSkipped is readFrom's error while the replica is skipped.
var errReplicaSkipped = errors.Join(store.ErrUnavailable, errors.New("server: the read replica failed less than 5 s ago: skipped"))

// replicaReads routes the reads of a [Replica], falling back to the
// primary as [Replica] says.
type replicaReads struct {
	Replica
	fallbacks *prometheus.CounterVec
	// downUntil (Unix nanoseconds) skips the replica until then.
	downUntil atomic.Int64
}

// fellBack counts a read the primary answered instead, for reason; err,
// when a read of the replica failed (not when it was skipped), skips the
// replica for replicaRetryAfter.
func (r *replicaReads) fellBack(reason string, err error) {
	r.fallbacks.WithLabelValues(reason).Inc()
	if err != nil && !errors.Is(err, errReplicaSkipped) {
		r.downUntil.Store(time.Now().Add(replicaRetryAfter).UnixNano())
	}
}

// readFrom marks ctx's answer as read from the replica: it reads the
// replica's freshness once per request, before the first replica read.
// An error there is the replica's too (the caller falls back).
func (r *replicaReads) readFrom(ctx context.Context) error {
	m, _ := ctx.Value(replicaMarkKey{}).(*replicaMark)
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.read {
		return nil
	}
	if time.Now().UnixNano() < r.downUntil.Load() {
		return errReplicaSkipped
	}
	at, err := r.ReplayedAt(ctx)
	if err != nil {
		return err
	}
	m.read, m.at = true, at
	return nil
}

// replicaMark is the per-request record of a replica read.
type replicaMark struct {
	mu   sync.Mutex
	read bool
	at   time.Time
}

type replicaMarkKey struct{}

// withAsOf wraps a route served from the replica: the answer carries
// Tally-As-Of when a replica read marked the request.
func withAsOf(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := &replicaMark{}
		next.ServeHTTP(&asOfWriter{ResponseWriter: w, mark: m}, r.WithContext(context.WithValue(r.Context(), replicaMarkKey{}, m)))
	})
}

// asOfWriter adds Tally-As-Of to the header when the answer starts.
type asOfWriter struct {
	http.ResponseWriter
	mark    *replicaMark
	started bool
}

func (w *asOfWriter) WriteHeader(code int) {
	if !w.started {
		w.started = true
		w.mark.mu.Lock()
		if w.mark.read && !w.mark.at.IsZero() {
			w.Header().Set(AsOfHeader, w.mark.at.UTC().Format("2006-01-02T15:04:05.000000Z07:00"))
		}
		w.mark.mu.Unlock()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *asOfWriter) Write(b []byte) (int, error) {
	if !w.started {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *asOfWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// replicaProjection reads the projection's listings from the replica and
// everything else (a resource with its history, the counts, a rebuild)
// from the primary.
type replicaProjection struct {
	projection.Store // the primary
	reads            *replicaReads
}

func (p replicaProjection) List(ctx context.Context, q projection.Query) ([]projection.Resource, error) {
	err := p.reads.readFrom(ctx)
	if err == nil {
		var rs []projection.Resource
		if rs, err = p.reads.Projection.List(ctx, q); err == nil {
			return rs, nil
		}
	}
	if !errors.Is(err, store.ErrUnavailable) {
		return nil, err
	}
	p.reads.fellBack("unavailable", err)
	unmark(ctx)
	return p.Store.List(ctx, q)
}

// unmark drops ctx's replica mark: the primary answered.
func unmark(ctx context.Context) {
	if m, _ := ctx.Value(replicaMarkKey{}).(*replicaMark); m != nil {
		m.mu.Lock()
		m.read = false
		m.mu.Unlock()
	}
}

// replicaUsage reads histories from the replica unless it has not
// replayed the position asked for, or does not answer.
type replicaUsage struct {
	primary usage.Store
	reads   *replicaReads
}

func (u replicaUsage) Snapshot(ctx context.Context, at *ingest.FeedPosition) (usage.Snapshot, error) {
	err := u.reads.readFrom(ctx)
	if err == nil {
		var s usage.Snapshot
		if s, err = u.reads.Usage.Snapshot(ctx, at); err == nil {
			return s, nil
		}
	}
	switch {
	case at != nil && errors.Is(err, ingest.ErrFeedPosition):
		u.reads.fellBack("behind", nil)
	case errors.Is(err, store.ErrUnavailable):
		u.reads.fellBack("unavailable", err)
	default:
		return usage.Snapshot{}, err
	}
	unmark(ctx)
	return u.primary.Snapshot(ctx, at)
}

func (u replicaUsage) Histories(ctx context.Context, q usage.HistoryQuery, fn func(usage.History) error) error {
	if m, _ := ctx.Value(replicaMarkKey{}).(*replicaMark); m == nil || !marked(m) {
		return u.primary.Histories(ctx, q, fn)
	}
	// The position came from the replica's Snapshot, so the replica holds
	// every event at or before it. A replica that stops answering midway
	// fails the request (5xx) rather than mix two sources in one answer.
	return u.reads.Usage.Histories(ctx, q, fn)
}

// Events reads a resource's stored events (a lifecycle, which names no
// feed position) from the replica, or from the primary when the replica
// does not answer.
func (u replicaUsage) Events(ctx context.Context, q ingest.EventQuery) ([]ingest.StoredEvent, error) {
	err := u.reads.readFrom(ctx)
	if err == nil {
		var evs []ingest.StoredEvent
		if evs, err = u.reads.Usage.Events(ctx, q); err == nil {
			return evs, nil
		}
	}
	if !errors.Is(err, store.ErrUnavailable) {
		return nil, err
	}
	u.reads.fellBack("unavailable", err)
	unmark(ctx)
	return u.primary.Events(ctx, q)
}

// Checkpoint reads a resource's retention checkpoint where its events
// were read: the replica when it marked the request, else the primary.
func (u replicaUsage) Checkpoint(ctx context.Context, k projection.Key) (*projection.Resource, time.Time, error) {
	if m, _ := ctx.Value(replicaMarkKey{}).(*replicaMark); m != nil && marked(m) {
		return u.reads.Usage.Checkpoint(ctx, k)
	}
	return u.primary.Checkpoint(ctx, k)
}

func marked(m *replicaMark) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.read
}
