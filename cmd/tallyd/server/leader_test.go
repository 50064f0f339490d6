package server

import (
	"context"
	"errors"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// gaugeTotal sums the samples of one series on h's /metrics.
func gaugeTotal(t *testing.T, h *Handler, series string) (total float64, samples int) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range strings.Split(w.Body.String(), "\n") {
		if !strings.HasPrefix(line, series+"{") && !strings.HasPrefix(line, series+" ") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		total += v
		samples++
	}
	return total, samples
}

// Replicas sharing a database export tally_current_resources once: the
// one holding the leader lock (pgstore.DB.Leader) exports the database's
// counts and the others none, so Tally's alert rules, which sum by cloud
// and resource_type over every replica, count each resource once. When the
// leader's session ends, another replica takes over at its next refresh.
func TestCurrentResourcesExportedByOneReplica(t *testing.T) {
	ctx := context.Background()
	u := pgtest.URL(t)
	var handlers []*Handler
	var dbs []*pgstore.DB
	for range 3 {
		db := pgtest.Open(t, u, pgstore.Options{})
		st := pgStore(db)
		st.Leader = db.Leader
		m, err := NewMetrics(nil, MetricsOptions{})
		if err != nil {
			t.Fatal(err)
		}
		h, err := New(st, Options{Authenticator: testAuthenticator(t), Metrics: m})
		if err != nil {
			t.Fatal(err)
		}
		handlers, dbs = append(handlers, h), append(dbs, db)
	}
	r := httptest.NewRequest("POST", "/api/v1/events", strings.NewReader("["+hostileEvent("l1", "", "")+","+hostileEvent("l2", "", "")+"]"))
	r.Header.Set("Authorization", "Bearer "+tokIngest)
	w := httptest.NewRecorder()
	handlers[0].ServeHTTP(w, r)
	if w.Code != 200 {
		t.Fatalf("ingest: %d %s", w.Code, w.Body)
	}
	refresh := func(hs ...*Handler) (total float64, leaders []int) {
		t.Helper()
		for i, h := range hs {
			if err := h.metrics.RefreshResources(ctx); err != nil {
				t.Fatal(err)
			}
			n, _ := gaugeTotal(t, h, "tally_current_resources")
			total += n
			if l, _ := gaugeTotal(t, h, "tally_metrics_leader"); l == 1 {
				leaders = append(leaders, i)
			}
		}
		return total, leaders
	}
	total, leaders := refresh(handlers...)
	if total != 2 || len(leaders) != 1 {
		t.Fatalf("over 3 replicas: tally_current_resources sums to %v, leaders %v; want 2 and one leader", total, leaders)
	}
	// The leader stops: another takes over.
	dbs[leaders[0]].Close()
	rest := append(append([]*Handler{}, handlers[:leaders[0]]...), handlers[leaders[0]+1:]...)
	if total, leaders := refresh(rest...); total != 2 || len(leaders) != 1 {
		t.Errorf("after the leader stopped: tally_current_resources sums to %v over the other two, leaders %v; want 2 and one leader", total, leaders)
	}
}

// tally_current_resources is exported by one replica: a replica that can
// no longer tell whether it leads (its lock's session is gone and a new
// one cannot be had, as when it is cut off from the database while another
// replica takes the lock over) stops exporting its counts at once, rather
// than keep its last ones beside the new leader's (the alert rules' sum
// read twice the fleet for as long as it stayed cut off).
func TestCurrentResourcesElectionErrorStopsExporting(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	lead := func(context.Context) (bool, error) { return true, nil }
	st.Leader = func(ctx context.Context) (bool, error) { return lead(ctx) }
	m, err := NewMetrics(nil, MetricsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(st, Options{Authenticator: testAuthenticator(t), Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("POST", "/api/v1/events", strings.NewReader("["+hostileEvent("l1", "", "")+"]"))
	r.Header.Set("Authorization", "Bearer "+tokIngest)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 200 {
		t.Fatalf("ingest: %d %s", w.Code, w.Body)
	}
	if err := m.RefreshResources(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := gaugeTotal(t, h, "tally_current_resources"); n != 1 {
		t.Fatalf("the leader exports %v resources, want 1", n)
	}
	lead = func(context.Context) (bool, error) {
		return false, errors.New("connect for the leader lock: unreachable")
	}
	if err := m.RefreshResources(ctx); err == nil {
		t.Error("an election that failed refreshed without an error")
	}
	n, _ := gaugeTotal(t, h, "tally_current_resources")
	l, _ := gaugeTotal(t, h, "tally_metrics_leader")
	if n != 0 || l != 0 {
		t.Errorf("after a failed election: tally_current_resources %v, tally_metrics_leader %v; want 0 and 0", n, l)
	}
}
