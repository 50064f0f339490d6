package event_test

import (
	"errors"
	"github.com/go-json-experiment/json/jsontext"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tallyhq/tally/event"
)

// validEvent returns an instance create that breaks no rule. Each test case
// changes one thing in it.
func validEvent() event.Event {
	return event.Event{
		EventID:      "8f3c9e1a-4b2d-4c6e-9f0a-1b2c3d4e5f60",
		Timestamp:    time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		EventType:    "compute.instance.create.end",
		Platform:     "openstack",
		Cloud:        "os-prod-eu1",
		ResourceType: "instance",
		ResourceID:   "i-1",
		ProjectID:    "p-1",
		Source:       event.SourceCollector,
		Payload: event.PayloadEnvelope{
			State:    event.StateOf("active"),
			Size:     []byte(`{"vcpus":2,"ram_gb":4,"disk_gb":40,"flavor":"m1.medium"}`),
			Provider: []byte(`{"oslo_event_type":"compute.instance.create.end"}`),
		},
	}
}

// bytesOf returns a string of exactly n bytes made of the 3-byte rune "€"
// (and ASCII "a" to make up the rest), so a bound that counted runes instead
// of bytes would let it through.
func bytesOf(n int) string {
	s := strings.Repeat("€", n/3) + strings.Repeat("a", n%3)
	if len(s) != n {
		panic("bytesOf")
	}
	return s
}

// problems returns the problems of err, nil for nil, and fails the test when
// err is not an *event.ValidationError matching event.ErrInvalid.
func problems(t *testing.T, err error) []event.Problem {
	t.Helper()
	if err == nil {
		return nil
	}
	var e *event.ValidationError
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *event.ValidationError", err, err)
	}
	if !errors.Is(err, event.ErrInvalid) {
		t.Errorf("errors.Is(%v, ErrInvalid) = false", err)
	}
	if len(e.Problems) == 0 {
		t.Errorf("an *event.ValidationError with no problems was returned")
	}
	return e.Problems
}

