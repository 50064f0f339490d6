package event

import (
	"errors"
	"fmt"
	"time"
)

// TimeFormatMessage is the message every route gives, after the member's
// name, for a time that [ParseTime] refuses; the refusal appends
// [ParseTime]'s reason to it.
const TimeFormatMessage = "must be an RFC 3339 date-time with Z or an offset, such as 2026-03-01T12:00:00Z"

// ErrTime is matched (errors.Is) by every error [ParseTime] returns.
var ErrTime = errors.New("event: not an RFC 3339 date-time")

// TimeError is the error [ParseTime] returns: Reason says, in a few words
// fit for a refusal's message, what in the string breaks RFC 3339 section
// 5.6 (at most 40 bytes of the input are quoted). errors.Is(err, ErrTime)
// holds.
type TimeError struct {
	Reason string
}

func (e *TimeError) Error() string { return ErrTime.Error() + ": " + e.Reason }

// Is reports whether target is [ErrTime].
func (e *TimeError) Is(target error) bool { return target == ErrTime }

// TimeMessage is the message of the refusal of a time [ParseTime] refused
// with err: [TimeFormatMessage], then the reason. Every route builds its
// [RuleFormat] problem for a time with it, after the member's name where
// its messages start with one.
func TimeMessage(err error) string {
	var te *TimeError
	if errors.As(err, &te) {
		return TimeFormatMessage + " (" + te.Reason + ")"
	}
	return TimeFormatMessage
}

// ParseTime reads s as an RFC 3339 date-time (RFC 3339 section 5.6,
// date-time = full-date "T" full-time) and returns the instant in UTC,
// with every fractional digit up to nanoseconds kept (callers that store the
// time truncate it with [Normalize]). It is the one time grammar of tally:
// the canonical event's timestamp ([Decode]), the correlated event's times,
// the CloudEvents time attribute (ce-time included) and every query bound
// read through it, so every route accepts and refuses the same strings.
//
// Exactly the ABNF of section 5.6 is accepted:
//
//   - four digits of year, two of month (01 to 12) and of day (01 to the
//     last day of that month in that year, 29 February only in a leap year);
//   - "T" or "t" (section 5.6's NOTE: the letters may be lower case);
//   - hour 00 to 23, minute 00 to 59, second 00 to 59, optionally "."
//     followed by one or more digits (digits past the ninth are dropped);
//   - "Z", "z", or a numeric offset "+hh:mm" or "-hh:mm" with hh 00 to 23 and
//     mm 00 to 59 ("-00:00" reads as UTC, section 4.3).
//
// Refused, each with a [*TimeError] naming why (matching [ErrTime]): anything
// else (a space instead of "T", no zone, a one-digit field, "+24:00",
// "+0100", surrounding white space), a leap second (second 60: Go's time,
// like the stores, has no leap seconds, so it cannot be kept as sent), and
// a time whose UTC form lies outside the years 0000 to 9999 (possible
// through an offset), which RFC 3339 cannot write back. ParseTime is safe
// for concurrent use and runs in time linear in len(s).
func ParseTime(s string) (time.Time, error) {
	fail := func(format string, a ...any) (time.Time, error) {
		return time.Time{}, &TimeError{Reason: fmt.Sprintf(format, a...)}
	}
	// full-date and the fixed part of partial-time: "YYYY-MM-DDThh:mm:ss".
	const fixed = len("2006-01-02T15:04:05")
	if len(s) < fixed {
		return fail("%q is too short for date, time and zone", clip(s))
	}
	digits := func(i, n int) (int, bool) {
		v := 0
		for j := i; j < i+n; j++ {
			c := s[j]
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, true
	}
	year, ok1 := digits(0, 4)
	month, ok2 := digits(5, 2)
	day, ok3 := digits(8, 2)
	if !ok1 || !ok2 || !ok3 || s[4] != '-' || s[7] != '-' {
		return fail("%q does not start with a full-date YYYY-MM-DD", clip(s))
	}
	if s[10] != 'T' && s[10] != 't' {
		return fail("a T must follow the date, not %q", s[10:11])
	}
	hour, ok1 := digits(11, 2)
	minute, ok2 := digits(14, 2)
	second, ok3 := digits(17, 2)
	if !ok1 || !ok2 || !ok3 || s[13] != ':' || s[16] != ':' {
		return fail("%q has no partial-time hh:mm:ss after the T", clip(s))
	}
	switch {
	case month < 1 || month > 12:
		return fail("month %02d is not 01 to 12", month)
	case day < 1 || day > daysIn(year, month):
		return fail("day %02d is not in %04d-%02d", day, year, month)
	case hour > 23:
		return fail("hour %02d is not 00 to 23", hour)
	case minute > 59:
		return fail("minute %02d is not 00 to 59", minute)
	case second == 60:
		return fail("second 60 (a leap second) cannot be kept: tally's times have no leap seconds")
	case second > 59:
		return fail("second %02d is not 00 to 59", second)
	}
	i, nsec := fixed, 0
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			if i-start < 9 {
				nsec = nsec*10 + int(s[i]-'0')
			}
		}
		if i == start {
			return fail("a fraction of a second needs at least one digit after the dot")
		}
		for n := i - start; n < 9; n++ {
			nsec *= 10
		}
	}
	offset := 0
	switch zone := s[i:]; {
	case zone == "Z" || zone == "z":
	case len(zone) == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':':
		oh, ok1 := digits(i+1, 2)
		om, ok2 := digits(i+4, 2)
		switch {
		case !ok1 || !ok2:
			return fail("offset %q must be Z or ±hh:mm", clip(zone))
		case oh > 23:
			return fail("offset hour %02d is not 00 to 23", oh)
		case om > 59:
			return fail("offset minute %02d is not 00 to 59", om)
		}
		offset = oh*3600 + om*60
		if zone[0] == '-' {
			offset = -offset
		}
	case zone == "":
		return fail("a zone is required (Z or ±hh:mm): a time without one is ambiguous")
	default:
		return fail("zone %q must be Z or ±hh:mm", clip(zone))
	}
	t := time.Date(year, time.Month(month), day, hour, minute, second, nsec, time.UTC).
		Add(-time.Duration(offset) * time.Second)
	if y := t.Year(); y < 0 || y > 9999 {
		return fail("its UTC form lies in year %d, outside the years 0000 to 9999 RFC 3339 can write", y)
	}
	return t, nil
}

// clip shortens s for an error message, so a refused megabyte string is not
// echoed whole.
func clip(s string) string {
	const n = 40
	if len(s) <= n {
		return s
	}
	for i := n; i > n-4; i-- { // stay on a UTF-8 boundary
		if s[i]&0xC0 != 0x80 {
			return s[:i] + "…"
		}
	}
	return s[:n] + "…"
}

func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
