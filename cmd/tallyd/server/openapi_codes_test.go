package server

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/internal/problem"
)

// One problem vocabulary: Problem.code in openapi.yaml is an enum equal,
// code for code and in order, to problem.Codes(), the one place every code
// is declared.
func TestOpenAPIProblemCodesAreCodes(t *testing.T) {
	doc := loadKinOpenAPI(t)
	ref := doc.Components.Schemas["Problem"]
	if ref == nil || ref.Value == nil || ref.Value.Properties["code"] == nil || ref.Value.Properties["code"].Value == nil {
		t.Fatal("openapi.yaml has no components.schemas.Problem.properties.code")
	}
	var got []string
	for _, v := range ref.Value.Properties["code"].Value.Enum {
		s, ok := v.(string)
		if !ok {
			t.Fatalf("Problem.code enum holds %v (%T), not a string", v, v)
		}
		got = append(got, s)
	}
	var want []string
	for _, c := range problem.Codes() {
		want = append(want, string(c))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Problem.code enum (-Codes() +openapi.yaml):\n%s", diff)
	}
}
