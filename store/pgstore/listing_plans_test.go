package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// planNode is the part of an EXPLAIN (FORMAT JSON) node the plan tests read.
type planNode struct {
	NodeType  string     `json:"Node Type"`
	Relation  string     `json:"Relation Name"`
	IndexName string     `json:"Index Name"`
	PlanRows  float64    `json:"Plan Rows"`
	IndexCond string     `json:"Index Cond"`
	Plans     []planNode `json:"Plans"`
}

// walk calls f on n and every node under it.
func (n planNode) walk(f func(planNode)) {
	f(n)
	for _, c := range n.Plans {
		c.walk(f)
	}
}

// indexBound reports whether the rows under n come through an index
// condition (an index or bitmap index scan with an Index Cond), so a sort at
// n sorts the rows that match indexed filters, not the table.
func indexBound(n planNode) bool {
	bound := false
	n.walk(func(c planNode) { bound = bound || c.IndexCond != "" })
	return bound
}

// checkPlan fails t unless query plans with no sequential scan of table
// and no sort but of rows an index condition selects.
func checkPlan(t *testing.T, db *pgstore.DB, table, query string, args ...any) {
	t.Helper()
	root, text := explain(t, db, query, args...)
	var bad []string
	root.walk(func(n planNode) {
		switch {
		case n.NodeType == "Seq Scan" && (n.Relation == table || partitionWithRows(t, db, n.Relation, table)):
			bad = append(bad, "a sequential scan of "+table)
		case n.NodeType == "Sort" && !indexBound(n):
			bad = append(bad, fmt.Sprintf("a sort of %.0f rows that no index condition bounds", n.Plans[0].PlanRows))
		}
	})
	if len(bad) > 0 {
		t.Errorf("plan has %s:\n%s", strings.Join(bad, ", "), text)
	}
}

// partitionWithRows reports whether rel is a partition of table that held
// rows when last analyzed: a plan over a partitioned table scans each
// partition, and reads an empty one (a month made ahead) sequentially,
// which costs nothing.
func partitionWithRows(t *testing.T, db *pgstore.DB, rel, table string) bool {
	t.Helper()
	var yes bool
	if err := pgstore.PoolOf(db).QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhrelid = to_regclass($1) AND i.inhparent = to_regclass($2) AND c.reltuples > 0)`, rel, table).Scan(&yes); err != nil {
		t.Fatal(err)
	}
	return yes
}

// partitionOf reports whether rel is a partition of table (events_2026_01
// of events, say), or an index of one of table's (the index's).
func partitionOf(t *testing.T, db *pgstore.DB, rel, table string) bool {
	t.Helper()
	var yes bool
	if err := pgstore.PoolOf(db).QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_inherits
WHERE inhrelid = to_regclass($1) AND inhparent = to_regclass($2))`, rel, table).Scan(&yes); err != nil {
		t.Fatal(err)
	}
	return yes
}

// isIndexOf reports whether index is parent or one of its partitions'
// indexes (the idx_events_feed of a partition is events_2026_01_tx_seq_idx).
func isIndexOf(t *testing.T, db *pgstore.DB, index, parent string) bool {
	t.Helper()
	if index == "" {
		return false
	}
	if index == parent {
		return true
	}
	return partitionOf(t, db, index, parent)
}

// explain plans query with args (custom plan, the values bound) and
// returns its root node, and the plan in text form for messages.
func explain(t *testing.T, db *pgstore.DB, query string, args ...any) (planNode, string) {
	t.Helper()
	var raw []byte
	if err := pgstore.PoolOf(db).QueryRow(context.Background(), "EXPLAIN (FORMAT JSON) "+query, args...).Scan(&raw); err != nil {
		t.Fatalf("explain %s: %v", query, err)
	}
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("explain: %v %s", err, raw)
	}
	rows, err := pgstore.PoolOf(db).Query(context.Background(), "EXPLAIN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	return plans[0].Plan, strings.Join(lines, "\n")
}

