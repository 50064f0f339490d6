package event_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tallyhq/tally/event"
)

// baseMembers is a valid item, member by member, in the spec's order.
var baseMembers = [][2]string{
	{"event_id", `"e-1"`},
	{"timestamp", `"2026-03-01T12:00:00Z"`},
	{"event_type", `"compute.instance.create.end"`},
	{"platform", `"openstack"`},
	{"cloud", `"os-prod-eu1"`},
	{"resource_type", `"instance"`},
	{"resource_id", `"i-1"`},
	{"project_id", `"p-1"`},
	{"source", `"collector"`},
	{"payload", `{"state":"active","size":{"vcpus":2}}`},
}

// item writes baseMembers as one JSON object, with changes given as pairs
// of a member name and its raw JSON value: a name of baseMembers is replaced
// in place (removed when the value is ""), any other name is appended.
func item(changes ...string) string {
	members := append([][2]string(nil), baseMembers...)
next:
	for i := 0; i < len(changes); i += 2 {
		name, raw := changes[i], changes[i+1]
		for j, m := range members {
			if m[0] == name {
				if raw == "" {
					members = append(members[:j], members[j+1:]...)
				} else {
					members[j][1] = raw
				}
				continue next
			}
		}
		members = append(members, [2]string{name, raw})
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + m[0] + `":` + m[1])
	}
	b.WriteByte('}')
	return b.String()
}

// baseEvent is what item() decodes to.
func baseEvent() event.Event {
	return event.Event{
		EventID:      "e-1",
		Timestamp:    time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		EventType:    "compute.instance.create.end",
		Platform:     "openstack",
		Cloud:        "os-prod-eu1",
		ResourceType: "instance",
		ResourceID:   "i-1",
		ProjectID:    "p-1",
		Source:       event.SourceCollector,
		Payload: event.PayloadEnvelope{
			State: event.StateOf("active"),
			Size:  []byte(`{"vcpus":2}`),
		},
	}
}