func TestValidate(t *testing.T) {
	const (
		create = "compute.instance.create.end"
		update = "compute.instance.update"
		del    = "compute.instance.delete.end"
	)
	idMsg := func(n int) string { return "must be at most 512 bytes, has " + strconv.Itoa(n) }
	tests := []struct {
		name   string
		rule   string // the spec sentence the case enforces
		mutate func(e *event.Event)
		want   []event.Problem
	}{
		{
			name:   "valid create",
			rule:   "CategoryCreate ... requires a full payload (state and size).",
			mutate: func(e *event.Event) {},
		},

		// event_id
		{
			name:   "event_id empty",
			rule:   "eventIDMaxLen 256 (event_id is always present)",
			mutate: func(e *event.Event) { e.EventID = "" },
			want:   []event.Problem{{Member: "/event_id", Rule: event.RuleRequired, Message: "is required (1 to 256 bytes)"}},
		},
		{
			name:   "event_id of one byte",
			rule:   "eventIDMaxLen 256",
			mutate: func(e *event.Event) { e.EventID = "x" },
		},
		{
			name:   "event_id of exactly 256 bytes of multi-byte UTF-8",
			rule:   "eventIDMaxLen bounds event_id so it fits the database column",
			mutate: func(e *event.Event) { e.EventID = bytesOf(256) },
		},
		{
			name:   "event_id of 257 bytes",
			rule:   "eventIDMaxLen bounds event_id so it fits the database column",
			mutate: func(e *event.Event) { e.EventID = bytesOf(257) },
			want:   []event.Problem{{Member: "/event_id", Rule: event.RuleMaxLength, Message: "must be at most 256 bytes, has 257"}},
		},
		{
			name: "deterministic event_id is within the bound",
			rule: "Where none exists it is the deterministic hash ..., hex and prefixed with the platform name.",
			mutate: func(e *event.Event) {
				e.EventID = event.DeterministicID(e.Platform, e.Cloud, e.ResourceID, e.EventType, e.Timestamp)
			},
		},

		// timestamp
		{
			name:   "timestamp unset",
			rule:   "timestamp: string, RFC 3339 UTC, always",
			mutate: func(e *event.Event) { e.Timestamp = time.Time{} },
			want:   []event.Problem{{Member: "/timestamp", Rule: event.RuleRequired, Message: "is required (RFC 3339 with a zone)"}},
		},

		// event_type
		{
			name: "event_type empty",
			rule: "event_type has to match the regular expression ^[a-z0-9_]+(\\.[a-z0-9_]+)+$",
			// A broken size beside it shows the size check does not hang on
			// the type.
			mutate: func(e *event.Event) { e.EventType, e.Payload.Size = "", []byte(`[]`) },
			want: []event.Problem{
				{Member: "/event_type", Rule: event.RuleRequired, Message: "is required"},
				{Member: "/payload/size", Rule: event.RuleType, Message: "must be an object, not an array"},
			},
		},
		{
			name:   "event_type of two parts",
			rule:   "two or more parts of lower-case letters, digits and underscores, separated by dots",
			mutate: func(e *event.Event) { e.EventType = "a_1.b2" },
		},
		{
			name:   "event_type of one part",
			rule:   "two or more parts of lower-case letters, digits and underscores, separated by dots",
			mutate: func(e *event.Event) { e.EventType = "compute" },
			want:   []event.Problem{patternProblem("compute")},
		},
		{
			name:   "event_type with upper case",
			rule:   "two or more parts of lower-case letters, digits and underscores, separated by dots",
			mutate: func(e *event.Event) { e.EventType = "Compute.instance.create" },
			want:   []event.Problem{patternProblem("Compute.instance.create")},
		},
		{
			name:   "event_type with an empty part",
			rule:   "two or more parts of lower-case letters, digits and underscores, separated by dots",
			mutate: func(e *event.Event) { e.EventType = "compute..create" },
			want:   []event.Problem{patternProblem("compute..create")},
		},
		{
			name:   "event_type with a leading dot",
			rule:   "two or more parts of lower-case letters, digits and underscores, separated by dots",
			mutate: func(e *event.Event) { e.EventType = ".compute.create" },
			want:   []event.Problem{patternProblem(".compute.create")},
		},
		{
			name:   "event_type with a trailing dot",
			rule:   "two or more parts of lower-case letters, digits and underscores, separated by dots",
			mutate: func(e *event.Event) { e.EventType = "compute.create." },
			want:   []event.Problem{patternProblem("compute.create.")},
		},
		{
			name:   "event_type with a hyphen",
			rule:   "two or more parts of lower-case letters, digits and underscores, separated by dots",
			mutate: func(e *event.Event) { e.EventType = "compute.instance-create" },
			want:   []event.Problem{patternProblem("compute.instance-create")},
		},
		{
			name:   "event_type with a trailing newline ($ is the end of the text)",
			rule:   "event_type has to match the regular expression ^[a-z0-9_]+(\\.[a-z0-9_]+)+$",
			mutate: func(e *event.Event) { e.EventType = "compute.create\n" },
			want:   []event.Problem{patternProblem("compute.create\n")},
		},
		{
			name: "event_type of exactly 512 bytes matching the pattern",
			rule: "eventTypeMaxLen 512",
			mutate: func(e *event.Event) {
				e.EventType = "compute.create." + strings.Repeat("x", 512-len("compute.create."))
			},
		},
		{
			name:   "event_type of 512 bytes of multi-byte UTF-8 is checked against the pattern and quoted",
			rule:   "The length is checked before the pattern",
			mutate: func(e *event.Event) { e.EventType = "a.b" + bytesOf(509) },
			want:   []event.Problem{patternProblem("a.b" + bytesOf(509))},
		},
		{
			name: "event_type of 513 bytes matching the pattern but for its length",
			rule: "the pattern alone lets a value of any length through",
			mutate: func(e *event.Event) {
				e.EventType = "compute.create." + strings.Repeat("x", 513-len("compute.create."))
			},
			want: []event.Problem{{Member: "/event_type", Rule: event.RuleMaxLength, Message: "must be at most 512 bytes, has 513"}},
		},
		{
			name:   "event_type of 513 bytes of multi-byte UTF-8 is refused for its length, not quoted back",
			rule:   "an over-long type is refused for its length and the refusal does not quote the value back",
			mutate: func(e *event.Event) { e.EventType = bytesOf(513) },
			want:   []event.Problem{{Member: "/event_type", Rule: event.RuleMaxLength, Message: "must be at most 512 bytes, has 513"}},
		},

		// source
		{
			name:   "source left out",
			rule:   "source may be left out, and it defaults to collector.",
			mutate: func(e *event.Event) { e.Source = "" },
		},
		{
			name:   "source reconciliation",
			rule:   "SourceReconciliation marks a synthetic event emitted by a server-side sync run",
			mutate: func(e *event.Event) { e.Source = event.SourceReconciliation },
		},
		{
			name:   "source outside the set",
			rule:   "A value outside collector and reconciliation refuses the item.",
			mutate: func(e *event.Event) { e.Source = "push" },
			want:   []event.Problem{{Member: "/source", Rule: event.RuleEnum, Message: `"push" must be collector or reconciliation, or left out`}},
		},
		{
			name:   "source in another case",
			rule:   "A value outside collector and reconciliation refuses the item.",
			mutate: func(e *event.Event) { e.Source = "Collector" },
			want:   []event.Problem{{Member: "/source", Rule: event.RuleEnum, Message: `"Collector" must be collector or reconciliation, or left out`}},
		},
		{
			name:   "over-long source is not quoted back",
			rule:   "A value outside collector and reconciliation refuses the item.",
			mutate: func(e *event.Event) { e.Source = event.Source(bytesOf(513)) },
			want:   []event.Problem{{Member: "/source", Rule: event.RuleEnum, Message: "must be collector or reconciliation, or left out"}},
		},

		// platform and cloud: meta and partner
		{
			name:   "platform meta",
			rule:   "platform and cloud are neither meta nor partner.",
			mutate: func(e *event.Event) { e.Platform = "meta" },
			want:   []event.Problem{reserved("/platform", "meta")},
		},
		{
			name:   "platform partner",
			rule:   "platform and cloud are neither meta nor partner.",
			mutate: func(e *event.Event) { e.Platform = "partner" },
			want:   []event.Problem{reserved("/platform", "partner")},
		},
		{
			name:   "cloud meta",
			rule:   "an item holding either literal in either field is refused",
			mutate: func(e *event.Event) { e.Cloud = "meta" },
			want:   []event.Problem{reserved("/cloud", "meta")},
		},
		{
			name:   "cloud partner",
			rule:   "an item holding either literal in either field is refused",
			mutate: func(e *event.Event) { e.Cloud = "partner" },
			want:   []event.Problem{reserved("/cloud", "partner")},
		},
		{
			name:   "platform and cloud both virtual",
			rule:   "an item holding either literal in either field is refused",
			mutate: func(e *event.Event) { e.Platform, e.Cloud = "partner", "meta" },
			want:   []event.Problem{reserved("/platform", "partner"), reserved("/cloud", "meta")},
		},
		{
			name:   "the literals only: Meta, metadata and partners are ordinary names",
			rule:   "The two literals name the virtual projects",
			mutate: func(e *event.Event) { e.Platform, e.Cloud = "Meta", "partners" },
		},
		{
			name:   "meta elsewhere than platform and cloud is an ordinary value",
			rule:   "platform and cloud are neither meta nor partner.",
			mutate: func(e *event.Event) { e.ResourceType, e.ResourceID, e.ProjectID = "meta", "partner", "meta" },
		},

		// payload.state
		{
			name:   "state of exactly 512 bytes of multi-byte UTF-8",
			rule:   "stateMaxLen 512 bounds payload.state",
			mutate: func(e *event.Event) { e.Payload.State = event.StateOf(bytesOf(512)) },
		},
		{
			name:   "state of 513 bytes",
			rule:   "stateMaxLen 512 bounds payload.state",
			mutate: func(e *event.Event) { e.Payload.State = event.StateOf(bytesOf(513)) },
			want:   []event.Problem{{Member: "/payload/state", Rule: event.RuleMaxLength, Message: "must be at most 512 bytes, has 513"}},
		},
		{
			name: "state of 513 bytes on a delete",
			rule: "stateMaxLen 512 bounds payload.state",
			mutate: func(e *event.Event) {
				e.EventType, e.Payload.State = del, event.StateOf(bytesOf(513))
			},
			want: []event.Problem{{Member: "/payload/state", Rule: event.RuleMaxLength, Message: "must be at most 512 bytes, has 513"}},
		},

		// payload.size
		{
			name:   "size absent on a create",
			rule:   "A create sets created_at ... and requires payload.size beside payload.state.",
			mutate: func(e *event.Event) { e.Payload.Size = nil },
			want:   []event.Problem{{Member: "/payload/size", Rule: event.RuleRequired, Message: "is required on a create (the full size object)"}},
		},
		{
			name:   "size null on a create",
			rule:   "payload.size is the full replacement size object. It is required on a create",
			mutate: func(e *event.Event) { e.Payload.Size = []byte("null") },
			want:   []event.Problem{{Member: "/payload/size", Rule: event.RuleRequired, Message: "is required on a create (the full size object)"}},
		},
		{
			name:   "size absent on an update",
			rule:   "absent means the size did not change",
			mutate: func(e *event.Event) { e.EventType, e.Payload.Size = update, nil },
		},
		{
			name:   "size absent on a delete",
			rule:   "absent means the size did not change",
			mutate: func(e *event.Event) { e.EventType, e.Payload.Size = del, nil },
		},
		{
			name:   "size on an update",
			rule:   "It is required on a create and on any event that changes the size",
			mutate: func(e *event.Event) { e.EventType = "compute.instance.resize.confirm.end" },
		},
		{
			name:   "size an array",
			rule:   "size: object",
			mutate: func(e *event.Event) { e.Payload.Size = []byte(`[2,4]`) },
			want:   []event.Problem{{Member: "/payload/size", Rule: event.RuleType, Message: "must be an object, not an array"}},
		},
		{
			name:   "size a string on an update",
			rule:   "size: object",
			mutate: func(e *event.Event) { e.EventType, e.Payload.Size = update, []byte(`"m1.small"`) },
			want:   []event.Problem{{Member: "/payload/size", Rule: event.RuleType, Message: "must be an object, not a string"}},
		},
		{
			name:   "size a number",
			rule:   "size: object",
			mutate: func(e *event.Event) { e.Payload.Size = []byte(`-1`) },
			want:   []event.Problem{{Member: "/payload/size", Rule: event.RuleType, Message: "must be an object, not a number"}},
		},
		{
			name:   "size a boolean",
			rule:   "size: object",
			mutate: func(e *event.Event) { e.Payload.Size = []byte(`true`) },
			want:   []event.Problem{{Member: "/payload/size", Rule: event.RuleType, Message: "must be an object, not a boolean"}},
		},
		{
			name:   "size an empty object",
			rule:   "size: object",
			mutate: func(e *event.Event) { e.Payload.Size = []byte(`{}`) },
		},

		// payload.provider
		{
			name:   "provider absent",
			rule:   "provider: object, omitted when empty",
			mutate: func(e *event.Event) { e.Payload.Provider = nil },
		},
		{
			name:   "provider empty object",
			rule:   "provider: object, omitted when empty",
			mutate: func(e *event.Event) { e.Payload.Provider = []byte(`{}`) },
		},
		{
			name:   "provider null",
			rule:   "provider: object, omitted when empty",
			mutate: func(e *event.Event) { e.Payload.Provider = []byte(`null`) },
		},
		{
			name:   "provider an array",
			rule:   "provider: object",
			mutate: func(e *event.Event) { e.Payload.Provider = []byte(` [1]`) },
			want:   []event.Problem{{Member: "/payload/provider", Rule: event.RuleType, Message: "must be an object, not an array"}},
		},
		{
			name:   "provider a string",
			rule:   "provider: object",
			mutate: func(e *event.Event) { e.Payload.Provider = []byte(`"raw"`) },
			want:   []event.Problem{{Member: "/payload/provider", Rule: event.RuleType, Message: "must be an object, not a string"}},
		},

		// everything at once, in the fixed order of the members
		{
			name: "every rule broken at once, in the order of the members",
			rule: "Validate reports every rule an event breaks at once rather than the first one.",
			mutate: func(e *event.Event) {
				*e = event.Event{
					EventID:      bytesOf(300),
					EventType:    "Instance.Create",
					Platform:     "meta",
					Cloud:        "partner",
					ResourceType: "",
					ResourceID:   bytesOf(600),
					ProjectID:    "",
					Source:       "push",
					Payload: event.PayloadEnvelope{
						State:    event.StateOf(bytesOf(513)),
						Size:     []byte(`[]`),
						Provider: []byte(`7`),
					},
				}
			},
			want: []event.Problem{
				{Member: "/event_id", Rule: event.RuleMaxLength, Message: "must be at most 256 bytes, has 300"},
				{Member: "/timestamp", Rule: event.RuleRequired, Message: "is required (RFC 3339 with a zone)"},
				patternProblem("Instance.Create"),
				reserved("/platform", "meta"),
				reserved("/cloud", "partner"),
				{Member: "/resource_type", Rule: event.RuleRequired, Message: "is required (1 to 512 bytes)"},
				{Member: "/resource_id", Rule: event.RuleMaxLength, Message: idMsg(600)},
				{Member: "/project_id", Rule: event.RuleRequired, Message: "is required (1 to 512 bytes)"},
				{Member: "/source", Rule: event.RuleEnum, Message: `"push" must be collector or reconciliation, or left out`},
				{Member: "/payload/state", Rule: event.RuleMaxLength, Message: "must be at most 512 bytes, has 513"},
				{Member: "/payload/size", Rule: event.RuleType, Message: "must be an object, not an array"},
				{Member: "/payload/provider", Rule: event.RuleType, Message: "must be an object, not a number"},
			},
		},
		{
			name: "the zero event: every required member at once",
			rule: "Validate reports every rule an event breaks at once rather than the first one.",
			mutate: func(e *event.Event) {
				*e = event.Event{}
			},
			want: []event.Problem{
				{Member: "/event_id", Rule: event.RuleRequired, Message: "is required (1 to 256 bytes)"},
				{Member: "/timestamp", Rule: event.RuleRequired, Message: "is required (RFC 3339 with a zone)"},
				{Member: "/event_type", Rule: event.RuleRequired, Message: "is required"},
				{Member: "/platform", Rule: event.RuleRequired, Message: "is required (1 to 512 bytes)"},
				{Member: "/cloud", Rule: event.RuleRequired, Message: "is required (1 to 512 bytes)"},
				{Member: "/resource_type", Rule: event.RuleRequired, Message: "is required (1 to 512 bytes)"},
				{Member: "/resource_id", Rule: event.RuleRequired, Message: "is required (1 to 512 bytes)"},
				{Member: "/project_id", Rule: event.RuleRequired, Message: "is required (1 to 512 bytes)"},
				{Member: "/payload/state", Rule: event.RuleRequired, Message: "is required on every event except a delete"},
			},
		},
		{
			name: "a Go-built event's raw members: every problem at once, after the members' own",
			rule: "Validate reports every rule an event breaks at once rather than the first one.",
			mutate: func(e *event.Event) {
				e.EventID = "e\x00"
				e.Timestamp = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
				e.Payload.Size = jsontext.Value(`{bad`)
				e.Payload.Provider = jsontext.Value(`{"a":"\u0000"}`)
				e.Payload.Unknown = jsontext.Value(`{"provider":1,"size":2,"state":3}`)
			},
			want: []event.Problem{
				{Member: "/event_id", Rule: event.RuleNUL, Message: "must not contain a NUL character"},
				{Member: "/timestamp", Rule: event.RuleFormat, Message: "must lie in years 0000 to 9999 in UTC, as RFC 3339 writes them"},
				{Member: "/payload/size", Rule: event.RuleSyntax, Message: "must be one valid JSON value (valid UTF-8, no member given twice)"},
				{Member: "/payload/provider", Rule: event.RuleNUL, Message: "must not contain a NUL character (\\u0000)"},
				{Member: "/payload/state", Rule: event.RuleDuplicateMember, Message: "is given more than once (also among the unknown members)"},
				{Member: "/payload/size", Rule: event.RuleDuplicateMember, Message: "is given more than once (also among the unknown members)"},
				{Member: "/payload/provider", Rule: event.RuleDuplicateMember, Message: "is given more than once (also among the unknown members)"},
			},
		},
		{
			name: "a Go-built event's unknown members neither valid JSON nor an object",
			rule: "Validate reports every rule an event breaks at once rather than the first one.",
			mutate: func(e *event.Event) {
				e.Payload.Size = jsontext.Value(`"big"`)
				e.Payload.Unknown = jsontext.Value(`[1,`)
			},
			want: []event.Problem{
				{Member: "/payload/size", Rule: event.RuleType, Message: "must be an object, not a string"},
				{Member: "/payload", Rule: event.RuleSyntax, Message: "must be one valid JSON value (valid UTF-8, no member given twice)"},
				{Member: "/payload", Rule: event.RuleType, Message: "unknown members must form an object, not an array"},
			},
		},
		{
			name: "a create without size, whose provider is not an object",
			rule: "CategoryCreate ... requires a full payload (state and size).",
			mutate: func(e *event.Event) {
				e.Payload.Size = jsontext.Value(`null`)
				e.Payload.Provider = jsontext.Value(`true`)
			},
			want: []event.Problem{
				{Member: "/payload/size", Rule: event.RuleRequired, Message: "is required on a create (the full size object)"},
				{Member: "/payload/provider", Rule: event.RuleType, Message: "must be an object, not a boolean"},
			},
		},
	}
	// identifierMaxLen: platform, cloud, resource_type, resource_id and
	// project_id, each required, each bounded at 512 bytes.
	for _, f := range []struct {
		path string
		set  func(e *event.Event, v string)
	}{
		{"/platform", func(e *event.Event, v string) { e.Platform = v }},
		{"/cloud", func(e *event.Event, v string) { e.Cloud = v }},
		{"/resource_type", func(e *event.Event, v string) { e.ResourceType = v }},
		{"/resource_id", func(e *event.Event, v string) { e.ResourceID = v }},
		{"/project_id", func(e *event.Event, v string) { e.ProjectID = v }},
	} {
		const rule = "identifierMaxLen bounds platform, cloud, resource_type, resource_id and project_id. All five are required, and an empty one is refused."
		tests = append(tests,
			struct {
				name   string
				rule   string
				mutate func(e *event.Event)
				want   []event.Problem
			}{
				name: f.path[1:] + " empty", rule: rule,
				mutate: func(e *event.Event) { f.set(e, "") },
				want:   []event.Problem{{Member: f.path, Rule: event.RuleRequired, Message: "is required (1 to 512 bytes)"}},
			},
			struct {
				name   string
				rule   string
				mutate func(e *event.Event)
				want   []event.Problem
			}{
				name: f.path[1:] + " of exactly 512 bytes of multi-byte UTF-8", rule: rule,
				mutate: func(e *event.Event) { f.set(e, bytesOf(512)) },
			},
			struct {
				name   string
				rule   string
				mutate func(e *event.Event)
				want   []event.Problem
			}{
				name: f.path[1:] + " of 513 bytes", rule: rule,
				mutate: func(e *event.Event) { f.set(e, bytesOf(513)) },
				want:   []event.Problem{{Member: f.path, Rule: event.RuleMaxLength, Message: idMsg(513)}},
			},
		)
	}

	// payload.state on each category: absent, null, "" and a value.
	// "It is required on every event except a delete, where the core sets
	// deleted itself." Absent and null both count as missing.
	stateRequired := []event.Problem{{Member: "/payload/state", Rule: event.RuleRequired, Message: "is required on every event except a delete"}}
	for _, c := range []struct {
		cat, eventType string
		missingRefused bool
	}{
		{"create", create, true},
		{"update", update, true},
		{"delete", del, false},
		{"sync.create", "sync.create", true},
		{"sync.update", "sync.update", true},
		{"sync.delete", "sync.delete", false},
	} {
		for _, s := range []struct {
			name    string
			state   event.State
			missing bool
		}{
			{"absent", event.State{}, true},
			{"null", event.NullState(), true},
			{`""`, event.StateOf(""), false},
			{"set", event.StateOf("active"), false},
		} {
			var want []event.Problem
			if s.missing && c.missingRefused {
				want = stateRequired
			}
			tests = append(tests, struct {
				name   string
				rule   string
				mutate func(e *event.Event)
				want   []event.Problem
			}{
				name:   "state " + s.name + " on " + c.cat,
				rule:   "payload.state ... is required on every event except a delete, where the core sets deleted itself.",
				mutate: func(e *event.Event) { e.EventType, e.Payload.State = c.eventType, s.state },
				want:   want,
			})
		}
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Logf("spec: %s", tt.rule)
			e := validEvent()
			tt.mutate(&e)
			before := e
			got := problems(t, event.Validate(&e))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Validate problems (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, e, cmpEvent); diff != "" {
				t.Errorf("Validate changed the event (-before +after):\n%s", diff)
			}
		})
	}
}

