package correlatehttp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/correlate/correlatehttp"
	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// Go clients beside the handlers: "correlatehttp.Client: creates
// with an automatic Idempotency-Key so that retries are safe, and returns
// the disposition", against the handler on both stores.
func TestClient(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) correlate.Store{
		"memstore": func(t *testing.T) correlate.Store { return memCorrelate(t) },
		"pgstore":  func(t *testing.T) correlate.Store { return pgtest.DB(t, pgstore.Options{}).Correlate() },
	} {
		t.Run(name, func(t *testing.T) {
			s := newServer(t, open(t), correlate.Options{})
			// The first answer of every other request is lost on the way
			// back (the create took effect): the client must retry and be
			// replayed, never count twice.
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1)%2 == 1 {
					s.mux.ServeHTTP(httptest.NewRecorder(), r)
					http.Error(w, "lost", http.StatusBadGateway)
					return
				}
				s.mux.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			c, err := correlatehttp.NewClient(srv.URL, correlatehttp.ClientOptions{Token: "org-1/alice", Backoff: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			p := correlate.Payload{Category: "connection", Action: "connect", CorrelationKey: "prod-1/unreachable"}
			var got []string
			for range 2 {
				e, d, err := c.Create(context.Background(), p)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, string(d)+" "+itoa(*e.OccurrenceCount))
			}
			at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			p.ResolvedAt = &at
			e, d, err := c.Create(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(d)+" "+itoa(*e.OccurrenceCount))
			// The first attempt of each create took effect and its answer
			// was lost; the retry carried the same key and was replayed.
			want := []string{"replayed 1", "replayed 2", "replayed 2"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("dispositions (-want +got):\n%s", diff)
			}
			if n := calls.Load(); n != 6 {
				t.Errorf("%d requests, want 6 (one retry per create)", n)
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A refusal is not retried, and an invalid payload sends nothing.
func TestClientRefusals(t *testing.T) {
	s := newServer(t, memCorrelate(t), correlate.Options{})
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1); s.mux.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	c, err := correlatehttp.NewClient(srv.URL, correlatehttp.ClientOptions{Token: "/no-organization"})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = c.Create(context.Background(), correlate.Payload{Category: "c", Action: "a"})
	var se *correlatehttp.StatusError
	if !errors.As(err, &se) || se.StatusCode != 401 {
		t.Errorf("create with a bad token: %v, want a 401 StatusError", err)
	}
	if _, _, err := c.Create(context.Background(), correlate.Payload{Action: "a"}); !errors.Is(err, event.ErrInvalid) {
		t.Errorf("create without category: %v, want event.ErrInvalid", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d requests, want 1 (no retry of a 4xx, no request for an invalid payload)", n)
	}
	if _, err := correlatehttp.NewClient("", correlatehttp.ClientOptions{MaxAttempts: -1}); err == nil {
		t.Error("NewClient accepted an empty URL and token")
	}
}
