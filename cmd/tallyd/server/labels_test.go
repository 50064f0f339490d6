package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricLabelsBounded: Metric labels from input: "One POST of
// 300 distinct values creates 300 series"; "every label whose values come
// from input ... is bounded: a documented number of distinct values, then
// other" (MaxLabelValues).
func TestMetricLabelsBounded(t *testing.T) {
	h := newTestHandler(t)
	var items []string
	for i := range 300 {
		items = append(items, fmt.Sprintf(`{"event_id":"e%d","timestamp":"2026-03-01T12:00:00Z","event_type":"widget.create.end",`+
			`"platform":"openstack","cloud":"os-a","resource_type":"rt-%03d","resource_id":"r%d","project_id":"p",`+
			`"payload":{"state":"active","size":{"n":1}}}`, i, i, i))
	}
	r := httptest.NewRequest("POST", "/api/v1/events", strings.NewReader("["+strings.Join(items, ",")+"]"))
	r.Header.Set("Authorization", "Bearer t-ingest-token-01")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"accepted":300`) {
		t.Fatalf("ingest: %d %s", w.Code, w.Body.String())
	}

	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	series, other := 0, ""
	for _, line := range strings.Split(w.Body.String(), "\n") {
		if strings.HasPrefix(line, "tally_ingest_unvalidated_size_total{") {
			series++
			if v, ok := strings.CutPrefix(line, `tally_ingest_unvalidated_size_total{platform="openstack",resource_type="other"} `); ok {
				other = v
			}
		}
	}
	got := struct {
		Series int
		Other  string
	}{series, other}
	want := struct {
		Series int
		Other  string
	}{MaxLabelValues + 1, "200"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("unvalidated-size series (-want +got):\n%s", d)
	}
}

func TestBoundedLabel(t *testing.T) {
	b := newBoundedLabel(2)
	var got []string
	for _, v := range []string{"a", "b", "c", "a", "other", "b", "d"} {
		got = append(got, b.value(v))
	}
	if d := cmp.Diff([]string{"a", "b", "other", "a", "other", "b", "other"}, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// blockingCollector blocks every Collect until release is closed.
type blockingCollector struct {
	entered chan struct{}
	release chan struct{}
}

func (c blockingCollector) Describe(chan<- *prometheus.Desc) {}
func (c blockingCollector) Collect(chan<- prometheus.Metric) {
	c.entered <- struct{}{}
	<-c.release
}

// TestMetricsInFlightLimit: "/metrics has an in-flight limit and
// a timeout" (MetricsMaxRequestsInFlight; a further scrape is 503).
func TestMetricsInFlightLimit(t *testing.T) {
	m, err := NewMetrics(nil, MetricsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bc := blockingCollector{entered: make(chan struct{}, MetricsMaxRequestsInFlight), release: make(chan struct{})}
	m.Registry().MustRegister(bc)
	h := m.Handler()
	var wg sync.WaitGroup
	codes := make(chan int, MetricsMaxRequestsInFlight)
	for range MetricsMaxRequestsInFlight {
		wg.Go(func() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
			codes <- w.Code
		})
	}
	for range MetricsMaxRequestsInFlight {
		<-bc.entered
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if w.Code != http.StatusServiceUnavailable {
		t.Errorf("scrape %d while %d are in flight: %d, want 503", MetricsMaxRequestsInFlight+1, MetricsMaxRequestsInFlight, w.Code)
	}
	close(bc.release)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 200 {
			t.Errorf("an in-flight scrape: %d, want 200", c)
		}
	}
}
