package main

import (
	"strings"
	"testing"
	"time"
)

// parseDays takes Go durations and whole days, and nothing negative.
func TestParseDays(t *testing.T) {
	for in, want := range map[string]time.Duration{"0": 0, "365d": 365 * 24 * time.Hour, "720h": 720 * time.Hour, "1h30m": 90 * time.Minute, "0d": 0} {
		if got, err := parseDays(in); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "d", "1.5d", "-1d", "-1h", "5x", "99999999999d", "1000y"} {
		if _, err := parseDays(in); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
	// "huge (1000y)": a value past what a duration holds says so, instead
	// of calling 365000d "not a number of days".
	for _, in := range []string{"365000d", "99999999999999999999d"} {
		if _, err := parseDays(in); err == nil || !strings.Contains(err.Error(), "more than 106751d") {
			t.Errorf("%q: %v; want an error naming the bound 106751d", in, err)
		}
	}
}

// FuzzParseDays: any text is a non-negative duration or an error, never a
// panic.
func FuzzParseDays(f *testing.F) {
	for _, s := range []string{"365d", "720h", "-1d", "9223372036854775807d", "1e9h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseDays(s)
		if err == nil && d < 0 {
			t.Errorf("%q: %v is negative", s, d)
		}
	})
}