func TestDecode(t *testing.T) {
	const unknown = "is not a member of the canonical event (names are case-sensitive; extension data belongs in payload)"
	const nul = `must not contain a NUL character (raw or \u0000)`
	const format = event.TimeFormatMessage
	tests := []struct {
		name   string
		rule   string // the spec or issue sentence the case enforces
		in     string
		want   func(e *event.Event) // changes to baseEvent; nil when refused
		wantPs []event.Problem
	}{
		{
			name: "valid item",
			rule: "An event carries ten members.",
			in:   item(),
			want: func(e *event.Event) {},
		},
		{
			name: "white space around the object",
			rule: "one JSON object and nothing else",
			in:   " \n\t" + item() + "\r\n ",
			want: func(e *event.Event) {},
		},
		{
			name: "source left out decodes as the empty source",
			rule: "source may be left out, and it defaults to collector.",
			in:   item("source", ""),
			want: func(e *event.Event) { e.Source = "" },
		},

		// member names
		{
			name:   "member names are case-sensitive",
			rule:   "member names are case-sensitive; docs/decisions.md: An unknown or mis-cased top-level member refuses the item",
			in:     item("event_id", "", "Event_ID", `"e-1"`),
			wantPs: []event.Problem{{Member: "/Event_ID", Rule: event.RuleAdditionalProperties, Message: unknown}},
		},
		{
			name:   "upper-case payload",
			rule:   "member names are case-sensitive",
			in:     item("payload", "", "PAYLOAD", `{"state":"active"}`),
			wantPs: []event.Problem{{Member: "/PAYLOAD", Rule: event.RuleAdditionalProperties, Message: unknown}},
		},
		{
			name:   "unknown top-level member",
			rule:   "an unknown top-level member ... is refused with a message that names the member",
			in:     item("region", `"eu-1"`),
			wantPs: []event.Problem{{Member: "/region", Rule: event.RuleAdditionalProperties, Message: unknown}},
		},
		{
			name: "unknown payload member is kept, not refused",
			rule: "A member the envelope does not name survives a decode and an encode untouched",
			in:   item("payload", `{"state":"active","size":{"vcpus":2},"host":"cmp-1","n":12345678901234567890}`),
			want: func(e *event.Event) { e.Payload.Unknown = []byte(`{"host":"cmp-1","n":12345678901234567890}`) },
		},

		// duplicates
		{
			name:   "duplicate top-level member",
			rule:   "a member given twice ... is refused",
			in:     strings.Replace(item(), `"event_id":"e-1"`, `"event_id":"e-1","event_id":"e-2"`, 1),
			wantPs: []event.Problem{{Member: "/event_id", Rule: event.RuleDuplicateMember, Message: "is given more than once"}},
		},
		{
			name:   "duplicate top-level member with a valid item",
			rule:   "a member given twice ... is refused",
			in:     strings.TrimSuffix(item(), "}") + `,"cloud":"os-prod-eu2"}`,
			wantPs: []event.Problem{{Member: "/cloud", Rule: event.RuleDuplicateMember, Message: "is given more than once"}},
		},
		{
			name:   "duplicate payload.state",
			rule:   "a member given twice ... is refused",
			in:     item("payload", `{"state":"active","state":"deleted"}`),
			wantPs: []event.Problem{{Member: "/payload/state", Rule: event.RuleDuplicateMember, Message: "is given more than once"}},
		},
		{
			name:   "duplicate nested in payload.size",
			rule:   "a member given twice, at any depth",
			in:     item("payload", `{"state":"active","size":{"vcpus":2,"vcpus":4}}`),
			wantPs: []event.Problem{{Member: "/payload/size/vcpus", Rule: event.RuleDuplicateMember, Message: "is given more than once"}},
		},
		{
			name:   "duplicate nested deep in payload.provider",
			rule:   "a member given twice, at any depth",
			in:     item("payload", `{"state":"active","provider":{"a":[{"b":1},{"c":1,"c":2}]}}`),
			wantPs: []event.Problem{{Member: "/payload/provider/a/1/c", Rule: event.RuleDuplicateMember, Message: "is given more than once"}},
		},
		{
			name:   "duplicate unknown payload member",
			rule:   "a member given twice, at any depth",
			in:     item("payload", `{"state":"active","host":"a","host":"b"}`),
			wantPs: []event.Problem{{Member: "/payload/host", Rule: event.RuleDuplicateMember, Message: "is given more than once"}},
		},

		// UTF-8 and NUL
		{
			name:   "invalid UTF-8 in a top-level value",
			rule:   "invalid UTF-8 ... is refused with a message that names the member",
			in:     item("resource_id", "\"i-\xff\""),
			wantPs: []event.Problem{{Member: "/resource_id", Rule: event.RuleUTF8, Message: "must be valid UTF-8"}},
		},
		{
			name:   "invalid UTF-8 in a payload value",
			rule:   "invalid UTF-8 ... is refused",
			in:     item("payload", "{\"state\":\"active\",\"provider\":{\"host\":\"\xc3\x28\"}}"),
			wantPs: []event.Problem{{Member: "/payload/provider/host", Rule: event.RuleUTF8, Message: "must be valid UTF-8"}},
		},
		{
			name:   "invalid UTF-8 in a member name names the object holding it",
			rule:   "invalid UTF-8 ... is refused",
			in:     item("payload", "{\"state\":\"active\",\"h\xff\":1}"),
			wantPs: []event.Problem{{Member: "/payload", Rule: event.RuleUTF8, Message: "must be valid UTF-8"}},
		},
		{
			name:   "a lone surrogate escape is not UTF-8",
			rule:   "invalid UTF-8 ... is refused",
			in:     item("project_id", `"p-\ud800"`),
			wantPs: []event.Problem{{Member: "/project_id", Rule: event.RuleUTF8, Message: "must be valid UTF-8"}},
		},
		{
			name: "valid multi-byte UTF-8 and escapes are accepted",
			rule: "invalid UTF-8 ... is refused",
			in:   item("project_id", `"p-€-\u00e9-\ud83d\ude00"`),
			want: func(e *event.Event) { e.ProjectID = "p-€-é-😀" },
		},
		{
			name:   "escaped NUL in a top-level value",
			rule:   "a NUL character (raw or \\u0000) ... is refused with a message that names the member",
			in:     item("event_id", `"e-\u0000"`),
			wantPs: []event.Problem{{Member: "/event_id", Rule: event.RuleNUL, Message: nul}},
		},
		{
			name:   "escaped NUL in a payload value",
			rule:   "a NUL character (raw or \\u0000) ... is refused; DECISIONS: PostgreSQL jsonb cannot store NUL",
			in:     item("payload", `{"state":"active","provider":{"tags":["a","b\u0000"]}}`),
			wantPs: []event.Problem{{Member: "/payload/provider/tags/1", Rule: event.RuleNUL, Message: nul}},
		},
		{
			name:   "escaped NUL in a payload member name names the object holding it",
			rule:   "a NUL character (raw or \\u0000) ... is refused",
			in:     item("payload", `{"state":"active","a\u0000b":1}`),
			wantPs: []event.Problem{{Member: "/payload", Rule: event.RuleNUL, Message: nul}},
		},
		{
			name:   "raw NUL in a value",
			rule:   "a NUL character (raw or \\u0000) ... is refused",
			in:     item("payload", "{\"state\":\"act\x00ive\"}"),
			wantPs: []event.Problem{{Member: "/payload/state", Rule: event.RuleNUL, Message: nul}},
		},
		{
			name:   "raw NUL in a member name",
			rule:   "a NUL character (raw or \\u0000) ... is refused",
			in:     item("payload", "{\"state\":\"active\",\"a\x00\":1}"),
			wantPs: []event.Problem{{Member: "/payload", Rule: event.RuleNUL, Message: nul}},
		},
		{
			name:   "raw NUL outside any string",
			rule:   "a NUL character (raw or \\u0000) ... is refused",
			in:     "\x00" + item(),
			wantPs: []event.Problem{{Member: "", Rule: event.RuleNUL, Message: nul}},
		},
		{
			name:   "raw NUL between members",
			rule:   "a NUL character (raw or \\u0000) ... is refused",
			in:     strings.Replace(item(), `,"cloud"`, ",\x00\"cloud\"", 1),
			wantPs: []event.Problem{{Member: "", Rule: event.RuleNUL, Message: nul}},
		},
		{
			name: `an escaped backslash before u0000 is not a NUL`,
			rule: "a NUL character (raw or \\u0000) ... is refused: `\\\\u0000` is six characters, no NUL",
			in:   item("payload", `{"state":"active","provider":{"path":"C:\\u0000"}}`),
			want: func(e *event.Event) {
				e.Payload.Size = nil
				e.Payload.Provider = []byte(`{"path":"C:\\u0000"}`)
			},
		},
		{
			name:   `an escaped backslash, then an escaped NUL`,
			rule:   "a NUL character (raw or \\u0000) ... is refused",
			in:     item("payload", `{"state":"active","provider":{"path":"C:\\\u0000"}}`),
			wantPs: []event.Problem{{Member: "/payload/provider/path", Rule: event.RuleNUL, Message: nul}},
		},

		// not one object
		{
			name:   "top-level array",
			rule:   "a top-level value that is not an object ... is refused",
			in:     "[" + item() + "]",
			wantPs: []event.Problem{{Rule: event.RuleType, Message: "the item must be a JSON object, not an array"}},
		},
		{
			name:   "top-level string",
			rule:   "a top-level value that is not an object ... is refused",
			in:     `"{}"`,
			wantPs: []event.Problem{{Rule: event.RuleType, Message: "the item must be a JSON object, not a string"}},
		},
		{
			name:   "top-level number",
			rule:   "a top-level value that is not an object ... is refused",
			in:     ` -1.5`,
			wantPs: []event.Problem{{Rule: event.RuleType, Message: "the item must be a JSON object, not a number"}},
		},
		{
			name:   "top-level null",
			rule:   "a top-level value that is not an object ... is refused",
			in:     `null`,
			wantPs: []event.Problem{{Rule: event.RuleType, Message: "the item must be a JSON object, not null"}},
		},
		{
			name:   "top-level boolean",
			rule:   "a top-level value that is not an object ... is refused",
			in:     `false`,
			wantPs: []event.Problem{{Rule: event.RuleType, Message: "the item must be a JSON object, not a boolean"}},
		},
		{
			name:   "nothing",
			rule:   "a top-level value that is not an object ... is refused",
			in:     " \n ",
			wantPs: []event.Problem{{Rule: event.RuleType, Message: "the item must be a JSON object, not nothing"}},
		},
		{
			name:   "not JSON at all",
			rule:   "a top-level value that is not an object ... is refused",
			in:     `<event/>`,
			wantPs: []event.Problem{{Rule: event.RuleType, Message: "the item must be a JSON object, not invalid JSON"}},
		},
		{
			name:   "an object cut short",
			rule:   "b must hold one JSON object",
			in:     item()[:40],
			wantPs: []event.Problem{{Member: "/timestamp", Rule: event.RuleSyntax, Message: "invalid JSON: unexpected end of input"}},
		},
		{
			name:   "trailing object",
			rule:   "b must hold one JSON object and nothing else",
			in:     item() + "{}",
			wantPs: []event.Problem{{Rule: event.RuleSyntax, Message: "invalid JSON: invalid character '{' after top-level value"}},
		},
		{
			name:   "trailing garbage",
			rule:   "b must hold one JSON object and nothing else",
			in:     item() + " x",
			wantPs: []event.Problem{{Rule: event.RuleSyntax, Message: "invalid JSON: invalid character 'x' after top-level value"}},
		},
		{
			name:   "trailing comma",
			rule:   "b must hold one JSON object and nothing else",
			in:     item() + ",",
			wantPs: []event.Problem{{Rule: event.RuleSyntax, Message: "invalid JSON: invalid character ',' after top-level value"}},
		},

		// timestamps
		{
			name:   "naive OpenStack timestamp",
			rule:   "A naive OpenStack-style 2012-05-08 20:23:48.028195 is refused.",
			in:     item("timestamp", `"2012-05-08 20:23:48.028195"`),
			wantPs: []event.Problem{{Member: "/timestamp", Rule: event.RuleFormat, Message: format + ` (a T must follow the date, not " ")`}},
		},
		{
			name:   "RFC 3339 without a zone",
			rule:   "a timestamp that is not RFC 3339 with a zone ... is refused",
			in:     item("timestamp", `"2012-05-08T20:23:48.028195"`),
			wantPs: []event.Problem{{Member: "/timestamp", Rule: event.RuleFormat, Message: format + ` (a zone is required (Z or ±hh:mm): a time without one is ambiguous)`}},
		},
		{
			name:   "a date alone",
			rule:   "a timestamp that is not RFC 3339 with a zone ... is refused",
			in:     item("timestamp", `"2026-03-01"`),
			wantPs: []event.Problem{{Member: "/timestamp", Rule: event.RuleFormat, Message: format + ` ("2026-03-01" is too short for date, time and zone)`}},
		},
		{
			name:   "an empty timestamp",
			rule:   "a timestamp that is not RFC 3339 with a zone ... is refused",
			in:     item("timestamp", `""`),
			wantPs: []event.Problem{{Member: "/timestamp", Rule: event.RuleFormat, Message: format + ` ("" is too short for date, time and zone)`}},
		},
		{
			name:   "a Unix time number",
			rule:   "timestamp: string, RFC 3339 UTC",
			in:     item("timestamp", `1772366400`),
			wantPs: []event.Problem{{Member: "/timestamp", Rule: event.RuleFormat, Message: format}},
		},
		{
			name: "an offset is normalized to UTC",
			rule: "A timestamp with an offset is normalized to UTC.",
			in:   item("timestamp", `"2026-03-01T14:00:00+02:00"`),
			want: func(e *event.Event) {},
		},
		{
			name: "a negative offset across midnight",
			rule: "A timestamp with an offset is normalized to UTC.",
			in:   item("timestamp", `"2026-02-28T23:30:00-12:30"`),
			want: func(e *event.Event) {},
		},
		{
			name: "nanoseconds are truncated to microseconds",
			rule: "Timestamps are truncated to microseconds in this one place",
			in:   item("timestamp", `"2026-03-01T12:00:00.123456789Z"`),
			want: func(e *event.Event) { e.Timestamp = e.Timestamp.Add(123456 * time.Microsecond) },
		},
		{
			name: "truncated, not rounded, at an offset",
			rule: "Timestamps are truncated to microseconds in this one place",
			in:   item("timestamp", `"2026-03-01T17:30:00.9999999+05:30"`),
			want: func(e *event.Event) { e.Timestamp = e.Timestamp.Add(999999 * time.Microsecond) },
		},
		{
			name: "microseconds are kept",
			rule: "Timestamps are truncated to microseconds",
			in:   item("timestamp", `"2012-05-08T20:23:48.028195Z"`),
			want: func(e *event.Event) { e.Timestamp = time.Date(2012, 5, 8, 20, 23, 48, 28195000, time.UTC) },
		},
		{
			name:   "an offset that moves the instant past year 9999 in UTC",
			rule:   "timestamp: string, RFC 3339 UTC (a UTC form RFC 3339 cannot write is refused)",
			in:     item("timestamp", `"9999-12-31T23:59:59-01:00"`),
			wantPs: []event.Problem{{Member: "/timestamp", Rule: event.RuleFormat, Message: format + " (its UTC form lies in year 10000, outside the years 0000 to 9999 RFC 3339 can write)"}},
		},
		{
			name:   "an offset that moves the instant before year 0000 in UTC",
			rule:   "timestamp: string, RFC 3339 UTC (a UTC form RFC 3339 cannot write is refused)",
			in:     item("timestamp", `"0000-01-01T00:00:00+01:00"`),
			wantPs: []event.Problem{{Member: "/timestamp", Rule: event.RuleFormat, Message: format + " (its UTC form lies in year -1, outside the years 0000 to 9999 RFC 3339 can write)"}},
		},
		{
			name: "lower-case t and z",
			rule: "RFC 3339 section 5.6 NOTE: T and Z may alternatively be lower case",
			in:   item("timestamp", `"2026-03-01t12:00:00z"`),
			want: func(e *event.Event) {},
		},
		{
			name:   "offset +24:00",
			rule:   "RFC 3339 time-numoffset: time-hour is 00-23 (createEvent and ingestion refuse it alike)",
			in:     item("timestamp", `"2026-03-01T12:00:00+24:00"`),
			wantPs: []event.Problem{{Member: "/timestamp", Rule: event.RuleFormat, Message: format + " (offset hour 24 is not 00 to 23)"}},
		},
		{
			name:   "the zero instant is named for what it is, not required",
			rule:   "a refusal names the member and the rule it breaks: 0001-01-01T00:00:00Z is given, so not `required`",
			in:     item("timestamp", `"0001-01-01T00:00:00Z"`),
			wantPs: []event.Problem{{Member: "/timestamp", Rule: event.RuleMinimum, Message: "must be after 0001-01-01T00:00:00Z: that instant (to the microsecond) is the zero time, which tally reads as no timestamp"}},
		},
		{
			name: "just after the zero instant",
			rule: "timestamp: RFC 3339; only the zero instant is reserved",
			in:   item("timestamp", `"0001-01-01T00:00:00.000001Z"`),
			want: func(e *event.Event) { e.Timestamp = time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC) },
		},
		{
			name: "timestamp null reads as absent",
			rule: "timestamp is required",
			in:   item("timestamp", `null`),
			want: func(e *event.Event) { e.Timestamp = time.Time{} },
		},

		// member kinds
		{
			name:   "event_id a number",
			rule:   "event_id: string",
			in:     item("event_id", `42`),
			wantPs: []event.Problem{{Member: "/event_id", Rule: event.RuleType, Message: "must be a string, not a number"}},
		},
		{
			// json v2 reads null into a string as the zero value, so null
			// reads as a source left out.
			name: "source null reads as left out",
			rule: "source may be left out, and it defaults to collector.",
			in:   item("source", `null`),
			want: func(e *event.Event) { e.Source = "" },
		},
		{
			name:   "payload an array",
			rule:   "payload: PayloadEnvelope (an object)",
			in:     item("payload", `[]`),
			wantPs: []event.Problem{{Member: "/payload", Rule: event.RuleType, Message: "must be a JSON object"}},
		},
		{
			name:   "payload.state a number",
			rule:   "state: string or null",
			in:     item("payload", `{"state":1}`),
			wantPs: []event.Problem{{Member: "/payload/state", Rule: event.RuleType, Message: "must be a string or null"}},
		},
		{
			name:   "payload.state an object",
			rule:   "state: string or null",
			in:     item("payload", `{"state":{"v":"active"}}`),
			wantPs: []event.Problem{{Member: "/payload/state", Rule: event.RuleType, Message: "must be a string or null"}},
		},
		{
			name: "payload.size of another kind is decoded as it came; Validate refuses it",
			rule: "size: object (checked by Validate, so every problem is reported at once)",
			in:   item("payload", `{"state":"active","size":"m1.small","provider":[1]}`),
			want: func(e *event.Event) {
				e.Payload.Size = []byte(`"m1.small"`)
				e.Payload.Provider = []byte(`[1]`)
			},
		},

		// state absent, null and ""
		{
			name: "state absent",
			rule: "state ... omitted when empty; absent, null and \"\" survive a round trip as they came",
			in:   item("payload", `{"size":{"vcpus":2}}`),
			want: func(e *event.Event) { e.Payload.State = event.State{} },
		},
		{
			name: "state null",
			rule: "state: string or null",
			in:   item("payload", `{"state":null,"size":{"vcpus":2}}`),
			want: func(e *event.Event) { e.Payload.State = event.NullState() },
		},
		{
			name: `state ""`,
			rule: "state: string or null",
			in:   item("payload", `{"state":"","size":{"vcpus":2}}`),
			want: func(e *event.Event) { e.Payload.State = event.StateOf("") },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Logf("spec: %s", tt.rule)
			got, err := event.Decode([]byte(tt.in))
			if diff := cmp.Diff(tt.wantPs, problems(t, err)); diff != "" {
				t.Errorf("Decode(%.200q) problems (-want +got):\n%s", tt.in, diff)
			}
			if tt.want == nil {
				if diff := cmp.Diff(event.Event{}, got, cmpEvent); err != nil && diff != "" {
					t.Errorf("Decode returned a partial event with its error:\n%s", diff)
				}
				return
			}
			want := baseEvent()
			tt.want(&want)
			if diff := cmp.Diff(want, got, cmpEventJSON); diff != "" {
				t.Errorf("Decode(%.200q) (-want +got):\n%s", tt.in, diff)
			}
			if got.Timestamp.Location() != time.UTC {
				t.Errorf("timestamp location = %v, want UTC", got.Timestamp.Location())
			}
			if got.Timestamp.Nanosecond()%1000 != 0 {
				t.Errorf("timestamp %v is not truncated to microseconds", got.Timestamp)
			}
		})
	}
}

