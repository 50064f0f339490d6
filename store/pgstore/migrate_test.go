package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/internal/seed"
	"github.com/tallyhq/tally/store/pgstore"
)

// migrationName is the only shape a migration file may have: a five-digit
// version, an underscore, a lower-case name.
var migrationName = regexp.MustCompile(`^([0-9]{5})_[a-z0-9_]+\.sql$`)

// migrationVersions returns the versions of the migration files, checking
// that they are one sequence 1..n.
func migrationVersions(t *testing.T) []int64 {
	t.Helper()
	entries, err := os.ReadDir("migrations")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		t.Fatal("no migrations")
	}
	var versions []int64
	for i, e := range entries { // os.ReadDir sorts by name
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			t.Errorf("%s: want NNNNN_name.sql (five digits, lower-case name)", e.Name())
			continue
		}
		v, _ := strconv.ParseInt(m[1], 10, 64)
		if want := int64(i + 1); v != want {
			t.Errorf("%s: version %d, want %05d: migrations are one sequence without gaps; a new file takes the next number", e.Name(), v, want)
		}
		versions = append(versions, v)
	}
	return versions
}

// "Version numbers are allocated by area": the migrations are one
// sequence 00001, 00002, … with no gaps, so a new file must take the next
// number. goose refuses a database that has applied a later version than a
// new file's ("missing (out-of-order) migration"), and with it every start.
func TestMigrationsAreOneSequence(t *testing.T) {
	t.Logf("%d migrations", len(migrationVersions(t)))
}

// migrate opens the database at u, as a replica starting up would, and
// migrates it.
func migrate(ctx context.Context, u string) ([]int64, error) {
	db, err := pgstore.Open(ctx, u, pgstore.Options{})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return db.Migrate(ctx)
}

