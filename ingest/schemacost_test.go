package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
)

// branchy is a schema of nested anyOf over $refs: each of depth
// definitions names the one below it ways times, so unfolded it holds
// about ways^depth subschemas.
func branchy(depth, ways int) string {
	defs := []string{`"d0":{"type":"integer"}`}
	for i := 1; i <= depth; i++ {
		refs := make([]string, ways)
		for j := range refs {
			refs[j] = fmt.Sprintf(`{"$ref":"#/$defs/d%d"}`, i-1)
		}
		defs = append(defs, fmt.Sprintf(`"d%d":{"anyOf":[%s]}`, i, strings.Join(refs, ",")))
	}
	return fmt.Sprintf(`{"type":"object","properties":{"n":{"$ref":"#/$defs/d%d"}},"$defs":{%s}}`, depth, strings.Join(defs, ","))
}

// nested is depth levels of not, each holding the next.
func nested(depth int) string {
	return strings.Repeat(`{"not":`, depth) + `{}` + strings.Repeat(`}`, depth)
}

// A size schema whose evaluation could not end or could cost exponential
// time is refused at PUT, naming the keyword (under /size_schema) and the
// rule; ordinary schemas, shared definitions and moderate nesting are
// accepted.
func TestPutResourceTypeBoundsSchemaCost(t *testing.T) {
	type prob struct{ Member, Rule string }
	tests := []struct {
		name, body string
		want       []prob // nil: accepted
	}{
		{"ordinary", `{"size_schema":{"type":"object","required":["vcpus"],"properties":{"vcpus":{"type":"integer","minimum":1},"flavor":{"type":"string","pattern":"^[a-z0-9.]+$"}}}}`, nil},
		{"shared definition", `{"size_schema":{"properties":{"a":{"$ref":"#/$defs/gb"},"b":{"$ref":"#/$defs/gb"}},"$defs":{"gb":{"type":"number","minimum":0}}}}`, nil},
		{"anchor", `{"size_schema":{"properties":{"a":{"$ref":"#gb"}},"$defs":{"gb":{"$anchor":"gb","type":"number"}}}}`, nil},
		{"moderate nesting", `{"size_schema":` + nested(ingest.MaxSchemaDepth) + `}`, nil},
		{"moderate branching", `{"size_schema":` + branchy(6, 2) + `}`, nil},
		{"self reference", `{"size_schema":{"$ref":"#"}}`,
			[]prob{{"/size_schema/$ref", event.RuleSchema}}},
		{"self reference, bare", `{"properties":{"a":{"$ref":"#"}}}`,
			[]prob{{"/properties/a/$ref", event.RuleSchema}}},
		{"cycle through definitions", `{"size_schema":{"$ref":"#/$defs/a","$defs":{"a":{"anyOf":[{"$ref":"#/$defs/b"}]},"b":{"allOf":[{"$ref":"#/$defs/a"}]}}}}`,
			[]prob{{"/size_schema/$defs/b/allOf/0/$ref", event.RuleSchema}}},
		{"cycle through an anchor", `{"size_schema":{"$defs":{"a":{"$anchor":"x","not":{"$ref":"#x"}}}}}`,
			[]prob{{"/size_schema/$defs/a/not/$ref", event.RuleSchema}}},
		{"nesting too deep", `{"size_schema":` + nested(40) + `}`,
			[]prob{{"/size_schema" + strings.Repeat("/not", ingest.MaxSchemaDepth+1), event.RuleDepth}}},
		{"exponential, deep 18 (the reported case)", `{"size_schema":` + branchy(18, 2) + `}`,
			[]prob{{"/size_schema", event.RuleSchema}}},
		{"exponential within the depth", `{"size_schema":` + branchy(12, 3) + `}`,
			[]prob{{"/size_schema/$defs/d8", event.RuleSchema}}},
		{"pattern too long", `{"size_schema":{"properties":{"f":{"type":"string","pattern":"` + strings.Repeat("a", ingest.MaxRegexLength+1) + `"}}}}`,
			[]prob{{"/size_schema/properties/f/pattern", event.RuleFormat}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc, err := ingest.New(memIngest(t), ingest.Options{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = svc.PutResourceType(context.Background(), "openstack", "x", jsontext.Value(tt.body))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("PutResourceType: %v, want accepted", err)
				}
				return
			}
			var ve *event.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v, want an *event.ValidationError", err)
			}
			var got []prob
			for i, p := range ve.Problems {
				if p.Message == "" {
					t.Errorf("problem %d has no message", i)
				}
				got = append(got, prob{p.Member, p.Rule})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s\n%v", diff, err)
			}
		})
	}
}
