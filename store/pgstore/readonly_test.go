package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store"
	"github.com/tallyhq/tally/store/pgstore"
)

// A database left read-only by a failover (SQLSTATE 25006) made every write
// a 500 while readiness stayed 200. Each session of this DB starts read-only
// (default_transaction_read_only=on, set on its connections only, so the
// shared test database is untouched): writes fail as store.ErrUnavailable
// (503 with Retry-After) and Ping says not ready.
func TestReadOnlyDatabaseIsUnavailable(t *testing.T) {
	u := pgtest.URL(t)
	ctx := context.Background()
	db := pgtest.Open(t, u+"&default_transaction_read_only=on", pgstore.Options{})
	if err := db.Ping(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Ping on a read-only database: %v, want store.ErrUnavailable", err)
	}
	_, err := db.Ingest().PutResourceType(ctx, ingest.ResourceType{Platform: "openstack", ResourceType: "x_ro", SizeSchema: []byte(`{"type":"object"}`)})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("PutResourceType on a read-only database: %v, want store.ErrUnavailable", err)
	}
}
