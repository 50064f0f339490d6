package server

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// tallyd had no way to set correlate.Options.IdempotencyRetention, so every
// key correlatehttp.Client sends stayed bound (and a row) forever. With
// Options.IdempotencyRetention, a key bound longer ago no longer replays and
// the purge forgets it; without it, the key replays whatever the clock says.
func TestIdempotencyRetention(t *testing.T) {
	type step struct {
		Disposition string
		Purged      int64
	}
	tests := []struct {
		name      string
		retention time.Duration
		want      []step
	}{
		{"none: kept forever", 0, []step{{"created", 0}, {"replayed", 0}, {"replayed", 0}}},
		{"24h", 24 * time.Hour, []step{{"created", 0}, {"replayed", 0}, {"created", 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				mu  sync.Mutex
				now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			)
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			h, err := New(memStore(t), Options{Authenticator: testAuthenticator(t), IdempotencyRetention: tt.retention, Now: clock})
			if err != nil {
				t.Fatal(err)
			}
			var got []step
			// At 0, at 1h (within the retention) and at 25h (past it).
			for _, at := range []time.Duration{0, time.Hour, 25 * time.Hour} {
				mu.Lock()
				now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(at)
				mu.Unlock()
				purged, err := h.PurgeIdempotencyKeys(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				r := httptest.NewRequest("POST", "/api/events", strings.NewReader(`{"category":"c","action":"a","idempotencyKey":"k-1"}`))
				r.Header.Set("Authorization", "Bearer t-events-token-01")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code >= 300 {
					t.Fatalf("at %s: status %d: %s", at, w.Code, w.Body)
				}
				got = append(got, step{w.Header().Get("Event-Disposition"), purged})
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestIdempotencyPurgeInterval(t *testing.T) {
	for r, want := range map[time.Duration]time.Duration{
		time.Second: time.Minute, time.Hour: 15 * time.Minute, 4 * time.Hour: time.Hour, 30 * 24 * time.Hour: time.Hour,
	} {
		if got := IdempotencyPurgeInterval(r); got != want {
			t.Errorf("IdempotencyPurgeInterval(%s) = %s, want %s", r, got, want)
		}
	}
}

func TestNewRefusesNegativeIdempotencyRetention(t *testing.T) {
	_, err := New(memStore(t), Options{Authenticator: testAuthenticator(t), IdempotencyRetention: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "IdempotencyRetention is negative") {
		t.Errorf("New: %v, want the negative retention refused", err)
	}
}
