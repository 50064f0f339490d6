package server

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/cmd/tallyd/server/internal/apiclient"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// "A test generates a Go client from the document (oapi-codegen,
// pinned as a tool dependency in go.mod) and uses it to ingest an event
// (accepted 1) and to create a correlated event, against the live server."
// The client is generated into internal/apiclient (go generate there);
// TestGeneratedClientIsCurrent regenerates it and wants the same bytes.

func TestGeneratedClientIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("builds oapi-codegen")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	dir := filepath.Join("internal", "apiclient")
	// The committed configuration, writing into a temporary file instead.
	tmp := t.TempDir()
	out := filepath.Join(tmp, "client.gen.go")
	cfg, err := os.ReadFile(filepath.Join(dir, "oapi-codegen.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg = bytes.Replace(cfg, []byte("\noutput: client.gen.go\n"), []byte("\noutput: "+out+"\n"), 1)
	if err := os.WriteFile(filepath.Join(tmp, "config.yaml"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goBin, "tool", "oapi-codegen", "-config", filepath.Join(tmp, "config.yaml"), "../../openapi.yaml")
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oapi-codegen: %v\n%s", err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(dir, "client.gen.go"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("internal/apiclient/client.gen.go is stale; run go generate ./cmd/tallyd/server/internal/apiclient (-committed +regenerated):\n%s", diff)
	}
}

func TestGeneratedClient(t *testing.T) {
	stores := []struct {
		name string
		open func(t *testing.T) Store
	}{
		{"memstore", func(t *testing.T) Store { return memStore(t) }},
		{"pgstore", func(t *testing.T) Store { return pgStore(pgtest.Open(t, pgtest.URL(t), pgstore.Options{})) }},
	}
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			srv := httptest.NewServer(contractHandler(t, s.open(t)))
			t.Cleanup(srv.Close)
			ctx := context.Background()
			client := func(token string) *apiclient.ClientWithResponses {
				c, err := apiclient.NewClientWithResponses(srv.URL, apiclient.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
					r.Header.Set("Authorization", "Bearer "+token)
					return nil
				}))
				if err != nil {
					t.Fatal(err)
				}
				return c
			}

			t.Run("ingest one event", func(t *testing.T) {
				var body apiclient.IngestBody
				if err := body.FromCanonicalEvent(apiclient.CanonicalEvent{
					EventId: "gen-1", Timestamp: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), EventType: "widget.create.end",
					Platform: "openstack", Cloud: "os-a", ResourceType: "widget", ResourceId: "w-gen", ProjectId: "p-1",
					Payload: map[string]any{"state": "active", "size": map[string]any{"n": 1}},
				}); err != nil {
					t.Fatal(err)
				}
				resp, err := client(tIngest).IngestEventsWithResponse(ctx, body)
				if err != nil {
					t.Fatal(err)
				}
				if resp.JSON200 == nil {
					t.Fatalf("status %d: %s", resp.StatusCode(), resp.Body)
				}
				want := apiclient.IngestResult{Accepted: 1, Rejected: []struct {
					EventId string `json:"event_id"`
					Index   int    `json:"index"`
					Reason  string `json:"reason"`
				}{}}
				if diff := cmp.Diff(want, *resp.JSON200); diff != "" {
					t.Errorf("ingest result (-want +got):\n%s", diff)
				}
			})

			t.Run("ingest a batch", func(t *testing.T) {
				var body apiclient.IngestBody
				if err := body.FromIngestBatch(apiclient.IngestBatch{{
					EventId: "gen-2", Timestamp: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), EventType: "widget.create.end",
					Platform: "openstack", Cloud: "os-a", ResourceType: "widget", ResourceId: "w-gen-2", ProjectId: "p-1",
					Payload: map[string]any{"state": "active", "size": map[string]any{"n": 2}},
				}}); err != nil {
					t.Fatal(err)
				}
				resp, err := client(tIngest).IngestEventsWithResponse(ctx, body)
				if err != nil {
					t.Fatal(err)
				}
				if resp.JSON200 == nil || resp.JSON200.Accepted != 1 {
					t.Fatalf("status %d: %s, want accepted 1", resp.StatusCode(), resp.Body)
				}
			})

			t.Run("create a correlated event", func(t *testing.T) {
				key := "gen-conn"
				payload := apiclient.EventPayload{Category: "connection", Action: "fail", CorrelationKey: &key,
					AdditionalProperties: map[string]any{"x-extra": "kept"}}
				first, err := client(tEvents).CreateEventWithResponse(ctx, nil, payload)
				if err != nil {
					t.Fatal(err)
				}
				if first.JSON201 == nil {
					t.Fatalf("first create: status %d: %s", first.StatusCode(), first.Body)
				}
				if got := first.HTTPResponse.Header.Get("Event-Disposition"); got != "created" {
					t.Errorf("first create: Event-Disposition %q, want created", got)
				}
				idem := "gen-idem-1"
				second, err := client(tEvents).CreateEventWithResponse(ctx, &apiclient.CreateEventParams{IdempotencyKey: &idem}, payload)
				if err != nil {
					t.Fatal(err)
				}
				if second.JSON200 == nil {
					t.Fatalf("second create: status %d: %s", second.StatusCode(), second.Body)
				}
				if got := second.HTTPResponse.Header.Get("Event-Disposition"); got != "incremented" {
					t.Errorf("second create: Event-Disposition %q, want incremented", got)
				}
				if second.JSON200.Id != first.JSON201.Id || second.JSON200.OccurrenceCount == nil || *second.JSON200.OccurrenceCount != 2 {
					t.Errorf("second create: %s, want the first event (%s) with occurrenceCount 2", second.Body, first.JSON201.Id)
				}
			})
		})
	}
}
