package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// `tallyd projection rebuild` recomputes the rows from the events, in
// bounded steps with progress, and gives the incremental rows back.
func TestProjectionRebuild(t *testing.T) {
	url := pgtest.URL(t)
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
	var items [][]byte
	for i := range 5 {
		items = append(items, fmt.Appendf(nil, `{"event_id":"e%d","timestamp":"2026-03-01T12:00:0%dZ","event_type":"volume.create.end","platform":"openstack","cloud":"c1","resource_type":"volume","resource_id":"v%d","project_id":"p","payload":{"state":"available","size":{"size_gb":%d,"type":"ssd"}}}`, i, i, i, i+1))
	}
	if res, err := svc.Ingest(ctx, ingest.Caller{Credential: "test"}, items); err != nil || res.Accepted != 5 {
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
	err = run(ctx, []string{"projection", "rebuild", "--cloud", "c1", "--resource-type", "volume", "--batch-size", "2"},
		env(map[string]string{"TALLY_DATABASE_URL": url}), &out, io.Discard)
	if err != nil {
		t.Fatalf("projection rebuild: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if diff := cmp.Diff([]string{"rebuilt 2 resources", "rebuilt 4 resources", "rebuilt 5 resources"}, lines[:len(lines)-1]); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(lines[len(lines)-1], "projection rebuilt: 5 resources in ") {
		t.Errorf("last line %q", lines[len(lines)-1])
	}
	after, err := proj.List(ctx, projection.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("rebuild changed the rows (-incremental +rebuilt):\n%s", diff)
	}
}

func TestProjectionRebuildUsage(t *testing.T) {
	for _, args := range [][]string{
		{"projection"},
		{"projection", "refresh"},
		{"projection", "rebuild"}, // no database
		{"projection", "rebuild", "--database-url", "postgres://x", "--batch-size", "0"},
		{"projection", "rebuild", "--database-url", "postgres://x", "extra"},
	} {
		err := run(context.Background(), args, env(nil), io.Discard, io.Discard)
		if !errors.Is(err, errUsage) {
			t.Errorf("tallyd %s: %v, want a usage error", strings.Join(args, " "), err)
		}
	}
	var out bytes.Buffer
	// Never print secrets: the URL in the environment, password included,
	// is not shown as the flag's default.
	secret := "postgres://tally:s3cret-password@db.example:5432/tally"
	if err := run(context.Background(), []string{"projection", "rebuild", "--help"}, env(map[string]string{"TALLY_DATABASE_URL": secret}), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "--resource-type") {
		t.Errorf("help lacks --resource-type:\n%s", out.String())
	}
	if strings.Contains(out.String(), "s3cret-password") {
		t.Errorf("help prints the database password:\n%s", out.String())
	}
}
