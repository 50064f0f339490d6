package correlatehttp

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
)

// W3C Trace Context Level 1, 3.2 traceparent header: lower-case hex,
// version ff invalid, version 00 exactly 55 characters, later versions may
// append "-…", trace-id and parent-id not all zeros.
func TestTraceparent(t *testing.T) {
	const valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		name, v      string
		trace, paren string
		wantErr      string
	}{
		{"version 00", valid, "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", ""},
		{"future version with more fields", "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-what-the-future-holds",
			"4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", ""},
		{"future version, exactly 55", "01" + valid[2:], "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", ""},
		{"version ff", "ff" + valid[2:], "", "", "version"},
		{"version 00 with more", valid + "-x", "", "", "exactly 55"},
		{"future version, no dash after flags", "01" + valid[2:] + "x", "", "", "'-'"},
		{"upper-case trace-id", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "", "", "trace-id"},
		{"zero trace-id", "00-" + strings.Repeat("0", 32) + "-00f067aa0ba902b7-01", "", "", "trace-id"},
		{"zero parent-id", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "", "", "parent-id"},
		{"bad flags", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", "", "", "trace-flags"},
		{"short", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1", "", "", "version-traceid"},
		{"empty", "", "", "", "version-traceid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			trace, parent, err := traceparent(tt.v)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && !strings.Contains(gotErr, tt.wantErr) {
				t.Fatalf("traceparent(%q) error %v, want one containing %q", tt.v, err, tt.wantErr)
			}
			if diff := cmp.Diff([2]string{tt.trace, tt.paren}, [2]string{trace, parent}); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
		})
	}
}

// decodeCreate never panics, whatever the body and headers, and a create
// it accepts carries a payload that validates.
func FuzzDecodeCreate(f *testing.F) {
	f.Add(true, `{"specversion":"1.0","id":"1","source":"s","type":"t","data":{"category":"c","action":"a"}}`, "")
	f.Add(false, `{"category":"c","action":"a","source":"s"}`, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add(true, `{"specversion":"1.0","id":"1","source":"s","type":"t","time":"2026-01-01T00:00:00Z","x":1,"data":{"category":"c","action":"a","x":2}}`, "")
	f.Fuzz(func(t *testing.T, structured bool, body, tp string) {
		r := httptest.NewRequest("POST", "/api/events", strings.NewReader(body))
		if structured {
			r.Header.Set("Content-Type", CloudEventsJSON)
		} else {
			for k, v := range map[string]string{"ce-specversion": "1.0", "ce-id": "1", "ce-source": "s", "ce-type": "t", "ce-time": "2026-01-01T00:00:00Z"} {
				r.Header.Set(k, v)
			}
		}
		if tp != "" {
			r.Header.Set("traceparent", tp)
		}
		p, ce, ps, err := decodeCreate(r, []byte(body))
		if err != nil || len(ps) > 0 {
			return
		}
		ps = applyTraceparent(r, &p, ce.dataPrefix, true)
		if len(ps) > 0 {
			return
		}
		// An accepted CloudEvent has an id, and its source and type filled
		// the payload's.
		if ce == nil || ce.id == "" || p.Source == "" || p.Type == "" {
			t.Errorf("accepted create without a CloudEvent identity: %+v, %+v", ce, p)
		}
		if !structured && (ce.id != "1" || p.Source != "s" || p.LastSeenAt == nil) {
			t.Errorf("binary mode: id %q, source %q, lastSeenAt %v", ce.id, p.Source, p.LastSeenAt)
		}
	})
}

// CloudEvents HTTP binding 3.1.3.2: header values are unescaped "with
// respect to double-quoted strings", then "a single round of
// percent-decoding"; "decoding MUST accept lower-case values", "values that
// have been unnecessarily percent-encoded MUST be accepted, but encoded
// byte sequences which are invalid in UTF-8 MUST be rejected (For example,
// "%C0%A0" is an overlong encoding of U+0020, and MUST be rejected.)".
func TestHeaderValue(t *testing.T) {
	tests := []struct {
		name, v, want, wantRule string
	}{
		{"plain", "prod-1", "prod-1", ""},
		{"the binding's example", "Euro%20%E2%82%AC%20%F0%9F%98%80", "Euro € 😀", ""},
		{"lower-case hex", "caf%c3%a9", "café", ""},
		{"unnecessarily encoded", "%41%62c", "Abc", ""},
		{"percent", "100%25", "100%", ""},
		{"a single round", "%2541", "%41", ""},
		{"quoted-string", `"a b \"c\" \\d"`, `a b "c" \d`, ""},
		{"quoted then percent-decoded", `"a%20b"`, "a b", ""},
		{"not a whole quoted-string is as sent", `"a" "b"`, `"a" "b"`, ""},
		{"raw double-quote inside", `say "hi"!`, `say "hi"!`, ""},
		{"raw UTF-8, as sdk-go sends it", "café ü", "café ü", ""},
		{"empty", "", "", ""},
		{"not hex is a literal percent", "%zz", "%zz", ""},
		{"one hex digit is a literal percent", "a%2", "a%2", ""},
		{"trailing percent, as sdk-go sends it", "100%", "100%", ""},
		{"a literal percent beside an escape", "50% of%20it", "50% of it", ""},
		{"overlong", "%C0%A0", "", event.RuleUTF8},
		{"lone continuation byte", "%80", "", event.RuleUTF8},
		{"surrogate", "%ED%A0%80", "", event.RuleUTF8},
		{"truncated sequence", "%E2%82", "", event.RuleUTF8},
		{"raw invalid UTF-8", "\xff", "", event.RuleUTF8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, prob := headerValue(tt.v)
			rule := ""
			if prob != nil {
				rule = prob.Rule
				if !strings.Contains(prob.Message, "3.1.3.2") {
					t.Errorf("message %q does not name the rule", prob.Message)
				}
			}
			if diff := cmp.Diff([2]string{tt.want, tt.wantRule}, [2]string{got, rule}); diff != "" {
				t.Errorf("headerValue(%q) (-want +got):\n%s", tt.v, diff)
			}
		})
	}
}

