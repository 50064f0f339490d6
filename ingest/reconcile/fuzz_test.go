package reconcile_test

import (
	"context"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest/reconcile"
)

// compactJSON compares exact JSON values white space aside (an encode
// compacts them).
var compactJSON = cmp.Transformer("compact", func(v jsontext.Value) string {
	c := v.Clone()
	if err := c.Compact(); err != nil {
		return "invalid: " + string(v)
	}
	return string(c)
})

// FuzzDecode: any bytes decode to an observation that passes Check, whose
// JSON decodes to the same observation, or to an *event.ValidationError
// with at least one problem, each member a valid UTF-8 JSON Pointer.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		example,
		`{"platform":"openstack","observed_at":"2026-03-01T12:00:00+01:00","size_names":[]}`,
		`{"platform":"meta","observed_at":"2026-03-01 12:00","resources":[{"resource_type":"x","state":"deleted","size":7}]}`,
		`{"platform":"openstack","observed_at":"2026-03-01T12:00:00Z","deletes":[{"resource_type":"a","resource_id":"b","deleted_at":"2027-01-01T00:00:00Z"}]}`,
		`{"platform":"openstack","platform":"x"}`, `[]`, `{`, `{"resources":[{"size":{"a":1e999999999}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		obs, err := reconcile.Decode(b)
		if err != nil {
			var ve *event.ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("error %v is not a ValidationError with problems", err)
			}
			for _, p := range ve.Problems {
				if !utf8.ValidString(p.Member) || (p.Member != "" && p.Member[0] != '/') {
					t.Fatalf("member %q is not a JSON Pointer", p.Member)
				}
			}
			return
		}
		if err := obs.Check(); err != nil {
			t.Fatalf("Decode accepted what Check refuses: %v", err)
		}
		again, err := json.Marshal(obs)
		if err != nil {
			t.Fatal(err)
		}
		back, err := reconcile.Decode(again)
		if err != nil {
			t.Fatalf("the observation's own JSON %s is refused: %v", again, err)
		}
		if (obs.SizeNames == nil) != (back.SizeNames == nil) {
			t.Fatalf("size_names %v came back %v: absent and empty differ", obs.SizeNames, back.SizeNames)
		}
		if diff := cmp.Diff(obs, back, cmpopts.EquateEmpty(), compactJSON); diff != "" {
			t.Fatalf("round trip (-first +again):\n%s", diff)
		}
	})
}

// A cloud that cannot name anything stored is refused as /cloud, before
// anything is read.
func TestRunRefusesCloud(t *testing.T) {
	rec := newService(t)
	obs, err := reconcile.Decode([]byte(example))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ cloud, rule string }{
		{"", event.RuleRequired}, {"meta", event.RuleReserved}, {"a\x00b", event.RuleNUL}, {"\xff", event.RuleUTF8},
	} {
		_, err := rec.Run(context.Background(), "t", c.cloud, obs)
		var ve *event.ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Member != "/cloud" || ve.Problems[0].Rule != c.rule {
			t.Errorf("cloud %q: %v, want /cloud %s", c.cloud, err, c.rule)
		}
	}
}
