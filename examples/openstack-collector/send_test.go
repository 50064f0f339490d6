package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestBackoff: capped exponential, jittered within the upper half.
func TestBackoff(t *testing.T) {
	s := &sender{baseDelay: 100 * time.Millisecond, maxDelay: time.Second}
	for attempt, full := range map[int]time.Duration{
		1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond,
		4: 800 * time.Millisecond, 5: time.Second, 40: time.Second,
	} {
		for range 50 {
			if d := s.backoff(attempt); d < full/2 || d > full {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", attempt, d, full/2, full)
			}
		}
	}
}

// TestRetryAfter: a 503's Retry-After is honoured, capped by the maximum
// delay, and the number of attempts stays bounded.
func TestRetryAfter(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 3 {
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(`{"accepted":2,"duplicates":0,"rejected":[]}`))
	}))
	defer srv.Close()
	var slept []time.Duration
	s := &sender{
		client: srv.Client(), url: srv.URL, token: "t", maxAttempts: 3,
		baseDelay: time.Millisecond, maxDelay: 7 * time.Second,
		sleep: func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil },
	}
	res, err := s.send(context.Background(), []byte(`[]`))
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 2 || calls.Load() != 3 {
		t.Errorf("result %+v after %d calls", res, calls.Load())
	}
	if diff := cmp.Diff([]time.Duration{7 * time.Second, 7 * time.Second}, slept); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
}

// TestCancelStopsRetries: a cancelled context ends the wait at once.
func TestCancelStopsRetries(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	s := &sender{
		client: srv.Client(), url: srv.URL, token: "t", maxAttempts: 10,
		baseDelay: time.Hour, maxDelay: time.Hour,
		sleep: func(ctx context.Context, d time.Duration) error { cancel(); return sleepCtx(ctx, d) },
	}
	if _, err := s.send(ctx, []byte(`[]`)); err == nil || s.attempts != 1 {
		t.Fatalf("err = %v after %d attempts, want a cancellation after 1", err, s.attempts)
	}
}
