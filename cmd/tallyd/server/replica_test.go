package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/internal/feed"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// The read-only routes answer from a streaming replica (docs/scale-out.md,
// Read replicas), each answer saying how fresh it is: Tally-As-Of, and a
// usage answer's as_of. A usage as_of the replica has not replayed, and a
// replica that does not answer, are answered by the primary: the same
// as_of gives the same body whoever answers it.
func TestReadReplica(t *testing.T) {
	pair := pgtest.Replica(t)
	ctx := context.Background()
	primary := pgtest.Open(t, pair.PrimaryURL, pgstore.Options{})
	if _, err := primary.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	replica := pgtest.Open(t, pair.ReplicaURL, pgstore.Options{})
	st := pgStore(primary)
	st.Replica = &Replica{Projection: replica.Projection(), Usage: replica.Ingest(), ReplayedAt: replica.ReplayedAt}
	h, err := New(st, Options{Authenticator: testAuthenticator(t)})
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, path, token, body string) *httptest.ResponseRecorder {
		t.Helper()
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body)
		}
		return w
	}
	ingestOne := func(id string) {
		t.Helper()
		do("POST", "/api/v1/events", tokIngest, "["+hostileEvent(id, "", "")+"]")
	}
	const usagePath = "/api/v1/usage?from=2026-03-01T00:00:00Z&to=2026-03-02T00:00:00Z&group_by=resource_id"
	type answer struct {
		AsOf  string `json:"as_of"`
		Items []struct {
			Group map[string]string `json:"group"`
		} `json:"items"`
	}
	usageOf := func(w *httptest.ResponseRecorder) (answer, []string) {
		t.Helper()
		var a answer
		if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
			t.Fatal(err)
		}
		ids := []string{}
		for _, it := range a.Items {
			ids = append(ids, it.Group["resource_id"])
		}
		return a, ids
	}
	fromReplica := func(w *httptest.ResponseRecorder) bool {
		t.Helper()
		v := w.Header().Get(AsOfHeader)
		if v == "" {
			return false
		}
		if _, err := time.Parse(time.RFC3339Nano, v); err != nil {
			t.Errorf("%s %q: %v", AsOfHeader, v, err)
		}
		return true
	}

	ingestOne("1")
	pair.WaitReplayed(t)
	w := do("GET", usagePath, tokAdmin, "")
	first, ids := usageOf(w)
	if !fromReplica(w) || strings.Join(ids, ",") != "vm-1" {
		t.Fatalf("usage: from the replica %v, resources %v; want the replica's answer with vm-1", fromReplica(w), ids)
	}

	// The replica stops replaying: it answers what it has, saying so.
	pair.PauseReplay(t)
	ingestOne("2")
	w = do("GET", "/api/v1/resources", tokAdmin, "")
	if !fromReplica(w) || strings.Contains(w.Body.String(), "vm-2") || !strings.Contains(w.Body.String(), "vm-1") {
		t.Errorf("resources while the replica is paused: from the replica %v, body %s; want vm-1 only, from the replica", fromReplica(w), w.Body)
	}
	w = do("GET", usagePath, tokAdmin, "")
	if a, ids := usageOf(w); !fromReplica(w) || a.AsOf != first.AsOf || strings.Join(ids, ",") != "vm-1" {
		t.Errorf("usage while the replica is paused: from the replica %v, as_of %q (want %q), resources %v", fromReplica(w), a.AsOf, first.AsOf, ids)
	}

	// A position only the primary has: the primary answers it.
	snap, err := primary.Ingest().Snapshot(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	head := feed.Encode(feed.Lifecycle, snap.Position)
	w = do("GET", usagePath+"&as_of="+head, tokAdmin, "")
	behind := w.Body.String()
	if a, ids := usageOf(w); fromReplica(w) || a.AsOf != head || strings.Join(ids, ",") != "vm-1,vm-2" {
		t.Errorf("usage as of the primary's head: from the replica %v, as_of %q (want %q), resources %v", fromReplica(w), a.AsOf, head, ids)
	}
	if got := scrape(t, h, `tally_read_replica_fallbacks_total{reason="behind"}`); got != "1" {
		t.Errorf("fallbacks behind = %q, want 1", got)
	}

	// Replayed, the replica answers the same as_of with the same body.
	pair.ResumeReplay(t)
	w = do("GET", usagePath+"&as_of="+head, tokAdmin, "")
	if !fromReplica(w) || w.Body.String() != behind {
		t.Errorf("usage as of the head once replayed: from the replica %v\n got %s\nwant %s", fromReplica(w), w.Body, behind)
	}

	// A replica that does not answer: the primary does.
	pair.StopReplica(t)
	for _, path := range []string{"/api/v1/resources", usagePath} {
		w = do("GET", path, tokAdmin, "")
		if fromReplica(w) || !strings.Contains(w.Body.String(), "vm-2") {
			t.Errorf("%s with the replica stopped: from the replica %v, body %s; want the primary's answer", path, fromReplica(w), w.Body)
		}
	}
	if got := scrape(t, h, `tally_read_replica_fallbacks_total{reason="unavailable"}`); got != "2" {
		t.Errorf("fallbacks unavailable = %q, want 2", got)
	}
}