// TestDecodeStateRoundTrip: "Absent, null and "" survive a round trip as
// they came; absent and null both count as missing for the rules."
func TestDecodeStateRoundTrip(t *testing.T) {
	for _, tt := range []struct {
		payload         string
		missing, isNull bool
	}{
		{`{}`, true, false},
		{`{"state":null}`, true, true},
		{`{"state":""}`, false, false},
		{`{"state":"active"}`, false, false},
	} {
		ev, err := event.Decode([]byte(item("event_type", `"compute.instance.update"`, "payload", tt.payload)))
		if err != nil {
			t.Fatalf("%s: %v", tt.payload, err)
		}
		if got := ev.Payload.State.Missing(); got != tt.missing {
			t.Errorf("%s: Missing() = %v, want %v", tt.payload, got, tt.missing)
		}
		if got := ev.Payload.State.IsNull(); got != tt.isNull {
			t.Errorf("%s: IsNull() = %v, want %v", tt.payload, got, tt.isNull)
		}
		b, err := ev.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(string(b), `"payload":`+tt.payload+`}`) {
			t.Errorf("%s: re-encoded as %s", tt.payload, b)
		}
	}
}

// TestEncodingJSONv1 checks the Event against encoding/json (v1): its
// Marshal goes through Event.MarshalJSON, and its Unmarshal is as strict as
// Decode, because Event.UnmarshalJSON calls it.
func TestEncodingJSONv1(t *testing.T) {
	ev, err := event.Decode([]byte(item("payload", `{"state":"active","size":{"gb":12345678901234567890},"x":[0.1,1e400]}`)))
	if err != nil {
		t.Fatal(err)
	}
	v2, err := ev.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	v1, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if string(v1) != string(v2) {
		t.Errorf("json.Marshal = %s\nMarshalJSON  = %s", v1, v2)
	}
	v1p, err := json.Marshal(&ev)
	if err != nil || string(v1p) != string(v2) {
		t.Errorf("json.Marshal(&ev) = %s, %v", v1p, err)
	}

	// encoding/json escapes <, > and & (and U+2028, U+2029) in what a
	// MarshalJSON method returns; the bytes differ by exactly that.
	ev.Payload.State = event.StateOf("<a & b>\u2028")
	v2, _ = ev.MarshalJSON()
	v1, _ = json.Marshal(ev)
	var esc bytes.Buffer
	json.HTMLEscape(&esc, v2)
	if string(v1) != esc.String() {
		t.Errorf("json.Marshal = %s\nHTMLEscape(MarshalJSON) = %s", v1, esc.String())
	}

	var back event.Event
	if err := json.Unmarshal(v1, &back); err != nil {
		t.Fatalf("json.Unmarshal of json.Marshal output: %v", err)
	}
	if diff := cmp.Diff(ev, back, cmpEventJSON); diff != "" {
		t.Errorf("v1 round trip (-want +got):\n%s", diff)
	}

	for _, in := range []string{
		item("event_id", "", "Event_ID", `"e-1"`),
		item("region", `"eu"`),
		strings.TrimSuffix(item(), "}") + `,"cloud":"x"}`,
		item("payload", `{"state":"a","size":{"v":1,"v":2}}`),
		item("resource_id", "\"\xff\""),
		item("timestamp", `"2012-05-08 20:23:48.028195"`),
		item("event_id", `"\u0000"`),
		`null`,
		`[]`,
	} {
		var e event.Event
		err := json.Unmarshal([]byte(in), &e)
		if err == nil {
			t.Errorf("json.Unmarshal(%.120q) accepted it: %+v", in, e)
			continue
		}
		problems(t, err)
	}
	var ok event.Event
	if err := json.Unmarshal([]byte(item("timestamp", `"2026-03-01T14:00:00.1234567+02:00"`)), &ok); err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC); !ok.Timestamp.Equal(want) || ok.Timestamp.Location() != time.UTC {
		t.Errorf("json.Unmarshal timestamp = %v, want %v", ok.Timestamp, want)
	}
}

