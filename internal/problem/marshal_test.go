package problem

import (
	"encoding/json"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/event"
)

// faithfulValue holds white space, string escapes and a number spelling that
// the JSON encoder would reformat.
const faithfulValue = `{ "a" : [ 1 , 2 ] , "b":"\u0041\/" , "n" : 1.50e3 }`

// docs/decisions.md, Faithfulness: Marshal (WriteJSON's encoder) writes each raw
// value and each event byte for byte as held, the rest compact, and the
// answer is valid JSON.
func TestMarshalKeepsRawValuesByteForByte(t *testing.T) {
	ev, err := event.Decode([]byte(`{"event_id":"e1","timestamp":"2026-03-01T12:00:00Z","event_type":"compute.instance.create.end",` +
		`"platform":"openstack","cloud":"os-a","resource_type":"instance","resource_id":"vm-1","project_id":"p",` +
		`"payload":{"state":"active","size":` + faithfulValue + `,"provider":` + faithfulValue + `,"z\u0041" : ` + faithfulValue + `}}`))
	if err != nil {
		t.Fatal(err)
	}
	// The white space between the payload's own members is canonicalised
	// (event/faithful.go), so none around the unknown member's colon.
	evJSON := `{"event_id":"e1","timestamp":"2026-03-01T12:00:00Z","event_type":"compute.instance.create.end",` +
		`"platform":"openstack","cloud":"os-a","resource_type":"instance","resource_id":"vm-1","project_id":"p",` +
		`"payload":{"state":"active","size":` + faithfulValue + `,"provider":` + faithfulValue + `,"z\u0041":` + faithfulValue + `}}`
	type answer struct {
		A      jsontext.Value            `json:"a"`
		Nil    jsontext.Value            `json:"nil"`
		Omit   jsontext.Value            `json:"omit,omitzero"`
		M      map[string]jsontext.Value `json:"m"`
		List   []jsontext.Value          `json:"list"`
		Events []event.Event             `json:"events"`
		S      string                    `json:"s"`
	}
	for _, tc := range []struct {
		name string
		in   any
		want string
	}{
		{"a raw value", jsontext.Value(" " + faithfulValue + "\n"), faithfulValue},
		{"an event", ev, evJSON},
		{
			name: "members, a map, a list and events",
			in: answer{
				A: jsontext.Value(faithfulValue), M: map[string]jsontext.Value{"y": jsontext.Value("[ 1 ]"), "x": jsontext.Value(`"\/"`)},
				List: []jsontext.Value{jsontext.Value("true"), jsontext.Value(faithfulValue)}, Events: []event.Event{ev, ev}, S: "a/b",
			},
			want: `{"a":` + faithfulValue + `,"nil":null,"m":{"x":"\/","y":[ 1 ]},"list":[true,` + faithfulValue + `],"events":[` + evJSON + `,` + evJSON + `],"s":"a/b"}`,
		},
		{"no raw value", map[string]int{"b": 2, "a": 1}, `{"a":1,"b":2}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Marshal(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("Marshal:\n got %s\nwant %s", got, tc.want)
			}
			if !json.Valid(got) {
				t.Errorf("Marshal gave invalid JSON: %s", got)
			}
		})
	}
}

// A raw value that is not one valid JSON value fails Marshal, so WriteJSON
// answers 500 rather than an invalid document.
func TestMarshalRefusesInvalidRawValues(t *testing.T) {
	for _, raw := range []string{`{"a":1,"a":2}`, `{"a":`, "\"\xff\"", `1 2`} {
		if b, err := Marshal(struct {
			V jsontext.Value `json:"v"`
		}{jsontext.Value(raw)}); err == nil {
			t.Errorf("Marshal(%q) = %s, want an error", raw, b)
		}
	}
}
