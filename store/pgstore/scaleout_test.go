package pgstore_test

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/pgtest"
)

// citusLayout is the layout docs/scale-out.md states for Citus: each
// table's role, and the distribution column of each distributed table.
var citusLayout = map[string]struct{ role, column string }{
	"events":                            {"distributed", "event_id"},
	"current_resources":                 {"distributed", "resource_id"},
	"resource_checkpoints":              {"distributed", "resource_id"},
	"dead_letters":                      {"distributed", "id"},
	"audit_log":                         {"distributed", "id"},
	"sync_runs":                         {"distributed", "id"},
	"resource_types":                    {"reference", ""},
	"size_names":                        {"reference", ""},
	"events_horizon":                    {"reference", ""},
	"correlated_events":                 {"local", ""},
	"correlated_event_idempotency_keys": {"local", ""},
	"correlated_event_changes":          {"local", ""},
	"goose_db_version":                  {"local", ""},
}

// "every primary key and unique index of a distributed table includes its
// distribution column" (docs/scale-out.md): checked over the migrated
// schema for every table the Citus layout distributes, and every table of
// the schema (partitions aside) has a role in the layout, so a new table
// must be placed.
func TestCitusKeyRule(t *testing.T) {
	ctx := context.Background()
	u := pgtest.URL(t)
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT c.relname::text FROM pg_class c
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var placed []string
	for name := range citusLayout {
		placed = append(placed, name)
	}
	slices.Sort(tables)
	slices.Sort(placed)
	if diff := cmp.Diff(placed, tables); diff != "" {
		t.Errorf("tables of the schema against the Citus layout of docs/scale-out.md (-layout +schema):\n%s", diff)
	}
	for table, l := range citusLayout {
		if l.role != "distributed" {
			continue
		}
		rows, err := conn.Query(ctx, `SELECT i.indexrelid::regclass::text,
       EXISTS (SELECT 1 FROM unnest(i.indkey) k JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k WHERE a.attname = $2)
FROM pg_index i WHERE i.indrelid = to_regclass($1) AND i.indisunique`, table, l.column)
		if err != nil {
			t.Fatal(err)
		}
		var (
			index string
			holds bool
			n     int
		)
		if _, err := pgx.ForEachRow(rows, []any{&index, &holds}, func() error {
			n++
			if !holds {
				t.Errorf("%s, distributed by %s: unique index %s does not include it", table, l.column, index)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Errorf("%s: no unique index (a distributed table needs its key)", table)
		}
	}
}
