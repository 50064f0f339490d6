package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
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

// "the replica's schema version lower than the binary's must not give
// 500s on reads: detect at start": --read-database-url naming a database
// at an older migration (here a schema left at the unpartitioned layout),
// one that is not a standby, or the primary's own database. tallyd
// refused none of them and served the reads of the first from tables it
// lacks (500s). Now the first two are refused at start naming the
// versions or the reason, and the third serves (nothing taken off the
// primary, which the log says).
func TestReadDatabaseURLChecked(t *testing.T) {
	ctx := context.Background()
	primary := pgtest.PartitionedURL(t)
	older := pgtest.EmptyURL(t)
	db := pgtest.Open(t, older, pgstore.Options{})
	if _, err := db.MigrateTo(ctx, pgtest.LastUnpartitioned); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, read string
		want       error
		msg        string
	}{
		{"older schema", older, pgstore.ErrSchemaOlder, fmt.Sprintf("at migration %05d", pgtest.LastUnpartitioned)},
		{"not a standby", pgtest.PartitionedURL(t), pgstore.ErrNotStandby, "not in recovery"},
		{"the primary itself", primary, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			c := config{DatabaseURL: primary, ReadDatabaseURL: tt.read, DBConnectTimeout: time.Second}
			st, closeStore, _, err := openStore(ctx, c, slog.New(slog.NewTextHandler(&logs, nil)))
			if err == nil {
				defer closeStore()
			}
			switch {
			case tt.want != nil && (!errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) || !strings.Contains(err.Error(), "--read-database-url")):
				t.Errorf("openStore: %v; want %v saying %q and naming --read-database-url", err, tt.want, tt.msg)
			case tt.want == nil && (err != nil || st.Replica == nil || !strings.Contains(logs.String(), "the primary's own database")):
				t.Errorf("openStore: %v, replica %v, logs %s; want the replica served and a warning", err, st.Replica != nil, logs.String())
			}
		})
	}
}

// "replica promoted (no longer in recovery — then it is a diverged
// primary)": a standby accepted at start that is promoted afterwards is
// no longer read: its answers would diverge from the primary's while
// Tally-As-Of said now(). The primary answers (no Tally-As-Of), and a
// promoted standby is refused at start.
func TestReadReplicaPromoted(t *testing.T) {
	pair := pgtest.Replica(t)
	d := startTallyd(t, "--credentials-file", writeCredentials(t), "--database-url", pair.PrimaryURL, "--read-database-url", pair.ReplicaURL)
	pair.WaitReplayed(t)
	if status, header, b := call(t, "GET", d.base+"/api/v1/resources", tokAdmin, nil); status != http.StatusOK || header.Get("Tally-As-Of") == "" {
		t.Fatalf("before the promotion: %d, Tally-As-Of %q, %s; want the replica's answer", status, header.Get("Tally-As-Of"), b)
	}
	pair.Promote(t)
	if status, header, b := call(t, "GET", d.base+"/api/v1/resources", tokAdmin, nil); status != http.StatusOK || header.Get("Tally-As-Of") != "" {
		t.Errorf("after the promotion: %d, Tally-As-Of %q, %s; want the primary's answer (no Tally-As-Of)", status, header.Get("Tally-As-Of"), b)
	}
	c := config{DatabaseURL: pair.PrimaryURL, ReadDatabaseURL: pair.ReplicaURL, DBConnectTimeout: time.Second}
	if _, _, _, err := openStore(context.Background(), c, slog.New(slog.DiscardHandler)); !errors.Is(err, pgstore.ErrNotStandby) {
		t.Errorf("start on a promoted standby: %v; want pgstore.ErrNotStandby", err)
	}
}
