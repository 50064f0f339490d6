package event_test

import (
	"bytes"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"
	"github.com/tallyhq/tally/event"
)

// cmpEvent compares events member by member: State by what it holds (absent,
// null or a string), raw payload values byte for byte.
var cmpEvent = cmp.Options{
	cmp.Comparer(func(a, b event.State) bool {
		return a.IsZero() == b.IsZero() && a.IsNull() == b.IsNull() && a.String() == b.String()
	}),
}

// cmpEventJSON is cmpEvent with raw payload values compared as the encoder
// writes them (whitespace dropped, string escapes normalized): the equality
// a decode → encode → decode round trip keeps. Numbers and the order of
// members stay as they are.
var cmpEventJSON = cmp.Options{
	cmpEvent,
	cmp.Comparer(func(a, b jsontext.Value) bool {
		return bytes.Equal(reformat(a), reformat(b))
	}),
}

func reformat(v jsontext.Value) []byte {
	if len(v) == 0 {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return append([]byte("invalid:"), v...)
	}
	return b
}