// "Replicas that start together fail": concurrent Migrate calls
// on a fresh schema all succeed, and every version is applied exactly once
// (by whichever call took the lock first).
func TestMigrateConcurrent(t *testing.T) {
	want := migrationVersions(t)
	u := pgtest.EmptyURL(t)
	const calls = 4
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		applied []int64
		errs    []error
	)
	for range calls {
		wg.Go(func() {
			got, err := migrate(context.Background(), u)
			mu.Lock()
			defer mu.Unlock()
			applied = append(applied, got...)
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		t.Errorf("concurrent Migrate: %v", err)
	}
	slices.Sort(applied)
	if diff := cmp.Diff(want, applied); diff != "" {
		t.Errorf("versions applied by %d concurrent calls, together (-want +got):\n%s", calls, diff)
	}
}

// The URL's pool parameters ("The pool") belong to the pool: the
// migration connection does not send them to the server as settings, which
// would refuse them.
func TestMigrateIgnoresPoolParameters(t *testing.T) {
	u := pgtest.EmptyURL(t) + "&pool_max_conns=3&pool_min_conns=1&pool_health_check_period=5s"
	if _, err := migrate(context.Background(), u); err != nil {
		t.Fatal(err)
	}
}

// releasedVersions lists each release of tally and the schema version it
// shipped. Add one line per release ({"v0.1.0", 8}): the upgrade test then
// upgrades a database from that version, as an operator's would be. Released
// migrations never change, so the files here up to that version are the ones
// the release applied.
var releasedVersions = []struct {
	release string
	version int64
}{
	// No release yet.
}

// indexes lists the indexes of the schema u names, by table, each with its
// definition without the schema's name.
func indexes(t *testing.T, u string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT tablename, replace(indexdef, schemaname || '.', '') FROM pg_indexes
WHERE schemaname = current_schema() ORDER BY tablename, indexname`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	var table, def string
	if _, err := pgx.ForEachRow(rows, []any{&table, &def}, func() error {
		out[table] = append(out[table], def)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// Current_resources keeps its primary key and the project_id
// index only (migration 00010: no index holds state, so an update that
// changes neither the key nor project_id can be HOT).
func TestProjectionIndexes(t *testing.T) {
	u := pgtest.EmptyURL(t)
	if _, err := migrate(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"CREATE UNIQUE INDEX current_resources_pkey ON current_resources USING btree (cloud, resource_type, resource_id)",
		"CREATE INDEX idx_current_resources_project ON current_resources USING btree (project_id)",
	}
	if diff := cmp.Diff(want, indexes(t, u)["current_resources"]); diff != "" {
		t.Errorf("indexes of current_resources (-want +got):\n%s", diff)
	}
}

// "Once a release exists, a test upgrades from each released
// version." Until then, every version (0, the empty schema, included) stands
// in for a release, so the upgrade path runs anyway. An upgraded schema has
// the indexes of a fresh one (migrations that drop or add indexes, such as
// 00009 and 00010, included).
func TestMigrateUpgradesFromEachRelease(t *testing.T) {
	all := migrationVersions(t)
	fresh := pgtest.EmptyURL(t)
	if _, err := migrate(context.Background(), fresh); err != nil {
		t.Fatal(err)
	}
	wantIndexes := indexes(t, fresh)
	type from struct {
		name    string
		version int64
	}
	var froms []from
	for _, r := range releasedVersions {
		froms = append(froms, from{r.release, r.version})
	}
	if len(froms) == 0 {
		for v := range int64(len(all)) {
			froms = append(froms, from{fmt.Sprintf("version %d", v), v})
		}
	}
	for _, f := range froms {
		t.Run(f.name, func(t *testing.T) {
			ctx := context.Background()
			u := pgtest.EmptyURL(t)
			if f.version > 0 {
				cfg, err := pgx.ParseConfig(u)
				if err != nil {
					t.Fatal(err)
				}
				db := stdlib.OpenDB(*cfg)
				defer db.Close()
				p, err := goose.NewProvider(goose.DialectPostgres, db, os.DirFS("migrations"))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := p.UpTo(ctx, f.version); err != nil {
					t.Fatalf("up to %d: %v", f.version, err)
				}
			}
			got, err := migrate(ctx, u)
			if err != nil {
				t.Fatalf("upgrade from %d: %v", f.version, err)
			}
			if diff := cmp.Diff(all[f.version:], got); diff != "" {
				t.Errorf("versions applied by the upgrade (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantIndexes, indexes(t, u)); diff != "" {
				t.Errorf("indexes after the upgrade, against a fresh schema's (-fresh +upgraded):\n%s", diff)
			}
			s := pgtest.Open(t, u, pgstore.Options{})
			rts, err := s.Ingest().ResourceTypes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(rts) != len(seed.ResourceTypes()) {
				t.Errorf("after the upgrade: %d resource types, want the %d seeds", len(rts), len(seed.ResourceTypes()))
			}
		})
	}
}

// A binary older than the database's schema started and served with no
// word; Migrate (which tallyd runs on start) refuses it, naming both
// versions.
func TestMigrateRefusesNewerSchema(t *testing.T) {
	u := pgtest.EmptyURL(t)
	if _, err := migrate(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	want := migrationVersions(t)
	newest := want[len(want)-1]
	db := pgtest.Open(t, u, pgstore.Options{})
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(context.Background(), `INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)`, newest+1); err != nil {
		t.Fatal(err)
	}
	_, err = db.Migrate(context.Background())
	if !errors.Is(err, pgstore.ErrSchemaNewer) {
		t.Fatalf("Migrate over a newer schema: %v, want ErrSchemaNewer", err)
	}
	for _, w := range []string{fmt.Sprintf("migration %05d", newest+1), fmt.Sprintf("up to %05d", newest)} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %q", err, w)
		}
	}
}

// A CREATE INDEX CONCURRENTLY that fails midway leaves an INVALID index,
// which a rerun's IF NOT EXISTS keeps: InvalidIndexes names it (and only
// it), so tallyd can warn instead of serving silently without the index.
func TestInvalidIndexes(t *testing.T) {
	ctx := context.Background()
	u := pgtest.EmptyURL(t)
	db, err := pgstore.Open(ctx, u, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := db.InvalidIndexes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("InvalidIndexes of a fresh schema = %q, want none", got)
	}
	name := pgtest.LeaveInvalidIndex(t, u)
	got, err = db.InvalidIndexes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{name}, got); diff != "" {
		t.Errorf("InvalidIndexes (-want +got):\n%s", diff)
	}
}
