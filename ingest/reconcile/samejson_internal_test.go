package reconcile

import (
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// TestSameJSON (docs/reconciliation.md, What a run concludes: "sizes
// compared as exact JSON, member order aside, numbers by their text").
func TestSameJSON(t *testing.T) {
	deep := func(d int, leaf string) string { return strings.Repeat(`{"a":`, d) + leaf + strings.Repeat("}", d) }
	for _, tc := range []struct {
		name string
		a, b string
		want bool
	}{
		{"member order aside", `{"a":1,"b":[1,2]}`, `{"b":[1,2],"a":1}`, true},
		{"white space aside", `{ "a" : 1 }`, `{"a":1}`, true},
		{"a string by its value", `{"a":"\u0061"}`, `{"a":"a"}`, true},
		{"numbers by their text", `{"a":100}`, `{"a":100.0}`, false},
		{"array order counts", `[1,2]`, `[2,1]`, false},
		{"a missing member", `{"a":1}`, `{"a":1,"b":null}`, false},
		{"another kind", `{"a":"1"}`, `{"a":1}`, false},
		{"literals", `[true,false,null]`, `[true,false,null]`, true},
		{"literals differ", `[true]`, `[false]`, false},
		{"nil equals nil only", ``, `{}`, false},
		{"nested objects", `{"x":{"b":2,"a":1}}`, `{"x":{"a":1,"b":2}}`, true},
		{"deep and equal", deep(9990, "1"), deep(9990, "1"), true},
		{"deep and differing at the bottom", deep(9990, "1"), deep(9990, "2"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			got, err := sameJSON(jsontext.Value(tc.a), jsontext.Value(tc.b))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("sameJSON(%.40s, %.40s) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
			// A run compares every observed size (up to 50,000, within the
			// body cap) while it holds the cloud's turn: the cost must be
			// linear in the size's bytes, not in their square per level.
			if d := time.Since(start); d > time.Second {
				t.Errorf("sameJSON of %d bytes took %v; a linear comparison takes milliseconds", len(tc.a)+len(tc.b), d)
			}
		})
	}
}
