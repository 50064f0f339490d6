package pgstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// New's options: a nil pool and the pool options Open applies (which New
// cannot apply to a pool it is given) are refused, every problem at once
// (STYLE.md: constructors validate their config with errors.Join).
func TestNewRefusesWhatItCannotApply(t *testing.T) {
	_, err := pgstore.New(nil, pgstore.Options{MaxConns: 4})
	if err == nil || !strings.Contains(err.Error(), "pool is required") || !strings.Contains(err.Error(), "MaxConns") {
		t.Errorf("New(nil, MaxConns 4) error = %v, want both problems", err)
	}
}

// New on the caller's pool: the stores work on it, and DB.Close leaves it
// open for the caller, who owns it.
func TestNewOnTheCallersPool(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	db, err := pgstore.New(pool, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := ingest.New(db.Ingest(), ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ResourceType(ctx, "openstack", "volume"); err != nil {
		t.Fatalf("seeded resource type on the caller's pool: %v", err)
	}
	if err := db.Ping(ctx); err != nil {
		t.Fatalf("Ping on the caller's pool: %v", err)
	}
	db.Close()
	if err := pool.Ping(ctx); err != nil {
		t.Errorf("the caller's pool after DB.Close: %v, want it open", err)
	}
}
