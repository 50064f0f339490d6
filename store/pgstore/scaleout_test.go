package pgstore_test

import (
	"context"
	"os"
	"slices"
	"strings"
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

// citusLayout is what docs/scale-out.md's layout table says: each row's
// tables (in backquotes, comma-separated), its role (the first word:
// distributed, reference or local) and distribution column. The test's
// copy of the layout and the operators' must not drift apart.
func TestCitusLayoutIsTheDocs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/scale-out.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## The Citus layout")
	if !ok {
		t.Fatal("docs/scale-out.md has no section The Citus layout")
	}
	got := map[string]struct{ role, column string }{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 5 || !strings.Contains(cells[1], "`") {
			continue
		}
		role, _, _ := strings.Cut(strings.TrimSpace(cells[2]), " ")
		role = strings.TrimSuffix(role, ",")
		if role == "local" || strings.HasPrefix(strings.TrimSpace(cells[2]), "local") {
			role = "local"
		}
		column := strings.Trim(strings.TrimSpace(cells[3]), "`")
		for _, name := range strings.Split(cells[1], ",") {
			got[strings.Trim(strings.TrimSpace(name), "`")] = struct{ role, column string }{role, column}
		}
	}
	want := map[string]struct{ role, column string }{}
	for name, l := range citusLayout {
		if name != "goose_db_version" { // goose's own, not in the docs' table
			want[name] = l
		}
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(struct{ role, column string }{})); diff != "" {
		t.Errorf("the Citus layout of the test against docs/scale-out.md (-test +docs):\n%s", diff)
	}
}
