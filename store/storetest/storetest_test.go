package storetest

import (
	"bytes"
	"testing"

	"github.com/tallyhq/tally/event"
)

// The benchmark batch every store ingests is valid, distinct and the same
// for the same arguments, so figures of two stores compare the same work.
func TestGenerateBatch(t *testing.T) {
	a, b := GenerateBatch(10, 50), GenerateBatch(10, 50)
	seen := map[string]bool{}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("item %d differs between two calls", i)
		}
		e, err := event.Decode(a[i])
		if err == nil {
			err = event.Validate(&e)
		}
		if err != nil {
			t.Fatalf("item %d is not a valid event: %v", i, err)
		}
		if seen[e.EventID] {
			t.Fatalf("item %d repeats event_id %s", i, e.EventID)
		}
		seen[e.EventID] = true
	}
}

// Every arrival order of five events is 120 orders, each a permutation.
func TestPermutations(t *testing.T) {
	ps := permutations(5)
	if len(ps) != 120 {
		t.Fatalf("%d orders, want 120", len(ps))
	}
	distinct := map[[5]int]bool{}
	for _, p := range ps {
		var k [5]int
		used := map[int]bool{}
		for i, v := range p {
			k[i] = v
			used[v] = true
		}
		if len(used) != 5 {
			t.Fatalf("%v is not a permutation", p)
		}
		distinct[k] = true
	}
	if len(distinct) != 120 {
		t.Errorf("%d distinct orders, want 120", len(distinct))
	}
}
