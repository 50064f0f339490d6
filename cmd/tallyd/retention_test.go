package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// `tallyd retention --keep-events 365d` drops the partition of a month
// more than a year old, and `tallyd projection rebuild` afterwards gives
// the rows from before; a late event of that month is then refused.
func TestRetentionCommand(t *testing.T) {
	url := pgtest.PartitionedURL(t)
	ctx := context.Background()
	st, err := pgstore.Open(ctx, url, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc, err := ingest.New(st.Ingest(), ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().UTC().AddDate(-2, 0, 0).Format("2006-01-02T15:04:05Z")
	recent := time.Now().UTC().Add(-time.Hour).Format("2006-01-02T15:04:05Z")
	item := func(id, ts, kind string, gb int) []byte {
		return fmt.Appendf(nil, `{"event_id":"%s","timestamp":"%s","event_type":"volume.%s.end","platform":"openstack","cloud":"c1","resource_type":"volume","resource_id":"v1","project_id":"p","payload":{"state":"available","size":{"size_gb":%d,"type":"ssd"}}}`, id, ts, kind, gb)
	}
	if res, err := svc.Ingest(ctx, ingest.Caller{Credential: "test"}, [][]byte{item("e1", old, "create", 1), item("e2", recent, "resize", 2)}); err != nil || res.Accepted != 2 {
		t.Fatalf("ingest: %+v, %v", res, err)
	}
	proj, err := projection.New(st.Projection(), svc)
	if err != nil {
		t.Fatal(err)
	}
	before, err := proj.List(ctx, projection.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(ctx, []string{"retention", "--keep-events", "365d", "--keep-dead-letters", "720h"},
		env(map[string]string{"TALLY_DATABASE_URL": url}), &out, io.Discard); err != nil {
		t.Fatalf("retention: %v", err)
	}
	if !strings.Contains(out.String(), "partitions dropped: 1 ") || !strings.Contains(out.String(), "(1 events)") {
		t.Errorf("retention output:\n%s", out.String())
	}
	if err := run(ctx, []string{"projection", "rebuild"}, env(map[string]string{"TALLY_DATABASE_URL": url}), io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	after, err := proj.List(ctx, projection.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("projection rebuilt after retention (-before +after):\n%s", diff)
	}
	res, err := svc.Ingest(ctx, ingest.Caller{Credential: "test"}, [][]byte{item("e0", old, "resize", 9)})
	if err != nil || len(res.Rejected) != 1 || !strings.HasPrefix(res.Rejected[0].Reason, "retention: ") {
		t.Errorf("an event from before the horizon: %+v, %v; want refused (retention)", res, err)
	}
}

// Bad retention flags are usage errors naming the flag.
func TestRetentionCommandUsage(t *testing.T) {
	for _, args := range [][]string{
		{"retention"}, // no database
		{"retention", "--database-url", "postgres://x", "--keep-events", "5x"},
		{"retention", "--database-url", "postgres://x", "--keep-audit", "-1h"},
		{"retention", "--database-url", "postgres://x", "--batch-size", "0"},
		{"retention", "--database-url", "postgres://x", "extra"},
	} {
		err := run(context.Background(), args, env(nil), io.Discard, io.Discard)
		if !errors.Is(err, errUsage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"retention", "--help"}, env(nil), &out, io.Discard); err != nil || !strings.Contains(out.String(), "--keep-deleted-events") {
		t.Errorf("--help: %v\n%s", err, out.String())
	}
}
