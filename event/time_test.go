package event_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
)

func TestParseTime(t *testing.T) {
	utc := func(y int, mo time.Month, d, h, mi, s, ns int) time.Time {
		return time.Date(y, mo, d, h, mi, s, ns, time.UTC)
	}
	tests := []struct {
		in     string
		want   time.Time
		reason string // "" when accepted
	}{
		{in: "2026-03-01T12:00:00Z", want: utc(2026, 3, 1, 12, 0, 0, 0)},
		{in: "2026-03-01t12:00:00z", want: utc(2026, 3, 1, 12, 0, 0, 0)},
		{in: "2026-03-01T12:00:00.5Z", want: utc(2026, 3, 1, 12, 0, 0, 500000000)},
		{in: "2026-03-01T12:00:00.1234567891234Z", want: utc(2026, 3, 1, 12, 0, 0, 123456789)},
		{in: "2026-03-01T14:30:00+02:30", want: utc(2026, 3, 1, 12, 0, 0, 0)},
		{in: "2026-03-01T00:00:00-23:59", want: utc(2026, 3, 1, 23, 59, 0, 0)},
		{in: "2026-03-01T12:00:00-00:00", want: utc(2026, 3, 1, 12, 0, 0, 0)},
		{in: "2024-02-29T00:00:00Z", want: utc(2024, 2, 29, 0, 0, 0, 0)},
		{in: "2000-02-29T00:00:00Z", want: utc(2000, 2, 29, 0, 0, 0, 0)},
		{in: "0000-01-01T00:00:00Z", want: utc(0, 1, 1, 0, 0, 0, 0)},
		{in: "9999-12-31T23:59:59.999999999Z", want: utc(9999, 12, 31, 23, 59, 59, 999999999)},

		{in: "2026-03-01T12:00:00+24:00", reason: "offset hour 24 is not 00 to 23"},
		{in: "2026-03-01T12:00:00+01:60", reason: "offset minute 60 is not 00 to 59"},
		{in: "2026-03-01T12:00:00+0100", reason: `zone "+0100" must be Z or ±hh:mm`},
		{in: "2026-03-01T12:00:00+01", reason: `zone "+01" must be Z or ±hh:mm`},
		{in: "2026-03-01T12:00:00", reason: "a zone is required (Z or ±hh:mm): a time without one is ambiguous"},
		{in: "2026-03-01T12:00:00UTC", reason: `zone "UTC" must be Z or ±hh:mm`},
		{in: "2026-03-01T12:00:00Z ", reason: `zone "Z " must be Z or ±hh:mm`},
		{in: " 2026-03-01T12:00:00Z", reason: `" 2026-03-01T12:00:00Z" does not start with a full-date YYYY-MM-DD`},
		{in: "2026-03-01 12:00:00Z", reason: `a T must follow the date, not " "`},
		{in: "2026-3-01T12:00:00Z", reason: `"2026-3-01T12:00:00Z" does not start with a full-date YYYY-MM-DD`},
		{in: "2026-03-01T1:00:00Z", reason: `"2026-03-01T1:00:00Z" has no partial-time hh:mm:ss after the T`},
		{in: "2026-03-01T12:00Z", reason: `"2026-03-01T12:00Z" is too short for date, time and zone`},
		{in: "2026-03-01T12:00:00.Z", reason: "a fraction of a second needs at least one digit after the dot"},
		{in: "2026-03-01T12:00:00,5Z", reason: `zone ",5Z" must be Z or ±hh:mm`},
		{in: "2026-13-01T12:00:00Z", reason: "month 13 is not 01 to 12"},
		{in: "2026-00-01T12:00:00Z", reason: "month 00 is not 01 to 12"},
		{in: "2026-02-29T12:00:00Z", reason: "day 29 is not in 2026-02"},
		{in: "1900-02-29T12:00:00Z", reason: "day 29 is not in 1900-02"},
		{in: "2026-04-31T12:00:00Z", reason: "day 31 is not in 2026-04"},
		{in: "2026-03-00T12:00:00Z", reason: "day 00 is not in 2026-03"},
		{in: "2026-03-01T24:00:00Z", reason: "hour 24 is not 00 to 23"},
		{in: "2026-03-01T12:60:00Z", reason: "minute 60 is not 00 to 59"},
		{in: "2016-12-31T23:59:60Z", reason: "second 60 (a leap second) cannot be kept: tally's times have no leap seconds"},
		{in: "2026-03-01T12:00:61Z", reason: "second 61 is not 00 to 59"},
		{in: "+2026-03-01T12:00:00Z", reason: `"+2026-03-01T12:00:00Z" does not start with a full-date YYYY-MM-DD`},
		{in: "9999-12-31T23:59:59-01:00", reason: "its UTC form lies in year 10000, outside the years 0000 to 9999 RFC 3339 can write"},
		{in: "", reason: `"" is too short for date, time and zone`},
		{in: "2026-03-01T12:00:00+0a:00", reason: `offset "+0a:00" must be Z or ±hh:mm`},
		{in: "2026-03-01T12:00:00-01:0x", reason: `offset "-01:0x" must be Z or ±hh:mm`},
		{in: "0000-01-01T00:00:00+00:01", reason: "its UTC form lies in year -1, outside the years 0000 to 9999 RFC 3339 can write"},
		{in: "0000-01-01T00:00:00.5+00:00", want: utc(0, 1, 1, 0, 0, 0, 500000000)},
		// Which rule a string breaks first: the date's syntax, the T, the
		// time's syntax, then the fields' ranges in order, the fraction, the
		// zone, and the UTC year last.
		{in: "2026-13-01 12:00:00Z", reason: `a T must follow the date, not " "`},
		{in: "2026-13-01T1x:00:00Z", reason: `"2026-13-01T1x:00:00Z" has no partial-time hh:mm:ss after the T`},
		{in: "2026-13-32T25:61:61Z", reason: "month 13 is not 01 to 12"},
		{in: "2026-02-30T25:61:61Z", reason: "day 30 is not in 2026-02"},
		{in: "2026-03-01T25:61:61Z", reason: "hour 25 is not 00 to 23"},
		{in: "2026-03-01T23:61:61Z", reason: "minute 61 is not 00 to 59"},
		{in: "2026-03-01T23:59:60.Z", reason: "second 60 (a leap second) cannot be kept: tally's times have no leap seconds"},
		{in: "2026-03-01T23:59:59.+25:00", reason: "a fraction of a second needs at least one digit after the dot"},
		{in: "9999-12-31T23:59:59.5+24:00", reason: "offset hour 24 is not 00 to 23"},
		{in: "2026-03-01T12:00:00+99:99", reason: "offset hour 99 is not 00 to 23"},
		{in: "2026-03-01T12:00:00Z" + string(make([]byte, 60)), reason: `zone "Z\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00…" must be Z or ±hh:mm`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := event.ParseTime(tt.in)
			var reason string
			if err != nil {
				var te *event.TimeError
				if !errors.As(err, &te) || !errors.Is(err, event.ErrTime) {
					t.Fatalf("ParseTime(%q) error %v is not a *TimeError matching ErrTime", tt.in, err)
				}
				reason = te.Reason
			}
			if diff := cmp.Diff(tt.reason, reason); diff != "" {
				t.Errorf("ParseTime(%q) reason (-want +got):\n%s", tt.in, diff)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseTime(%q) (-want +got):\n%s", tt.in, diff)
			}
			if err == nil && got.Location() != time.UTC {
				t.Errorf("ParseTime(%q) location = %v, want UTC", tt.in, got.Location())
			}
		})
	}
}

// FuzzParseTime checks ParseTime against the standard library: whatever it
// accepts, time.Parse(time.RFC3339Nano) reads as the same instant (after
// upper-casing t and z, which time.Parse does not know).
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"2026-03-01T12:00:00Z", "2026-03-01t12:00:00.123+05:30", "0000-01-01T00:00:00Z", "2026-03-01T12:00:00+24:00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := event.ParseTime(s)
		if err != nil {
			return
		}
		b := []byte(s)
		if b[10] == 't' {
			b[10] = 'T'
		}
		if b[len(b)-1] == 'z' {
			b[len(b)-1] = 'Z'
		}
		want, perr := time.Parse(time.RFC3339Nano, string(b))
		if perr != nil {
			t.Fatalf("ParseTime(%q) = %v, but time.Parse refuses it: %v", s, got, perr)
		}
		if !want.Equal(got) {
			t.Fatalf("ParseTime(%q) = %v, time.Parse = %v", s, got, want)
		}
	})
}
