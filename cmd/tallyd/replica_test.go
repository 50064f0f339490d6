package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tallyhq/tally/internal/pgtest"
)

// tallyd --read-database-url: the binary serves the listings from the
// replica (docs/scale-out.md, Read replicas), the answer saying
// Tally-As-Of, while writes go to the primary.
func TestReadDatabaseURL(t *testing.T) {
	pair := pgtest.Replica(t)
	d := startTallyd(t, "--credentials-file", writeCredentials(t), "--database-url", pair.PrimaryURL, "--read-database-url", pair.ReplicaURL)
	body := fmt.Appendf(nil, `{"event_id":"r-1","event_type":"volume.create.end","timestamp":"2026-11-01T00:00:00Z","platform":"openstack","cloud":%q,`+
		`"resource_type":"volume","resource_id":"v-r1","project_id":"p","source":"collector","payload":{"state":"available","size":{"size_gb":1,"type":"ssd"}}}`, e2eCloud)
	if status, _, b := call(t, "POST", d.base+"/api/v1/events", tokIngest, body); status != http.StatusOK {
		t.Fatalf("ingest: %d %s", status, b)
	}
	pair.WaitReplayed(t)
	status, header, b := call(t, "GET", d.base+"/api/v1/resources", tokAdmin, nil)
	if status != http.StatusOK || header.Get("Tally-As-Of") == "" || !strings.Contains(string(b), "v-r1") {
		t.Errorf("GET /api/v1/resources: %d, Tally-As-Of %q, body %s; want the replica's answer with v-r1", status, header.Get("Tally-As-Of"), b)
	}
}
