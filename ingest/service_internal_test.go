package ingest

import (
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"
)

// withSizeAsReported gives the same bytes whether it can tell from the
// bytes alone that no member is named size_as_reported (no such literal, no
// \u escape) or has to read the members.
func TestWithSizeAsReported(t *testing.T) {
	replaced := map[string]string{"type": "0b1c"}
	const sar = `"size_as_reported":{"type":"0b1c"}`
	cases := []struct{ name, provider, want string }{
		{"absent", ``, `{` + sar + `}`},
		{"null", `null`, `{` + sar + `}`},
		{"empty", `{}`, `{` + sar + `}`},
		{"empty with white space", " { \n} ", " {" + sar + " \n} "},
		{"one member", `{"a":1}`, `{"a":1,` + sar + `}`},
		{"white space kept", "{ \"a\" : 1 ,\"b\":[ ]\n}\t", "{ \"a\" : 1 ,\"b\":[ ]," + sar + "\n}\t"},
		{"nested literal, read", `{"a":{"size_as_reported":1}}`, `{"a":{"size_as_reported":1},` + sar + `}`},
		{"escaped name of another member, read", `{"\u0061":1 }`, `{"\u0061":1,` + sar + ` }`},
		{"the item's own, replaced", `{"size_as_reported":{"x":1}, "a":1}`, `{"a":1,` + sar + `}`},
		{"the item's own escaped, replaced", `{"b":2,"size\u005fas_reported":1}`, `{"b":2,` + sar + `}`},
		{"only the item's own", `{ "size_as_reported":1 }`, `{` + sar + `}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var provider jsontext.Value
			if tc.provider != "" {
				provider = jsontext.Value(tc.provider)
			}
			got, err := withSizeAsReported(provider, replaced)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
