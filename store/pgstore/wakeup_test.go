package pgstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// "Other replicas learn within 1 s by polling, faster with an optional
// post-commit wake-up": NotifyFeed on one pool reaches ListenFeed on
// another (two replicas on one database), and a burst of calls is
// coalesced, never blocking the caller.
func TestNotifyFeedWakesAnotherReplica(t *testing.T) {
	u := pgtest.URL(t)
	a, b := pgtest.Open(t, u, pgstore.Options{}), pgtest.Open(t, u, pgstore.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var woken atomic.Int64
	done := make(chan error, 1)
	go func() { done <- b.ListenFeed(ctx, func() { woken.Add(1) }) }()
	deadline := time.Now().Add(20 * time.Second)
	for woken.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no wake-up within 20s of NotifyFeed")
		}
		// LISTEN may not be in place yet: notify until one arrives.
		start := time.Now()
		for range 100 {
			a.NotifyFeed()
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("100 NotifyFeed calls took %v: they must not wait for the database", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ListenFeed = %v after its ctx ended, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ListenFeed did not return after its ctx ended")
	}
}
