package ingest_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
)

// Errors: one vocabulary. A size schema that cannot be registered
// is refused with the one validation error: each problem names the keyword
// by its JSON Pointer into the PUT body (under /size_schema for the
// wrapper), the rule (the meta-schema keyword that failed, or one of
// tally's rules), and the compiler's message.
func TestPutResourceTypeRefusalIsOneValidationError(t *testing.T) {
	type prob struct{ Member, Rule, MessagePrefix string }
	tests := []struct {
		name, platform, body string
		want                 []prob
	}{
		{"bare schema, wrong keyword type", "openstack", `{"type":12}`,
			[]prob{{"/type", event.RuleEnum, "value must be one of"}, {"/type", event.RuleType, "must be array, is number"}}},
		{"wrapper, wrong keyword type", "openstack", `{"size_schema":{"type":12}}`,
			[]prob{{"/size_schema/type", event.RuleEnum, "value must be one of"}, {"/size_schema/type", event.RuleType, "must be array, is number"}}},
		{"wrapper, nested minimum not a number", "openstack", `{"size_schema":{"properties":{"gb":{"minimum":"1"}}}}`,
			[]prob{{"/size_schema/properties/gb/minimum", event.RuleType, "must be number, is string"}}},
		{"wrapper, number out of range", "openstack", `{"size_schema":{"properties":{"gb":{"minimum":1e1000001}}}}`,
			[]prob{{"/size_schema/properties/gb/minimum", event.RuleNumberRange, "must be a number of at most"}}},
		{"bare, duplicate member", "openstack", `{"properties":{"a":{"minimum":1,"minimum":2}}}`,
			[]prob{{"/properties/a/minimum", event.RuleDuplicateMember, "is given more than once"}}},
		{"wrapper, duplicate member inside", "openstack", `{"size_schema":{"minimum":1,"minimum":2}}`,
			[]prob{{"/size_schema/minimum", event.RuleDuplicateMember, "is given more than once"}}},
		{"not JSON", "openstack", `{"type":`,
			[]prob{{"/type", event.RuleSyntax, "invalid JSON: "}}},
		{"wrapper with other members", "openstack", `{"size_schema":{},"type":"object","sizeSchema":{}}`,
			[]prob{{"/type", event.RuleAdditionalProperties, "is not allowed"}, {"/sizeSchema", event.RuleAdditionalProperties, "is not allowed"}}},
		{"external reference", "openstack", `{"$ref":"https://example.com/s.json"}`,
			[]prob{{"", event.RuleSchema, ""}}},
		{"wrapped external reference", "openstack", `{"size_schema":{"$ref":"file:///etc/passwd"}}`,
			[]prob{{"/size_schema", event.RuleSchema, ""}}},
		{"empty platform", "", `{}`,
			[]prob{{"/platform", event.RuleRequired, "is required"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc, err := ingest.New(memIngest(t), ingest.Options{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = svc.PutResourceType(context.Background(), tt.platform, "x", jsontext.Value(tt.body))
			var ve *event.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, event.ErrInvalid) {
				t.Fatalf("err = %v, want an *event.ValidationError matching event.ErrInvalid", err)
			}
			var got []prob
			for i, p := range ve.Problems {
				if p.Message == "" {
					t.Errorf("problem %d has no message", i)
				}
				pre := ""
				if i < len(tt.want) && strings.HasPrefix(p.Message, tt.want[i].MessagePrefix) {
					pre = tt.want[i].MessagePrefix
				}
				got = append(got, prob{p.Member, p.Rule, pre})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s\n%v", diff, err)
			}
		})
	}
}