// A ce-* header that does not decode is a 400 naming the header, its
// member and the binding's rule, and is not also reported missing.
func TestBinaryHeaderRefusal(t *testing.T) {
	r := httptest.NewRequest("POST", "/api/events", strings.NewReader(`{"category":"c","action":"a"}`))
	for k, v := range map[string]string{"ce-specversion": "1.0", "ce-id": "ev%FF", "ce-source": "s", "ce-type": "t", "ce-subject": "%C0%A0"} {
		r.Header.Set(k, v)
	}
	_, _, ps, err := decodeCreate(r, []byte(`{"category":"c","action":"a"}`))
	if err != nil {
		t.Fatal(err)
	}
	type short struct{ Member, Rule, Header string }
	var got []short
	for _, p := range ps {
		h, _, _ := strings.Cut(p.Message, " header")
		got = append(got, short{p.Member, p.Rule, h})
	}
	want := []short{{"/id", event.RuleUTF8, "the ce-id"}, {"/subject", event.RuleUTF8, "the ce-subject"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// CloudEvents 1.0, Attribute Naming Convention: "CloudEvents attribute names
// MUST consist of lower-case letters ('a' to 'z') or digits ('0' to '9')";
// binary mode carries data as the body. A ce-* header naming anything else
// is a 400 naming it, never stored as an extension.
func TestBinaryHeaderAttributeNames(t *testing.T) {
	tests := []struct {
		header string
		want   []string // members refused
	}{
		{"ce-region", nil},
		{"ce-Region2", nil},
		{"ce-bad_name", []string{"/bad_name"}},
		{"ce-data", []string{"/data"}},
		{"ce-data_base64", []string{"/data_base64"}},
		{"ce-", []string{"/"}},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			body := []byte(`{"category":"c","action":"a"}`)
			r := httptest.NewRequest("POST", "/api/events", bytes.NewReader(body))
			for k, v := range map[string]string{"ce-specversion": "1.0", "ce-id": "ev-1", "ce-source": "s", "ce-type": "t"} {
				r.Header.Set(k, v)
			}
			r.Header[http.CanonicalHeaderKey(tt.header)] = []string{"x"}
			_, _, ps, err := decodeCreate(r, body)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range ps {
				if p.Rule == event.RuleFormat && strings.Contains(p.Message, "Attribute Naming Convention") {
					got = append(got, p.Member)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("refused members (-want +got):\n%s", diff)
			}
		})
	}
}
