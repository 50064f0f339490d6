package correlate_test

import (
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/event"
)

// FuzzDecodePayload checks that DecodePayload never panics, refuses only
// with a *ValidationError, and that what it accepts encodes back to JSON
// that decodes to an equal payload.
func FuzzDecodePayload(f *testing.F) {
	for _, s := range []string{
		`{"category":"c","action":"a"}`,
		`{"category":"c","action":"a","correlationKey":"k","occurrenceCount":3,"resolvedAt":"2026-03-01T12:00:00+02:00"}`,
		`{"category":"c","action":"a","metadata":{"a":[1,2.5e3,null]},"x":{"y":"\u0000"},"description":"é"}`,
		`{"category":"c","action":"a","category":"d"}`,
		`{"category":"c","action":"a","occurrenceCount":1.0,"traceId":"4bf92f3577b34da6a3ce929d0e0e4736"}`,
		`[]`, `{`, `null`,
		`{"category":"c","action":"a","source":"http://[::1]:80/x?y#z"}`,
		`{"category":"c","action":"a","source":"http://[bad"}`,
		`{"category":"分","action":"a","description":"é","correlationKey":"😀"}`,
		`{"category":"c","action":"a","correlationKey":"k","firstSeenAt":"2026-03-01T12:00:00Z","lastSeenAt":"2026-03-01T11:00:00+01:00","resolvedAt":"2026-03-01T11:00:00Z"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := correlate.DecodePayload(data)
		if err != nil {
			var ve *event.ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("DecodePayload error %v is not a *ValidationError with problems", err)
			}
			for _, p := range ve.Problems {
				if p.Rule == "" || p.Message == "" || !utf8.ValidString(p.Member) {
					t.Fatalf("problem %+v lacks a rule or message, or its member is not text", p)
				}
			}
			return
		}
		b, err := p.MarshalJSON() // json.Marshal would compact metadata and extra values
		if err != nil {
			t.Fatalf("encode %+v: %v", p, err)
		}
		again, err := correlate.DecodePayload(b)
		if err != nil {
			t.Fatalf("decode of the re-encoded %s: %v", b, err)
		}
		if diff := cmp.Diff(p, again); diff != "" {
			t.Fatalf("round trip of %q via %s (-first +second):\n%s", data, b, diff)
		}
	})
}