// TestDecodeKeepsNoReference: Decode's result does not share memory with
// its input, so a caller may reuse the buffer.
func TestDecodeKeepsNoReference(t *testing.T) {
	in := []byte(item("payload", `{"state":"active","size":{"vcpus":2},"provider":{"h":"x"},"extra":[1]}`))
	ev, err := event.Decode(in)
	if err != nil {
		t.Fatal(err)
	}
	before, err := ev.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		in[i] = ' '
	}
	after, err := ev.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(before), string(after)); diff != "" {
		t.Errorf("event changed with its input buffer (-before +after):\n%s", diff)
	}
}

// A refusal deep inside the payload keeps its rule and message: the path is
// bounded (MaxMemberLen) and cut at a token boundary.
func TestDecodeBoundsDeepPaths(t *testing.T) {
	deep := `{"event_id":"e","payload":{"provider":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}}`
	long := `{"payload":{"provider":{"` + strings.Repeat("k", 5000) + `":1,"` + strings.Repeat("k", 5000) + `":2}}}`
	for name, in := range map[string]string{"deep nesting": deep, "huge duplicated name": long} {
		_, err := event.Decode([]byte(in))
		var e *event.ValidationError
		if !errors.As(err, &e) || len(e.Problems) != 1 {
			t.Fatalf("%s: %v, want one problem", name, err)
		}
		p := e.Problems[0]
		if len(p.Member) > event.MaxMemberLen || p.Rule == "" || p.Message == "" {
			t.Errorf("%s: path of %d bytes, rule %q, message %q", name, len(p.Member), p.Rule, p.Message)
		}
		if !strings.HasPrefix(p.Member, "/payload/provider") {
			t.Errorf("%s: path %q does not name the member", name, p.Member)
		}
	}
}
