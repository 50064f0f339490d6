package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/ingest/reconcile"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/memstore"
	"github.com/tallyhq/tally/store/pgstore"
)

// alertSeries is one selector of testdata/tally-alert-series.txt.
type alertSeries struct {
	name     string
	matchers map[string]string // label = value
	by       []string          // the labels the rule aggregates by
}

var selectorRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?$`)
var matcherRE = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"]*)"\s*$`)

// readAlertSeries parses the test data: "<selector> <by label>…" a line,
// # comments.
func readAlertSeries(t *testing.T) []alertSeries {
	t.Helper()
	f, err := os.Open("testdata/tally-alert-series.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []alertSeries
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		m := selectorRE.FindStringSubmatch(fields[0])
		if m == nil {
			t.Fatalf("test data: %q is not a selector", fields[0])
		}
		s := alertSeries{name: m[1], matchers: map[string]string{}, by: fields[1:]}
		if m[2] != "" {
			for _, part := range strings.Split(m[2], ",") {
				mm := matcherRE.FindStringSubmatch(part)
				if mm == nil {
					t.Fatalf("test data: %q is not an equality matcher", part)
				}
				s.matchers[mm[1]] = mm[2]
			}
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("test data lists no series")
	}
	return out
}

// TestTallyAlertRuleSeries: "/metrics serves the series that
// Tally's published alert rules query, so those rules evaluate unchanged":
// after an ingest by a scoped credential (accepted, refused and out of
// scope items) and one refresh of the gauge, every selector of the rules
// (testdata/tally-alert-series.txt) matches a sample on /metrics that
// carries each label the rule aggregates by, on both stores; the cloud is
// the credential's scope.
func TestTallyAlertRuleSeries(t *testing.T) {
	want := readAlertSeries(t)
	for name, open := range map[string]func(t *testing.T) Store{
		"memstore": func(t *testing.T) Store { return memStore(t) },
		"pgstore":  func(t *testing.T) Store { return pgStore(pgtest.DB(t, pgstore.Options{})) },
	} {
		t.Run(name, func(t *testing.T) {
			h, err := New(open(t), Options{Authenticator: testAuthenticator(t)})
			if err != nil {
				t.Fatal(err)
			}
			ev := func(id, cloud, rt, state string) string {
				return `{"event_id":"` + id + `","timestamp":"2026-03-01T12:00:00Z","event_type":"` + rt + `.create.end",` +
					`"platform":"openstack","cloud":"` + cloud + `","resource_type":"` + rt + `","resource_id":"r-` + id + `","project_id":"p",` +
					`"payload":{"state":"` + state + `","size":{"n":1}}}`
			}
			body := "[" + strings.Join([]string{
				ev("1", "os-a", "widget", "active"), ev("2", "os-a", "widget", "active"), ev("3", "os-a", "gadget", "error"),
				`{"x":1}`, ev("4", "os-b", "widget", "active"),
			}, ",") + "]"
			r := httptest.NewRequest("POST", "/api/v1/events", strings.NewReader(body))
			r.Header.Set("Authorization", "Bearer "+tokIngest)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != 200 || !strings.Contains(w.Body.String(), `"accepted":3`) {
				t.Fatalf("ingest: %d %s", w.Code, w.Body.String())
			}
			if err := h.Metrics().RefreshResources(context.Background()); err != nil {
				t.Fatalf("RefreshResources: %v", err)
			}
			// Two reconciliation runs of the scope's cloud: one completed,
			// one partial (a size the instance schema refuses).
			for _, size := range []string{`{"vcpus":1,"ram_gb":1,"disk_gb":1,"flavor":"f"}`, `{"n":1}`} {
				obs := `{"platform":"openstack","observed_at":"2026-03-01T13:00:00Z","resources":[{"resource_type":"instance",` +
					`"resource_id":"vm-` + size[2:3] + `","project_id":"p","state":"active","size":` + size + `}]}`
				r = httptest.NewRequest("POST", "/api/v1/clouds/os-a/sync", strings.NewReader(obs))
				r.Header.Set("Authorization", "Bearer "+tokSync)
				w = httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != 200 {
					t.Fatalf("sync: %d %s", w.Code, w.Body.String())
				}
			}

			w = httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
			p := expfmt.NewTextParser(model.UTF8Validation)
			families, err := p.TextToMetricFamilies(w.Body)
			if err != nil {
				t.Fatalf("parse /metrics: %v", err)
			}

			// Each selector matches at least one sample carrying its
			// aggregation labels.
			for _, s := range want {
				if n := matching(families[s.name], s); n == 0 {
					t.Errorf("/metrics has no sample of %s%v carrying %v", s.name, s.matchers, s.by)
				}
			}

			// And the values are the ingest's: by cloud (the scope, os-a,
			// also for the item that named os-b), source and reason; the
			// gauge by platform, cloud, resource type and state.
			got := map[string]float64{}
			for _, name := range []string{"tally_events_ingested_total", "tally_events_rejected_total", "tally_current_resources",
				"tally_sync_runs_total", "tally_sync_resources_reconciled_total", "tally_sync_errors_total"} {
				for _, m := range families[name].GetMetric() {
					got[name+labelString(m)] = value(m)
				}
			}
			wantValues := map[string]float64{
				`tally_events_ingested_total{cloud="os-a",source="collector"}`:                                     3,
				`tally_events_ingested_total{cloud="os-a",source="reconciliation"}`:                                1,
				`tally_events_rejected_total{cloud="os-a",reason="size_schema"}`:                                   1,
				`tally_sync_runs_total{cloud="os-a",status="completed"}`:                                           1,
				`tally_sync_runs_total{cloud="os-a",status="partial"}`:                                             1,
				`tally_sync_resources_reconciled_total{action="created",cloud="os-a"}`:                             1,
				`tally_sync_resources_reconciled_total{action="updated",cloud="os-a"}`:                             0,
				`tally_sync_resources_reconciled_total{action="deleted",cloud="os-a"}`:                             0,
				`tally_sync_errors_total{cloud="os-a"}`:                                                            1,
				`tally_events_rejected_total{cloud="os-a",reason="schema"}`:                                        1,
				`tally_events_rejected_total{cloud="os-a",reason="scope"}`:                                         1,
				`tally_current_resources{cloud="os-a",platform="openstack",resource_type="gadget",state="error"}`:  1,
				`tally_current_resources{cloud="os-a",platform="openstack",resource_type="widget",state="active"}`: 2,
			}
			if d := cmp.Diff(wantValues, got); d != "" {
				t.Errorf("series (-want +got):\n%s", d)
			}
		})
	}
}

// matching counts the samples of f that match s's matchers and carry every
// label s aggregates by.
func matching(f *dto.MetricFamily, s alertSeries) int {
	n := 0
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		ok := true
		for k, v := range s.matchers {
			ok = ok && labels[k] == v
		}
		for _, k := range s.by {
			_, has := labels[k]
			ok = ok && has
		}
		if ok {
			n++
		}
	}
	return n
}