// TestValidateNeverQuotesOverLongValues: "The length is checked before the
// pattern, so an over-long type is refused for its length and the refusal
// does not quote the value back." No message quotes any over-long value.
func TestValidateNeverQuotesOverLongValues(t *testing.T) {
	for _, long := range []string{bytesOf(513), strings.Repeat("Z", 513), "a." + strings.Repeat("B", 100000)} {
		e := validEvent()
		e.EventType = long
		e.Source = event.Source(long)
		e.Payload.State = event.StateOf(long)
		err := event.Validate(&e)
		if err == nil {
			t.Fatal("Validate accepted over-long values")
		}
		for _, p := range problems(t, err) {
			if strings.Contains(p.Message, long[:40]) {
				t.Errorf("%s: message quotes the over-long value back: %.80q", p.Member, p.Message)
			}
			if len(p.Message) > 200 {
				t.Errorf("%s: message is %d bytes long", p.Member, len(p.Message))
			}
		}
		if s := err.Error(); strings.Contains(s, long[:40]) {
			t.Errorf("Error() quotes the over-long value back: %.80q", s)
		}
	}
}

func TestErrorAndProblemStrings(t *testing.T) {
	e := validEvent()
	e.Cloud = "meta"
	e.Payload.State = event.State{}
	err := event.Validate(&e)
	// The form of a refusal reason after its kind (docs/decisions.md, Refusal
	// reasons): "<JSON Pointer>: <rule>: <message>".
	want := `/cloud: reserved: must not be "meta": meta and partner name the virtual projects, which own no resources; /payload/state: required: is required on every event except a delete`
	if got := err.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got := (event.Problem{Rule: event.RuleType, Message: "the item must be a JSON object, not null"}).String(); got != ": type: the item must be a JSON object, not null" {
		t.Errorf("String() of a whole-item problem = %q", got)
	}
	var target *event.ValidationError
	if !errors.As(err, &target) || len(target.Problems) != 2 {
		t.Fatalf("errors.As: %v", err)
	}
	if errors.Is(errors.New("other"), event.ErrInvalid) {
		t.Error("an unrelated error matches ErrInvalid")
	}
}

