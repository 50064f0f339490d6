package correlatehttp

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