// labelString renders m's labels as {a="x",b="y"}, sorted by name.
func labelString(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+`="`+l.GetValue()+`"`)
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	}
	return m.GetUntyped().GetValue()
}

// tally_current_resources keeps its last counts when a refresh fails (a
// database briefly unreachable never reads as an empty fleet), drops a
// group that is gone, and bounds its labels as every label from input
// (MaxLabelValues, then other, the collapsed groups summed).
func TestRefreshResources(t *testing.T) {
	ctx := context.Background()
	m, err := NewMetrics(nil, MetricsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.RefreshResources(ctx); !errors.Is(err, errNoResourceSource) {
		t.Errorf("refresh without a handler: %v, want errNoResourceSource", err)
	}
	var (
		counts []projection.Count
		fail   error
	)
	m.countResourcesWith(func(context.Context) ([]projection.Count, error) { return counts, fail }, nil)
	gauge := func() map[string]float64 {
		fams, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, f := range fams {
			if f.GetName() == "tally_current_resources" {
				for _, s := range f.GetMetric() {
					got[labelString(s)] = value(s)
				}
			}
		}
		return got
	}

	counts = []projection.Count{
		{Platform: "openstack", Cloud: "c1", ResourceType: "volume", State: "available", N: 2},
		{Platform: "openstack", Cloud: "c1", ResourceType: "volume", State: "deleted", N: 1},
	}
	if err := m.RefreshResources(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		`{cloud="c1",platform="openstack",resource_type="volume",state="available"}`: 2,
		`{cloud="c1",platform="openstack",resource_type="volume",state="deleted"}`:   1,
	}
	if d := cmp.Diff(want, gauge()); d != "" {
		t.Errorf("after a refresh (-want +got):\n%s", d)
	}
	fail = errors.New("database down")
	if err := m.RefreshResources(ctx); !errors.Is(err, fail) {
		t.Errorf("failed refresh: %v, want the store's error", err)
	}
	if d := cmp.Diff(want, gauge()); d != "" {
		t.Errorf("after a failed refresh, want the last counts (-want +got):\n%s", d)
	}

	fail, counts = nil, nil
	for i := range MaxLabelValues + 50 {
		counts = append(counts, projection.Count{Platform: "openstack", Cloud: "c1", ResourceType: fmt.Sprintf("rt-%03d", i), State: "active", N: 1})
	}
	if err := m.RefreshResources(ctx); err != nil {
		t.Fatal(err)
	}
	got := gauge()
	// "volume" took one of the 100 resource_type values at the first
	// refresh, so 99 of the new types keep theirs and 51 are other.
	type summary struct {
		Series  int
		Other   float64
		Deleted bool
	}
	_, deleted := got[`{cloud="c1",platform="openstack",resource_type="volume",state="deleted"}`]
	if d := cmp.Diff(summary{MaxLabelValues, 51, false},
		summary{len(got), got[`{cloud="c1",platform="openstack",resource_type="other",state="active"}`], deleted}); d != "" {
		t.Errorf("bounded labels (-want +got):\n%s", d)
	}

	// The loop refreshes at once and returns when its context is done.
	counts = counts[:1]
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	m.countResourcesWith(func(context.Context) ([]projection.Count, error) { cancel(); return counts, nil }, nil)
	go func() { defer close(done); m.RunResourcesRefresh(rctx, time.Hour, nil) }()
	<-done
	if len(gauge()) != 1 {
		t.Errorf("RunResourcesRefresh did not refresh before returning: %v", gauge())
	}
}

// TestTallySyncRulesReadCorrections: Tally's TallyReconciliationDriftHigh
// reads "sum by (cloud) (increase(tally_sync_resources_reconciled_total[6h]))
// > 50" as "Reconciliation corrected N resources", and its own series holds
// the actions created, updated and deleted alone. A run that finds nothing
// to correct must add nothing to that sum (else every cloud of more than
// eight resources, reconciled hourly, fires it for ever), and a clean run
// exports its actions and errors as zeros, so that a rate over them reads
// none rather than no data.
func TestTallySyncRulesReadCorrections(t *testing.T) {
	h, err := New(memStore(t), Options{Authenticator: testAuthenticator(t)})
	if err != nil {
		t.Fatal(err)
	}
	obs := `{"platform":"openstack","observed_at":"2026-03-01T13:00:00Z","complete_types":["instance"],"resources":[` +
		`{"resource_type":"instance","resource_id":"vm-1","project_id":"p","state":"active","size":{"vcpus":1,"ram_gb":1,"disk_gb":1,"flavor":"f"}},` +
		`{"resource_type":"instance","resource_id":"vm-2","project_id":"p","state":"active","size":{"vcpus":1,"ram_gb":1,"disk_gb":1,"flavor":"f"}}]}`
	sync := func() map[string]float64 {
		t.Helper()
		r := httptest.NewRequest("POST", "/api/v1/clouds/os-a/sync", strings.NewReader(obs))
		r.Header.Set("Authorization", "Bearer "+tokSync)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 {
			t.Fatalf("sync: %d %s", w.Code, w.Body.String())
		}
		w = httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		p := expfmt.NewTextParser(model.UTF8Validation)
		families, err := p.TextToMetricFamilies(w.Body)
		if err != nil {
			t.Fatalf("parse /metrics: %v", err)
		}
		got := map[string]float64{}
		for _, name := range []string{"tally_sync_resources_reconciled_total", "tally_sync_errors_total"} {
			for _, m := range families[name].GetMetric() {
				got[name+labelString(m)] = value(m)
			}
		}
		return got
	}
	first := sync()
	want := map[string]float64{
		`tally_sync_resources_reconciled_total{action="created",cloud="os-a"}`: 2,
		`tally_sync_resources_reconciled_total{action="updated",cloud="os-a"}`: 0,
		`tally_sync_resources_reconciled_total{action="deleted",cloud="os-a"}`: 0,
		`tally_sync_errors_total{cloud="os-a"}`:                                0,
	}
	if d := cmp.Diff(want, first); d != "" {
		t.Errorf("after the first run (-want +got):\n%s", d)
	}
	// The same observation again: both resources unchanged, nothing corrected.
	if d := cmp.Diff(want, sync()); d != "" {
		t.Errorf("after a run that corrected nothing (-want +got):\n%s", d)
	}
}

// TestSyncInvalidRunsCounted (docs/reconciliation.md, Metrics:
// tally_sync_runs_total status "invalid (observation refused)", and
// tally_sync_errors_total "one per failed or invalid run"): an observation
// the route refuses with 400 is counted under the credential's cloud, so
// TallySyncErrors sees a reconciler that only ever sends broken ones; one
// for another cloud than the credential's (403) is not counted, as no run of
// that cloud was tried.
func TestSyncInvalidRunsCounted(t *testing.T) {
	h, err := New(memStore(t), Options{Authenticator: testAuthenticator(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, body string
		code       int
	}{
		{"/api/v1/clouds/os-a/sync", `{"platform":"openstack"}`, 400},                                     // observed_at required
		{"/api/v1/clouds/os-a/sync", `{"platform":"openstack","observed_at":"2026-03-01T13:00:00Z"`, 400}, // truncated
		{"/api/v1/clouds/os-b/sync", `{"platform":"openstack"}`, 403},
	} {
		r := httptest.NewRequest("POST", tc.path, strings.NewReader(tc.body))
		r.Header.Set("Authorization", "Bearer "+tokSync)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.code {
			t.Fatalf("POST %s %s: %d %s, want %d", tc.path, tc.body, w.Code, w.Body.String(), tc.code)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(w.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	got := map[string]float64{}
	for _, name := range []string{"tally_sync_runs_total", "tally_sync_errors_total"} {
		for _, m := range families[name].GetMetric() {
			got[name+labelString(m)] = value(m)
		}
	}
	want := map[string]float64{
		`tally_sync_runs_total{cloud="os-a",status="invalid"}`: 2,
		`tally_sync_errors_total{cloud="os-a"}`:                2,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("series (-want +got):\n%s", d)
	}
}

// TestReconcileObserverInvalidCloud: an embedder that runs reconciliations
// with tallyd's metrics (Metrics.ReconcileObserver) and a cloud that is not
// UTF-8 gets the /cloud refusal, not a panic of the Prometheus client (a
// label value must be UTF-8); the run is counted under the cloud with its
// bad bytes replaced.
func TestReconcileObserverInvalidCloud(t *testing.T) {
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ing, err := ingest.New(db.Ingest(), ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMetrics(nil, MetricsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := reconcile.New(ing, db.Projection(), db.Reconcile(), reconcile.Options{Observer: m.ReconcileObserver()})
	if err != nil {
		t.Fatal(err)
	}
	obs := reconcile.Observation{Platform: "openstack", ObservedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	var ve *event.ValidationError
	if _, err := rec.Run(context.Background(), "t", "os-\xff", obs); !errors.As(err, &ve) || ve.Problems[0].Member != "/cloud" {
		t.Fatalf("Run: %v, want the /cloud refusal", err)
	}
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() == "tally_sync_runs_total" {
			for _, s := range f.GetMetric() {
				got[labelString(s)] = value(s)
			}
		}
	}
	if d := cmp.Diff(map[string]float64{"{cloud=\"os-\uFFFD\",status=\"invalid\"}": 1}, got); d != "" {
		t.Errorf("tally_sync_runs_total (-want +got):\n%s", d)
	}
}
