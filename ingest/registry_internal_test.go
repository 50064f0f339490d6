package ingest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"
)

// The verdicts of one compiled schema are bounded in count and in the
// length of a size, and forget everything when full.
func TestVerdictsBounded(t *testing.T) {
	v := newVerdicts()
	long := []byte(`{"note":"` + strings.Repeat("x", maxVerdictSize) + `"}`)
	v.add(long)
	for i := range maxVerdicts {
		v.add(fmt.Appendf(nil, `{"gb":%d}`, i))
	}
	got := map[string]bool{
		"longer than maxVerdictSize": v.has(long),
		"first":                      v.has([]byte(`{"gb":0}`)),
		"last":                       v.has(fmt.Appendf(nil, `{"gb":%d}`, maxVerdicts-1)),
		"never added":                v.has([]byte(`{"gb":-1}`)),
	}
	want := map[string]bool{"longer than maxVerdictSize": false, "first": true, "last": true, "never added": false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("at the bound (-want +got):\n%s", diff)
	}
	v.add([]byte(`{"gb":-2}`)) // one more: starts over
	got = map[string]bool{"first": v.has([]byte(`{"gb":0}`)), "newest": v.has([]byte(`{"gb":-2}`))}
	want = map[string]bool{"first": false, "newest": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("past the bound (-want +got):\n%s", diff)
	}
	if len(v.sizes) != 1 {
		t.Errorf("past the bound: %d sizes kept, want 1", len(v.sizes))
	}
}

// A schema compiled again (another Version or document) starts with no
// verdicts; the same row keeps its schema and verdicts.
func TestRegistryVerdictsFollowTheSchema(t *testing.T) {
	var r registry
	rt := ResourceType{Platform: "openstack", ResourceType: "volume", Version: 1, SizeSchema: jsontext.Value(`{"type":"object"}`)}
	_, first, err := r.schema(rt)
	if err != nil {
		t.Fatal(err)
	}
	first.add([]byte(`{"gb":1}`))
	_, same, err := r.schema(rt)
	if err != nil {
		t.Fatal(err)
	}
	rt.Version, rt.SizeSchema = 2, jsontext.Value(`{"type":"object","required":["size_gb"]}`)
	_, next, err := r.schema(rt)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{"same row": same.has([]byte(`{"gb":1}`)), "new version": next.has([]byte(`{"gb":1}`))}
	want := map[string]bool{"same row": true, "new version": false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
