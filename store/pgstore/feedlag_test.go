package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// TestFeedLagIsTheOldestWritingTransaction: "feed lag (oldest open writing
// transaction holding the watermark back)". A transaction that took a
// transaction id and stays open shows as lag; other tests of the suite
// write meanwhile, so only a lower bound is asserted.
func TestFeedLagIsTheOldestWritingTransaction(t *testing.T) {
	u := pgtest.URL(t)
	db := pgtest.Open(t, u, pgstore.Options{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond)
	lag, err := db.FeedLag(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lag < time.Second {
		t.Errorf("FeedLag = %v with a writing transaction open for 1.2s, want at least 1s", lag)
	}
}
