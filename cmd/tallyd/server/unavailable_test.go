package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/store"
	"github.com/tallyhq/tally/store/memstore"
)

// downIngest and downCorrelate are stores whose database is unreachable:
// every write fails with store.ErrUnavailable, as pgstore's do when
// PostgreSQL is down.
type (
	downIngest    struct{ *memstore.Ingest }
	downCorrelate struct{ *memstore.Correlate }
)

func (downIngest) Commit(context.Context, ingest.Batch) (ingest.Committed, error) {
	return ingest.Committed{}, fmt.Errorf("pgstore: begin: dial tcp: connection refused: %w", store.ErrUnavailable)
}

func (downCorrelate) Create(context.Context, correlate.Create) (correlate.Event, correlate.Disposition, error) {
	return correlate.Event{}, "", fmt.Errorf("pgstore: begin: %w", context.DeadlineExceeded)
}

// Timeouts and Stale connections: a store that cannot be reached
// or does not answer in time is answered 503 with a problem body and
// Retry-After, never 500.
func TestStoreUnavailableIs503(t *testing.T) {
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Store{Ingest: downIngest{db.Ingest()}, Projection: db.Projection(), Correlate: downCorrelate{db.Correlate()}, Reconcile: db.Reconcile()}, Options{
		Authenticator: testAuthenticator(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ev := `{"event_id":"e1","event_type":"volume.create.end","timestamp":"2026-03-01T12:00:00Z","platform":"openstack","cloud":"os-a",` +
		`"resource_type":"volume","resource_id":"v1","project_id":"p","source":"cinder","payload":{"state":"available","size":{"size_gb":1}}}`
	for _, tc := range []struct{ name, path, token, body string }{
		{"ingest", "/api/v1/events", "t-ingest-token-01", ev},
		{"createEvent", "/api/events", "t-events-token-01", `{"category":"c","action":"a","correlationKey":"k"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", tc.path, strings.NewReader(tc.body))
			r.Header.Set("Authorization", "Bearer "+tc.token)
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			type answer struct {
				Status                  int
				RetryAfter, ContentType string
				Code                    string
			}
			var body struct{ Code string }
			_ = json.Unmarshal(w.Body.Bytes(), &body)
			got := answer{w.Code, w.Header().Get("Retry-After"), w.Header().Get("Content-Type"), body.Code}
			want := answer{http.StatusServiceUnavailable, "2", "application/problem+json", "store_unavailable"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("answer (-want +got):\n%s\nbody: %s", diff, w.Body)
			}
		})
	}
}
