package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/pgtest"
)

// "bounded DDL: lock_timeout … lock_timeout hit while another session
// holds a lock on events (answer 503 with Retry-After, nothing
// half-written)": a session holds SHARE ROW EXCLUSIVE on events (which
// ATTACH PARTITION's SHARE UPDATE EXCLUSIVE waits for, inserts into
// existing partitions do not); a batch of a month without a partition is
// answered 503 with Retry-After within a few seconds, leaves no table
// behind, and is stored once the lock is gone.
func TestPartitionLockTimeoutAnswers503(t *testing.T) {
	ctx := context.Background()
	u := pgtest.PartitionedURL(t)
	d := startTallyd(t, "--credentials-file", writeCredentials(t), "--database-url", u)
	body := fmt.Appendf(nil, `{"event_id":"lk-1","event_type":"volume.create.end","timestamp":"2019-06-15T00:00:00Z","platform":"openstack","cloud":%q,`+
		`"resource_type":"volume","resource_id":"v-lk1","project_id":"p","source":"collector","payload":{"state":"available","size":{"size_gb":1,"type":"ssd"}}}`, e2eCloud)
	holder, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE events IN SHARE ROW EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	status, header, b := call(t, "POST", d.base+"/api/v1/events", tokIngest, body)
	took := time.Since(began)
	if status != http.StatusServiceUnavailable || header.Get("Retry-After") == "" || took > 10*time.Second {
		t.Errorf("a new month while events is locked: %d, Retry-After %q, after %v: %s; want 503 with Retry-After within the lock timeout", status, header.Get("Retry-After"), took, b)
	}
	var left bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass('events_2019_06') IS NOT NULL`).Scan(&left); err != nil || left {
		t.Errorf("events_2019_06 exists after the refused batch: %v, %v; want nothing half-written", left, err)
	}
	_ = tx.Rollback(ctx)
	if status, _, b := call(t, "POST", d.base+"/api/v1/events", tokIngest, body); status != http.StatusOK {
		t.Errorf("the same batch once the lock is gone: %d %s; want stored", status, b)
	}
}
