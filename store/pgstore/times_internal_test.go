package pgstore

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestUTCMicroTruncates: the store keeps every time in UTC to the
// microsecond, rounded down (PostgreSQL's precision); utcMicro and
// pgMicros must agree with Truncate for every time an event may carry,
// before 1970 and in other zones included.
func TestUTCMicroTruncates(t *testing.T) {
	zones := []*time.Location{time.UTC, time.FixedZone("", 2*3600+1800), time.FixedZone("", -11*3600)}
	times := []time.Time{
		{},
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(1970, 1, 1, 0, 0, 0, 999, time.UTC),
		time.Date(2000, 1, 1, 0, 0, 0, 1_000, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Now(), // a monotonic reading, which both must drop
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		times = append(times, time.Unix(r.Int64N(400_000_000_000)-62_135_596_800, r.Int64N(1_000_000_000)))
	}
	for _, tm := range times {
		for _, z := range zones {
			in := tm.In(z)
			want := in.UTC().Truncate(time.Microsecond)
			if got := utcMicro(in); got != want {
				t.Fatalf("utcMicro(%v) = %v, want %v", in, got, want)
			}
			if got, want := pgMicros(in), want.UnixMicro()-pgEpochMicros; got != want {
				t.Fatalf("pgMicros(%v) = %d, want %d", in, got, want)
			}
		}
	}
}
