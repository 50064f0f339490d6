package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tallyhq/tally/ingest/projection"
)

// DefaultResourcesRefreshInterval is how often tallyd recomputes the gauge
// tally_current_resources from the projection unless told otherwise
// (--metrics-refresh-interval): 30 s, half the one-minute evaluation
// interval of Tally's published alert rules, so each evaluation sees a
// value at most one refresh old.
const DefaultResourcesRefreshInterval = 30 * time.Second

// resourcesGauge is tally_current_resources{platform,cloud,resource_type,state}:
// the rows of the projection of current resources, as the last successful
// refresh counted them. A scrape reads the last snapshot whole; a refresh
// swaps in a new one whole, so no scrape sees half a refresh, and a group
// that is gone from the projection is gone from the gauge.
type resourcesGauge struct {
	desc *prometheus.Desc

	mu      sync.Mutex
	count   func(context.Context) ([]projection.Count, error)
	leader  func(context.Context) (bool, error) // nil: always
	samples map[[4]string]float64
	// leads is tally_metrics_leader: 1 while this process exports the
	// fleet-wide gauge, 0 while another replica does.
	leads prometheus.Gauge
}

func newResourcesGauge() *resourcesGauge {
	return &resourcesGauge{desc: prometheus.NewDesc("tally_current_resources",
		"Resources the projection of current resources holds, by platform, cloud, resource_type and state (a deleted resource keeps its row, state deleted), as counted at the last refresh; each label keeps 100 distinct values, then other.",
		[]string{"platform", "cloud", "resource_type", "state"}, nil),
		leads: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tally_metrics_leader",
			Help: "1 while this process exports tally_current_resources for the whole database (the replicas sharing a database elect one by an advisory lock), 0 while another replica does.",
		})}
}

func (g *resourcesGauge) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.desc
	g.leads.Describe(ch)
}

func (g *resourcesGauge) Collect(ch chan<- prometheus.Metric) {
	g.leads.Collect(ch)
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, v := range g.samples {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, v, k[0], k[1], k[2], k[3])
	}
}

// errNoResourceSource is returned by a refresh of metrics no handler has
// been built with.
var errNoResourceSource = errors.New("server: no handler counts resources for these metrics (build one with NewHandler)")

// countResourcesWith sets where the gauge reads its counts (the
// projection service of the handler, NewHandler) and who decides whether
// this process exports them (Store.Leader; nil: it does). The last
// handler built wins.
func (m *Metrics) countResourcesWith(count func(context.Context) ([]projection.Count, error), leader func(context.Context) (bool, error)) {
	m.resources.mu.Lock()
	m.resources.count, m.resources.leader = count, leader
	m.resources.mu.Unlock()
}

// RefreshResources recomputes tally_current_resources once from the
// projection (projection.Service.Count: one GROUP BY on PostgreSQL).
// Label values are bounded as every label from input is ([MaxLabelValues]
// each, then [OtherLabelValue]); groups that collapse into one are summed.
// With a Store.Leader, a replica that does not lead exports no counts
// (tally_metrics_leader 0): the leader's are the database's; nor does one
// whose election failed (Store.Leader's error: it holds no lock session,
// so another replica may lead). When the count itself fails, the leader
// keeps its last counts, so a database that is briefly unreachable never
// reads as an empty fleet. Errors: no handler was built with m, or the
// store's.
func (m *Metrics) RefreshResources(ctx context.Context) error {
	m.resources.mu.Lock()
	count, leader := m.resources.count, m.resources.leader
	m.resources.mu.Unlock()
	if count == nil {
		return errNoResourceSource
	}
	if leader != nil {
		leads, err := leader(ctx)
		if err != nil {
			// This replica holds no lock session (the leader's has ended and
			// none could be had): another may lead now, so it exports nothing
			// rather than its last counts beside the new leader's.
			leads = false
		}
		if !leads {
			// Another replica exports the database's counts.
			m.resources.leads.Set(0)
			m.resources.mu.Lock()
			m.resources.samples = nil
			m.resources.mu.Unlock()
			if err != nil {
				return fmt.Errorf("server: refresh tally_current_resources: elect the exporting replica: %w", err)
			}
			return nil
		}
	}
	m.resources.leads.Set(1)
	counts, err := count(ctx)
	if err != nil {
		return fmt.Errorf("server: refresh tally_current_resources: %w", err)
	}
	samples := make(map[[4]string]float64, len(counts))
	for _, c := range counts {
		samples[[4]string{
			m.platformLabel.value(c.Platform), m.cloudLabel.value(c.Cloud),
			m.resourceTypeLabel.value(c.ResourceType), m.stateLabel.value(c.State),
		}] += float64(c.N)
	}
	m.resources.mu.Lock()
	m.resources.samples = samples
	m.resources.mu.Unlock()
	return nil
}

// RunResourcesRefresh refreshes tally_current_resources now and then every
// interval until ctx is done ([Metrics.RefreshResources]); each refresh
// may take at most interval. A failed refresh is logged at WARN (log may
// be nil: discarded) and the loop goes on. It returns when ctx is done;
// run it in its own goroutine. interval must be positive.
func (m *Metrics) RunResourcesRefresh(ctx context.Context, interval time.Duration, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, interval)
		err := m.RefreshResources(rctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			log.WarnContext(ctx, "metrics: tally_current_resources not refreshed (a failed count keeps the last counts, a failed election exports none)", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