// Every filter of GET /api/v1/events (docs/http-api.md: cloud, platform,
// project_id, resource_type, resource_id, event_type, source, from, to,
// cursor), alone and in the combinations clients page by, plans as an index
// scan over 200k events: no sequential scan of events, and no sort but of
// rows an index condition selects (migration 00011). A filter that leads an
// index in the listing's order reads one page of it; two such filters
// together (project_id and event_type) may intersect both and sort the
// intersection.
func TestEventListingPlans(t *testing.T) {
	if testing.Short() {
		t.Skip("inserts 200k rows")
	}
	db := pgtest.DB(t, pgstore.Options{})
	ctx := context.Background()
	pool := pgstore.PoolOf(db)
	if _, err := db.MakePartitions(ctx, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 31, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	// 200k events over 30 days: 4 clouds, 3 platforms, 50 projects, 5
	// resource types, 20k resources (10 events each), 20 event types,
	// reconciliation 5 % of the events.
	if _, err := pool.Exec(ctx, `
INSERT INTO events (event_id, timestamp, event_type, platform, cloud, resource_type, resource_id,
                    project_id, source, payload, category, received_at)
SELECT 'ev-' || i, timestamptz '2026-01-01' + (i * interval '13 seconds'),
       'compute.instance.' || (i % 20), 'platform-' || (i % 3), 'cloud-' || (i % 4),
       'type-' || (i % 5), 'res-' || (i % 20000), 'project-' || (i % 50),
       CASE WHEN i % 20 = 0 THEN 'reconciliation' ELSE 'collector' END,
       '{}'::json, 'compute', timestamptz '2026-01-01' + (i * interval '13 seconds')
FROM generate_series(1, 200000) AS i`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE events`); err != nil {
		t.Fatal(err)
	}
	mid := time.Date(2026, 1, 15, 0, 0, 0, 0, time.UTC)
	after := &ingest.EventPosition{Timestamp: mid, EventID: "ev-93046"}
	tests := []struct {
		name string
		q    ingest.EventQuery
	}{
		{"no filter", ingest.EventQuery{}},
		{"cloud", ingest.EventQuery{Cloud: "cloud-1"}},
		{"platform", ingest.EventQuery{Platform: "platform-2"}},
		{"project_id", ingest.EventQuery{ProjectID: "project-7"}},
		{"resource_type", ingest.EventQuery{ResourceType: "type-3"}},
		{"resource_id", ingest.EventQuery{ResourceID: "res-123"}},
		{"event_type", ingest.EventQuery{EventType: "compute.instance.4"}},
		{"source collector", ingest.EventQuery{Source: event.Source("collector")}},
		{"source reconciliation", ingest.EventQuery{Source: event.Source("reconciliation")}},
		{"from", ingest.EventQuery{From: mid}},
		{"from and to", ingest.EventQuery{From: mid, To: mid.Add(24 * time.Hour)}},
		{"cloud and resource_type", ingest.EventQuery{Cloud: "cloud-1", ResourceType: "type-1"}},
		{"resource", ingest.EventQuery{Cloud: "cloud-3", ResourceType: "type-3", ResourceID: "res-123"}},
		{"cloud and project_id", ingest.EventQuery{Cloud: "cloud-2", ProjectID: "project-2"}},
		{"project_id and event_type", ingest.EventQuery{ProjectID: "project-2", EventType: "compute.instance.2"}},
		{"platform, cloud and source", ingest.EventQuery{Platform: "platform-1", Cloud: "cloud-1", Source: event.Source("reconciliation")}},
		{"project_id in a window", ingest.EventQuery{ProjectID: "project-9", From: mid, To: mid.Add(72 * time.Hour)}},
		{"event_type in a window", ingest.EventQuery{EventType: "compute.instance.9", From: mid, To: mid.Add(72 * time.Hour)}},
	}
	const limit = 101 // ingest.Service asks for one row more than the page
	for _, tt := range tests {
		for _, cursor := range []bool{false, true} {
			name := tt.name
			q := tt.q
			q.Limit = limit
			if cursor {
				name += ", after a cursor"
				q.After = after
			}
			t.Run(name, func(t *testing.T) {
				query, args := pgstore.EventsQuery(q)
				checkPlan(t, db, "events", query, args...)
			})
		}
	}
}

// The other listings, over 200k rows each: GET /api/v1/rejected-events
// (from, to, cursor), GET /api/v1/audit (action, from, to, cursor) and GET
// /api/v1/resources (cloud, platform, resource_type, project_id, state,
// status, cursor) plan as index scans, with no sequential scan and no sort
// but of rows an index condition selects.
func TestOtherListingPlans(t *testing.T) {
	if testing.Short() {
		t.Skip("inserts 600k rows")
	}
	db := pgtest.DB(t, pgstore.Options{})
	ctx := context.Background()
	pool := pgstore.PoolOf(db)
	for _, stmt := range []string{`
INSERT INTO dead_letters (raw, raw_size, reason, event_id, received_at)
SELECT '\x7b7d'::bytea, 2, 'invalid', 'ev-' || i, timestamptz '2026-01-01' + (i * interval '13 seconds')
FROM generate_series(1, 200000) AS i`, `
INSERT INTO audit_log (at, action, credential, event_id, platform, cloud)
SELECT timestamptz '2026-01-01' + (i * interval '13 seconds'),
       CASE WHEN i % 10 = 0 THEN 'events.conflict' ELSE 'events.scope_violation' END,
       'collector-' || (i % 4), 'ev-' || i, 'platform-' || (i % 3), 'cloud-' || (i % 4)
FROM generate_series(1, 200000) AS i`, `
INSERT INTO current_resources (cloud, resource_type, resource_id, platform, project_id, state,
                               created_at, deleted_at, first_event_at, last_event_at, last_event_type, last_event_id)
SELECT 'cloud-' || (i % 4), 'type-' || (i % 5), 'res-' || i, 'platform-' || (i % 3), 'project-' || (i % 50),
       CASE WHEN i % 1000 = 0 THEN 'error' WHEN i % 10 = 0 THEN 'deleted' ELSE 'active' END,
       t, CASE WHEN i % 10 = 0 THEN t + interval '1 day' END, t, t, 'compute.instance.create.end', 'ev-' || i
FROM generate_series(1, 200000) AS i, LATERAL (SELECT timestamptz '2026-01-01' + (i * interval '13 seconds') AS t) AS t`,
		`ANALYZE dead_letters, audit_log, current_resources`,
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	mid := time.Date(2026, 1, 15, 0, 0, 0, 0, time.UTC)
	const limit = 101
	pos := &ingest.Position{At: mid, ID: 93046}
	for name, q := range map[string]ingest.DeadLetterQuery{
		"no filter": {}, "from": {From: mid}, "from and to": {From: mid, To: mid.Add(24 * time.Hour)}, "cursor": {After: pos},
	} {
		t.Run("dead letters: "+name, func(t *testing.T) {
			q.Limit = limit
			query, args := pgstore.DeadLettersQuery(q)
			checkPlan(t, db, "dead_letters", query, args...)
		})
	}
	for name, q := range map[string]ingest.AuditQuery{
		"no filter": {}, "action": {Action: "events.conflict"}, "from": {From: mid}, "cursor": {After: pos},
		"action after a cursor": {Action: "events.conflict", After: pos}, "action in a window": {Action: "events.conflict", From: mid, To: mid.Add(24 * time.Hour)},
	} {
		t.Run("audit: "+name, func(t *testing.T) {
			q.Limit = limit
			query, args := pgstore.AuditQuery(q)
			checkPlan(t, db, "audit_log", query, args...)
		})
	}
	key := &projection.Key{Cloud: "cloud-1", ResourceType: "type-2", ResourceID: "res-5000"}
	for name, q := range map[string]projection.Query{
		"no filter": {}, "cloud": {Cloud: "cloud-2"}, "platform": {Platform: "platform-1"},
		"resource_type": {ResourceType: "type-4"}, "project_id": {ProjectID: "project-3"},
		"state": {State: "active"}, "status deleted": {Status: projection.StatusDeleted},
		"alive_at": {AliveAt: mid}, "cursor": {After: key}, "cloud after a cursor": {Cloud: "cloud-1", After: key},
	} {
		t.Run("resources: "+name, func(t *testing.T) {
			q.Limit = limit
			query, args := pgstore.ResourcesQuery(q)
			checkPlan(t, db, "current_resources", query, args...)
		})
	}
}

// getEventSummaryByUser and getEventsAggregate (Correlate.Counts) are one
// GROUP BY each, over 200k correlated events of 20 organizations: for an
// events caller (its own user) and for a reader (its whole organization),
// with and without filters, no sequential scan of correlated_events and no
// sort but of rows an index condition selects (migration 00007's
// (organization, user_id, created_at, id) index).
func TestCorrelatedCountPlans(t *testing.T) {
	if testing.Short() {
		t.Skip("inserts 200k rows")
	}
	db := pgtest.DB(t, pgstore.Options{})
	ctx := context.Background()
	pool := pgstore.PoolOf(db)
	for _, stmt := range []string{`
INSERT INTO correlated_events (id, organization, user_id, category, action, severity, status, description, created_at, updated_at)
SELECT gen_random_uuid(), 'org-' || (i % 20), 'user-' || (i % 200), 'category-' || (i % 7), 'action', 
       (ARRAY['emergency','alert','critical','error','warning','notice','informational','success'])[1 + i % 8],
       CASE WHEN i % 3 = 0 THEN 'read' ELSE 'unread' END, 'event ' || i, t, t
FROM generate_series(1, 200000) AS i, LATERAL (SELECT timestamptz '2026-01-01' + (i * interval '13 seconds') AS t) AS t`,
		`ANALYZE correlated_events`,
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	own := correlate.Caller{Organization: "org-3", User: "user-3"}
	reader := correlate.Caller{Organization: "org-3", AllUsers: true}
	for _, tt := range []struct {
		name   string
		caller correlate.Caller
		q      correlate.Query
		by     correlate.CountKey
	}{
		{"summary, own user", own, correlate.Query{}, correlate.CountByUser},
		{"summary, reader", reader, correlate.Query{}, correlate.CountByUser},
		{"summary, reader, category and search", reader, correlate.Query{Category: []string{"category-2"}, Search: "event 1"}, correlate.CountByUser},
		{"aggregate, own user, unread", own, correlate.Query{Status: []correlate.Status{correlate.StatusUnread}}, correlate.CountByCategory},
		{"aggregate, reader, cumulative", reader, correlate.Query{}, correlate.CountByCategory},
	} {
		t.Run(tt.name, func(t *testing.T) {
			query, args := pgstore.CountsQuery(tt.caller, tt.q, tt.by)
			checkPlan(t, db, "correlated_events", query, args...)
		})
	}
}
