package event_test

import (
	"strings"
	"testing"

	"github.com/tallyhq/tally/event"
)

// Depth counts the nesting of objects and arrays, never a bracket inside
// a string, whatever escapes the string holds.
func TestDepth(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int
	}{
		{`"x"`, 0},
		{`1`, 0},
		{`{}`, 1},
		{`[[],[[]]]`, 3},
		{`{"a":"[[[{{"}`, 1},
		{`{"a":"\"[["}`, 1},
		{`{"a":"\\"}`, 1},
		{`{"a":"\\\"[["}`, 1},
		{`{"a":"\\\\","b":[[]]}`, 3},
		{`{"a":"unterminated [[[`, 1},
		{strings.Repeat("[", 20000) + strings.Repeat("]", 20000), 20000},
	} {
		if got := event.Depth([]byte(tt.in)); got != tt.want {
			t.Errorf("Depth(%.40s) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

// DeepPointer names the first value past the limit by its first four
// reference tokens, as RuleDepth problems do.
func TestDeepPointer(t *testing.T) {
	b := []byte(`{"payload":{"provider":{"a":{"a":{"a":{}}}}}}`)
	if p, ok := event.DeepPointer(b, 4); !ok || p != "/payload/provider/a/a" {
		t.Errorf("DeepPointer = %q %v, want /payload/provider/a/a", p, ok)
	}
	if _, ok := event.DeepPointer(b, 6); ok {
		t.Error("DeepPointer past the depth: a value found")
	}
}
