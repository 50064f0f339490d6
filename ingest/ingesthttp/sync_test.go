package ingesthttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/ingesthttp"
	"github.com/tallyhq/tally/ingest/reconcile"
)

const syncBody = `{"platform":"openstack","observed_at":"2026-03-01T12:00:00Z","complete_types":["instance"],` +
	`"resources":[{"resource_type":"instance","resource_id":"vm-1","project_id":"p1","state":"active",` +
	`"size":{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"}}]}`

func (s *server) sync(t *testing.T, method, path, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// POST /api/v1/clouds/{cloud}/sync: "the same observation posted twice
// stores each synthetic event once and records two runs, the second with
// everything unchanged", on both stores, through the route.
func TestSyncRouteTwice(t *testing.T) {
	bothStores(t, func(t *testing.T, st stores) {
		s := newServer(t, st, 0)
		type answer struct {
			RunID                                                  int64 `json:"run_id"`
			Created, Updated, Deleted, Unchanged, Skipped, Refused int
			EventIDs                                               []string `json:"event_ids"`
		}
		var got []answer
		for range 2 {
			status, body := s.sync(t, "POST", "/api/v1/clouds/c1/sync", "sync", syncBody)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			var a answer
			if err := json.Unmarshal([]byte(body), &a, json.MatchCaseInsensitiveNames(true)); err != nil {
				t.Fatal(err)
			}
			got = append(got, a)
		}
		id := event.DeterministicID("openstack", "c1", "vm-1", reconcile.TypeCreate, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
		want := []answer{{RunID: got[0].RunID, Created: 1, EventIDs: []string{id}}, {RunID: got[1].RunID, Unchanged: 1, EventIDs: []string{}}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("answers (-want +got):\n%s", diff)
		}
		status, body := s.sync(t, "GET", "/api/v1/sync-runs?cloud=c1", "ok", "")
		if status != 200 || strings.Count(body, `"run_id"`) != 2 {
			t.Errorf("sync-runs: %d %s", status, body)
		}
		evs, err := st.Events(context.Background(), ingest.EventQuery{Source: event.SourceReconciliation})
		if err != nil || len(evs) != 1 {
			t.Errorf("synthetic events %v, %v; want one", evs, err)
		}
	})
}

// A malformed observation is 400 naming every member and rule, and
// changes nothing; a scope the credential lacks is 403; no caller 401.
func TestSyncRouteRefuses(t *testing.T) {
	s := newServer(t, memIngest(t), 0)
	type problem struct{ Member, Rule string }
	cases := []struct {
		name, path, token, body string
		status                  int
		want                    []problem
	}{
		{"not JSON", "/api/v1/clouds/c1/sync", "sync", `{`, 400, []problem{{"", "syntax"}}},
		{"unknown member", "/api/v1/clouds/c1/sync", "sync", `{"platform":"openstack","Observed_at":"x"}`, 400,
			[]problem{{"/Observed_at", "additionalProperties"}}},
		{"wrong type", "/api/v1/clouds/c1/sync", "sync", `{"platform":7}`, 400, []problem{{"/platform", "type"}}},
		{"every rule at once", "/api/v1/clouds/c1/sync", "sync",
			`{"platform":"meta","observed_at":"2026-03-01 12:00","complete_types":["instance","instance"],` +
				`"resources":[{"resource_type":"instance","resource_id":"vm-1","project_id":"","state":"deleted","size":7},` +
				`{"resource_type":"instance","resource_id":"vm-1","project_id":"p","state":"up","size":{}}],` +
				`"deletes":[{"resource_type":"volume","resource_id":"v","deleted_at":""}],` +
				`"size_names":[{"resource_type":"volume","member":"type","value":"","name":"n"}]}`, 400,
			[]problem{
				{"/observed_at", "format"}, {"/platform", "reserved"}, {"/complete_types/1", "duplicateMember"},
				{"/resources/0/project_id", "required"}, {"/resources/0/state", "reserved"}, {"/resources/0/size", "type"},
				{"/resources/1", "duplicateMember"},
				{"/deletes/0/resource_type", "enum"},
				{"/size_names/0/value", "required"},
			}},
		{"deleted_at after observed_at", "/api/v1/clouds/c1/sync", "sync",
			`{"platform":"openstack","observed_at":"2026-03-01T12:00:00Z","complete_types":["instance"],` +
				`"deletes":[{"resource_type":"instance","resource_id":"v","deleted_at":"2026-03-02T00:00:00Z"}]}`, 400,
			[]problem{{"/deletes/0/deleted_at", "maximum"}}},
		{"another cloud than the scope", "/api/v1/clouds/c2/sync", "sync", syncBody, 403, nil},
		{"another platform than the scope", "/api/v1/clouds/c1/sync", "sync", strings.Replace(syncBody, `"openstack"`, `"vmware"`, 1), 403, nil},
		{"no caller", "/api/v1/clouds/c1/sync", "", syncBody, 401, nil},
		{"a query parameter", "/api/v1/clouds/c1/sync?dry_run=1", "sync", syncBody, 400, []problem{{"/dry_run", "additionalProperties"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := s.sync(t, "POST", tc.path, tc.token, tc.body)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, body)
			}
			if tc.want == nil {
				return
			}
			var p struct{ Errors []problem }
			if err := json.Unmarshal([]byte(body), &p, json.MatchCaseInsensitiveNames(true)); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, p.Errors); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
	if evs := eventsOf(t, s.store); len(evs) != 0 {
		t.Errorf("%d events stored by refused runs", len(evs))
	}
	if status, body := s.sync(t, "GET", "/api/v1/sync-runs?limit=0", "ok", ""); status != 400 || !strings.Contains(body, `"/limit"`) {
		t.Errorf("limit=0: %d %s", status, body)
	}
}

func eventsOf(t *testing.T, st ingest.Store) []ingest.StoredEvent {
	t.Helper()
	evs, err := st.Events(context.Background(), ingest.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// Client.Sync and Client.SyncRuns against the route; an invalid
// observation is never sent.
func TestClientSync(t *testing.T) {
	s := newServer(t, memIngest(t), 0)
	c, err := ingesthttp.NewClient(s.URL, ingesthttp.ClientOptions{Token: "sync"})
	if err != nil {
		t.Fatal(err)
	}
	obs := reconcile.Observation{Platform: "openstack", ObservedAt: t0, CompleteTypes: []string{"instance"},
		Resources: []reconcile.Resource{{ResourceType: "instance", ResourceID: "vm-1", ProjectID: "p1", State: "active",
			Size: jsontext.Value(`{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"}`)}}}
	out, err := c.Sync(context.Background(), "c1", obs)
	if err != nil {
		t.Fatal(err)
	}
	if out.Created != 1 || len(out.EventIDs) != 1 {
		t.Errorf("outcome %+v, want one create", out)
	}
	if _, err := c.Sync(context.Background(), "c2", obs); err == nil {
		t.Error("a cloud outside the scope: no error")
	} else if se := (*ingesthttp.StatusError)(nil); !errors.As(err, &se) || se.StatusCode != 403 {
		t.Errorf("a cloud outside the scope: %v, want a 403 StatusError", err)
	}
	bad := obs
	bad.Platform = ""
	if _, err := c.Sync(context.Background(), "c1", bad); !errors.Is(err, event.ErrInvalid) {
		t.Errorf("invalid observation: %v, want event.ErrInvalid", err)
	}
	reader, err := ingesthttp.NewClient(s.URL, ingesthttp.ClientOptions{Token: "ok"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := reader.SyncRuns(context.Background(), reconcile.RunFilter{Cloud: "c1", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 1 || p.Items[0].ID != out.RunID || p.Items[0].Created != 1 || p.NextCursor != nil {
		t.Errorf("runs %+v, want the one run", p)
	}
}

// Client.Sync: "a 200 means all of it is stored" (docs/reconciliation.md).
// A 200 whose answer cannot be read (cut by a proxy, or past the client's
// cap on answers) is a committed run: it is an error, never retried, as a
// retry runs the observation again (another run recorded, and every event
// it refuses dead-lettered once more).
func TestClientSyncUnreadableAnswerNotRetried(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"run_id":7,"created":1,"event_ids":["openstack-3f`) // cut
	}))
	defer srv.Close()
	c, err := ingesthttp.NewClient(srv.URL, ingesthttp.ClientOptions{Token: "sync", MaxAttempts: 3, Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	obs := reconcile.Observation{Platform: "openstack", ObservedAt: t0,
		Resources: []reconcile.Resource{{ResourceType: "instance", ResourceID: "vm-1", ProjectID: "p1", State: "active",
			Size: jsontext.Value(`{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"}`)}}}
	if _, err := c.Sync(context.Background(), "c1", obs); err == nil {
		t.Error("an answer cut short: no error")
	}
	if n := posts.Load(); n != 1 {
		t.Errorf("%d posts of the observation, want 1: the first run was committed", n)
	}
}
