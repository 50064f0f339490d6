package pgstore_test

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// migrationName is the only shape a migration file may have: a five-digit
// version, an underscore, a lower-case name.
var migrationName = regexp.MustCompile(`^([0-9]{5})_[a-z0-9_]+\.sql$`)

// Issue 12, "Version numbers are allocated by area": the migrations are one
// sequence 00001, 00002, … with no gaps, so a new file must take the next
// number. goose refuses a database that has applied a later version than a
// new file's ("missing (out-of-order) migration"), and with it every start.
func TestMigrationsAreOneSequence(t *testing.T) {
	entries, err := os.ReadDir("migrations")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		t.Fatal("no migrations")
	}
	for i, e := range entries { // os.ReadDir sorts by name
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			t.Errorf("%s: want NNNNN_name.sql (five digits, lower-case name)", e.Name())
			continue
		}
		v, _ := strconv.Atoi(m[1])
		if want := i + 1; v != want {
			t.Errorf("%s: version %d, want %05d: migrations are one sequence without gaps; a new file takes the next number", e.Name(), v, want)
		}
	}
	t.Logf("%d migrations", len(entries))
}