// Validate returns an untyped nil, never a typed-nil *Error.
func TestValidateReturnsUntypedNil(t *testing.T) {
	e := validEvent()
	if err := event.Validate(&e); err != nil {
		t.Fatalf("Validate(valid) = %v", err)
	}
}

func TestSourcesAndCategories(t *testing.T) {
	if diff := cmp.Diff([]event.Source{"collector", "reconciliation"}, event.Sources()); diff != "" {
		t.Errorf("Sources (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]event.Category{"create", "update", "delete"}, event.Categories()); diff != "" {
		t.Errorf("Categories (-want +got):\n%s", diff)
	}
	for _, s := range event.Sources() {
		if !s.Valid() {
			t.Errorf("%q.Valid() = false", s)
		}
	}
	for _, s := range []event.Source{"", "Collector", "sync"} {
		if s.Valid() {
			t.Errorf("%q.Valid() = true", s)
		}
	}
}

func patternProblem(v string) event.Problem {
	return event.Problem{Member: "/event_type", Rule: event.RulePattern, Message: strconv.Quote(v) + ` must be two or more dot-separated parts of a-z, 0-9 and _ (^[a-z0-9_]+(\.[a-z0-9_]+)+$)`}
}

func reserved(path, v string) event.Problem {
	return event.Problem{Member: path, Rule: event.RuleReserved, Message: `must not be "` + v + `": meta and partner name the virtual projects, which own no resources`}
}

// A Go-built event can hold what Decode never produces; Validate refuses
// whatever the encoder or a store could not keep, so an event that passes
// Validate always encodes (and MarshalJSON never returns a partial document).
func TestValidateGoBuiltEvents(t *testing.T) {
	base := func() event.Event {
		return event.Event{
			EventID: "e", Timestamp: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), EventType: "volume.create.end",
			Platform: "openstack", Cloud: "c", ResourceType: "volume", ResourceID: "v", ProjectID: "p",
			Payload: event.PayloadEnvelope{State: event.StateOf("available"), Size: jsontext.Value(`{"size_gb":1}`)},
		}
	}
	tests := []struct {
		name     string
		mutate   func(*event.Event)
		wantPath string
		wantRule string
	}{
		{"NUL in cloud", func(e *event.Event) { e.Cloud = "c\x00" }, "/cloud", event.RuleNUL},
		{"invalid UTF-8 in resource_id", func(e *event.Event) { e.ResourceID = "v\xff" }, "/resource_id", event.RuleUTF8},
		{"invalid UTF-8 in state", func(e *event.Event) { e.Payload.State = event.StateOf("\xff") }, "/payload/state", event.RuleUTF8},
		{"broken size", func(e *event.Event) { e.Payload.Size = jsontext.Value(`{bad`) }, "/payload/size", event.RuleSyntax},
		{"two values as size", func(e *event.Event) { e.Payload.Size = jsontext.Value(`{"a":1}{"b":2}`) }, "/payload/size", event.RuleSyntax},
		{"duplicate member in provider", func(e *event.Event) { e.Payload.Provider = jsontext.Value(`{"a":1,"a":2}`) }, "/payload/provider", event.RuleSyntax},
		{"NUL in provider", func(e *event.Event) { e.Payload.Provider = jsontext.Value(`{"a":"\u0000"}`) }, "/payload/provider", event.RuleNUL},
		{"unknown members not an object", func(e *event.Event) { e.Payload.Unknown = jsontext.Value(`[1]`) }, "/payload", event.RuleType},
		{"unknown member named like a known one", func(e *event.Event) { e.Payload.Unknown = jsontext.Value(`{"state":"dup"}`) }, "/payload/state", event.RuleDuplicateMember},
		{"year 10000", func(e *event.Event) { e.Timestamp = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, "/timestamp", event.RuleFormat},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := base()
			tt.mutate(&e)
			err := event.Validate(&e)
			var ve *event.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate: %v, want an *event.ValidationError", err)
			}
			found := false
			for _, p := range ve.Problems {
				found = found || (p.Member == tt.wantPath && p.Rule == tt.wantRule)
			}
			if !found {
				t.Errorf("problems %+v lack %s %s", ve.Problems, tt.wantPath, tt.wantRule)
			}
			if b, err := e.MarshalJSON(); err != nil && b != nil {
				t.Errorf("MarshalJSON returned %d bytes with its error", len(b))
			}
		})
	}
	t.Run("a valid Go-built event encodes", func(t *testing.T) {
		e := base()
		e.Payload.Unknown = jsontext.Value(`{"extra":1}`)
		if err := event.Validate(&e); err != nil {
			t.Fatal(err)
		}
		if _, err := e.MarshalJSON(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("nil", func(t *testing.T) {
		if err := event.Validate(nil); !errors.Is(err, event.ErrInvalid) {
			t.Errorf("Validate(nil): %v", err)
		}
	})
}
