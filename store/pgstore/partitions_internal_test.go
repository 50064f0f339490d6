package pgstore

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Bounds as pg_get_expr prints them in any session TimeZone read back as
// the UTC instants they are: an offset of hours, of hours and minutes, a
// local mean time offset with seconds (New York before 1883), a BC year
// (Go's year 0 is 1 BC) and December 9999's upper bound, year 10000.
func TestParsePartition(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want Partition
	}{
		{"FOR VALUES FROM ('2026-12-01 00:00:00+00') TO ('2027-01-01 00:00:00+00')",
			Partition{Name: "p", From: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"FOR VALUES FROM ('2026-11-30 19:00:00-05') TO ('2026-12-31 19:00:00-05')",
			Partition{Name: "p", From: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"FOR VALUES FROM ('2026-12-01 05:30:00+05:30') TO ('2027-01-01 05:30:00+05:30')",
			Partition{Name: "p", From: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"FOR VALUES FROM ('0001-11-30 19:03:58-04:56:02 BC') TO ('0001-12-31 19:03:58-04:56:02 BC')",
			Partition{Name: "p", From: time.Date(0, 12, 1, 0, 0, 0, 0, time.UTC), To: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"FOR VALUES FROM ('9999-12-01 00:00:00+00') TO ('10000-01-01 00:00:00+00')",
			Partition{Name: "p", From: time.Date(9999, 12, 1, 0, 0, 0, 0, time.UTC), To: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"FOR VALUES FROM (MINVALUE) TO ('2027-01-01 00:00:00+00')",
			Partition{Name: "p", To: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), unbounded: true}},
	} {
		got, err := parsePartition("p", tc.expr)
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(Partition{})); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.expr, diff)
		}
	}
	for _, bad := range []string{"DEFAULT", "FOR VALUES IN ('a')", "FOR VALUES FROM ('soon') TO ('later')"} {
		if _, err := parsePartition("p", bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// boundLiteral writes what parseBound reads, for every month from year 0
// (1 BC) to 10000.
func TestBoundLiteralRoundTrip(t *testing.T) {
	for _, m := range []time.Time{
		time.Date(0, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		got, err := parseBound("'" + boundLiteral(m) + "'")
		if err != nil || !got.Equal(m) {
			t.Errorf("%v: literal %s reads back as %v, %v", m, boundLiteral(m), got, err)
		}
	}
}

// FuzzParsePartition: any text is parsed or refused, never a panic; a
// parsed partition is whatever the bounds say.
func FuzzParsePartition(f *testing.F) {
	f.Add("FOR VALUES FROM ('2026-12-01 00:00:00+00') TO ('2027-01-01 00:00:00+00')")
	f.Add("FOR VALUES FROM (MINVALUE) TO ('0001-12-31 19:03:58-04:56:02 BC')")
	f.Add("FOR VALUES FROM ('99999999999999999999-99-99 99:99:99+99:99:99') TO (MAXVALUE)")
	f.Fuzz(func(t *testing.T, expr string) {
		p, err := parsePartition("p", expr)
		if err != nil {
			return
		}
		_ = p // any bounds PostgreSQL could print; parsing them must not panic
	})
}
