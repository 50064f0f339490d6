package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tallyhq/tally/internal/pgtest"
)

// Issue "Operating tallyd", point 6: "export pgxpool's statistics
// (acquired, idle, waits, acquire duration) as metrics, set
// application_name on every connection, log the pool size and timeouts at
// start." tallyd on PostgreSQL with a read replica (here the primary's URL
// again) exports tally_db_pool_* for the primary, its probe and the
// replica, and logs each pool's settings on one line at start.
func TestPoolMetricsAndStartLog(t *testing.T) {
	u := pgtest.URL(t)
	d := startTallyd(t, "--credentials-file", writeCredentials(t), "--database-url", u, "--read-database-url", u,
		"--db-max-conns", "7", "--db-acquire-timeout", "3s")
	if status, _, _ := call(t, "GET", d.base+"/readyz", "", nil); status != 200 {
		t.Fatalf("GET /readyz: %d", status)
	}
	if status, _, _ := call(t, "GET", d.base+"/api/v1/resources", tokAdmin, nil); status != 200 {
		t.Fatalf("GET /api/v1/resources: %d", status)
	}
	for range 2 { // two creates without an idempotencyKey: one pipeline each, or one of two
		if status, _, b := call(t, "POST", d.base+"/api/events", tokEvents, []byte(`{"category":"connection","action":"fail","severity":"error","description":"db unreachable","correlationKey":"db-1"}`)); status/100 != 2 {
			t.Fatalf("POST /api/events: %d %s", status, b)
		}
	}
	status, _, body := call(t, "GET", d.base+"/metrics", "", nil)
	if status != 200 {
		t.Fatalf("GET /metrics: %d", status)
	}
	text := string(body)
	if got := metric(t, d.base, "tally_correlate_pipelined_creates_total"); got != 2 {
		t.Errorf("tally_correlate_pipelined_creates_total = %v, want 2", got)
	}
	if p := metric(t, d.base, "tally_correlate_pipelines_total"); p < 1 || p > 2 {
		t.Errorf("tally_correlate_pipelines_total = %v, want 1 or 2", p)
	}
	for _, name := range []string{"tally_correlate_pipeline_reruns_total", "tally_correlate_pipeline_bypasses_total"} {
		if got := metric(t, d.base, name); got != 0 {
			t.Errorf("%s = %v, want 0", name, got)
		}
	}
	for _, want := range []string{
		`tally_db_pool_max_connections{pool="primary"} 7`,
		`tally_db_pool_max_connections{pool="probe"} 1`,
		`tally_db_pool_max_connections{pool="replica"} 7`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, series := range []string{
		"acquired_connections", "idle_connections", "total_connections", "acquires_total",
		"acquire_duration_seconds_total", "empty_acquires_total", "empty_acquire_wait_seconds_total",
		"canceled_acquires_total", "new_connections_total", "lifetime_destroyed_connections_total",
		"idle_destroyed_connections_total",
	} {
		for _, pool := range []string{"primary", "probe", "replica"} {
			if !regexp.MustCompile(`(?m)^tally_db_pool_` + series + `\{pool="` + pool + `"\} \d`).MatchString(text) {
				t.Errorf("/metrics lacks tally_db_pool_%s{pool=%q}", series, pool)
			}
		}
	}
	// The pool served the requests (migrations, /readyz on the probe, the
	// listing on the replica).
	for _, pool := range []string{"primary", "probe"} {
		if regexp.MustCompile(`(?m)^tally_db_pool_acquires_total\{pool="` + pool + `"\} 0$`).MatchString(text) {
			t.Errorf("tally_db_pool_acquires_total{pool=%q} is 0 after requests", pool)
		}
	}
	logs := d.stderr.String()
	for _, want := range []string{
		`msg="database pool" pool=primary max_conns=7 min_conns=0 connect_timeout=5s acquire_timeout=3s statement_timeout=10s idle_in_transaction_timeout=30s`,
		`msg="database pool" pool=replica max_conns=7`,
		`application_name=tallyd`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("start logs lack %q:\n%s", want, logs)
		}
	}
}

// docs/operations.md's metrics table names every tally_* series tallyd
// exports on PostgreSQL (the scrape of TestPoolMetricsAndStartLog's
// configuration), so that a new series cannot go undocumented.
func TestOperationsGuideListsEveryMetric(t *testing.T) {
	u := pgtest.URL(t)
	d := startTallyd(t, "--credentials-file", writeCredentials(t), "--database-url", u, "--read-database-url", u)
	status, _, body := call(t, "GET", d.base+"/metrics", "", nil)
	if status != 200 {
		t.Fatalf("GET /metrics: %d", status)
	}
	doc, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(doc), "**Metrics** (all on `GET /metrics`")
	table, _, _ = strings.Cut(table, "\n\n**")
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`(tally_[a-z_]+)`").FindAllStringSubmatch(table, -1) {
		documented[m[1]] = true
	}
	var missing []string
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (tally_[a-z_]+) `).FindAllStringSubmatch(string(body), -1) {
		if !documented[m[1]] {
			missing = append(missing, m[1])
		}
	}
	if len(missing) > 0 {
		t.Errorf("docs/operations.md's metrics table lacks %s", strings.Join(missing, ", "))
	}
}
