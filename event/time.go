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
	// full-date and the fixed part of partial-time: "YYYY-MM-DDThh:mm:ss".
	const fixed = len("2006-01-02T15:04:05")
	if len(s) < fixed {
		return time.Time{}, timeError("%q is too short for date, time and zone", clip(s))
	}
	f, err := readFixed(s)
	if err != nil {
		return time.Time{}, err
	}
	if err := f.checkRanges(); err != nil {
		return time.Time{}, err
	}
	nsec, i, err := readFraction(s, fixed)
	if err != nil {
		return time.Time{}, err
	}
	offset, err := readZone(s[i:])
	if err != nil {
		return time.Time{}, err
	}
	t := time.Date(f.year, time.Month(f.month), f.day, f.hour, f.minute, f.second, nsec, time.UTC).
		Add(-time.Duration(offset) * time.Second)
	if y := t.Year(); y < 0 || y > 9999 {
		return time.Time{}, timeError("its UTC form lies in year %d, outside the years 0000 to 9999 RFC 3339 can write", y)
	}
	return t, nil
}

// timeError is the [*TimeError] of [ParseTime], its reason formatted as
// fmt.Sprintf does.
func timeError(format string, a ...any) error {
	return &TimeError{Reason: fmt.Sprintf(format, a...)}
}

// fixedFields are the fields of the fixed-width start of an RFC 3339
// date-time, "YYYY-MM-DDThh:mm:ss", as read, not yet checked for range.
type fixedFields struct {
	year, month, day, hour, minute, second int
}

// readFixed reads the fixed-width start of s, which holds at least its 19
// bytes: full-date, "T" or "t", then the hh:mm:ss of partial-time (RFC 3339
// section 5.6). It checks the digits and separators, not the ranges.
func readFixed(s string) (fixedFields, error) {
	var f fixedFields
	var ok1, ok2, ok3 bool
	f.year, ok1 = digitsAt(s, 0, 4)
	f.month, ok2 = digitsAt(s, 5, 2)
	f.day, ok3 = digitsAt(s, 8, 2)
	if !ok1 || !ok2 || !ok3 || s[4] != '-' || s[7] != '-' {
		return f, timeError("%q does not start with a full-date YYYY-MM-DD", clip(s))
	}
	// Section 5.6's NOTE: the T may be lower case.
	if s[10] != 'T' && s[10] != 't' {
		return f, timeError("a T must follow the date, not %q", s[10:11])
	}
	f.hour, ok1 = digitsAt(s, 11, 2)
	f.minute, ok2 = digitsAt(s, 14, 2)
	f.second, ok3 = digitsAt(s, 17, 2)
	if !ok1 || !ok2 || !ok3 || s[13] != ':' || s[16] != ':' {
		return f, timeError("%q has no partial-time hh:mm:ss after the T", clip(s))
	}
	return f, nil
}

// checkRanges checks each field of f against the ranges of sections 5.6 and
// 5.7, in the order they are written, and refuses a leap second (tally's
// times have none).
func (f fixedFields) checkRanges() error {
	switch {
	case f.month < 1 || f.month > 12:
		return timeError("month %02d is not 01 to 12", f.month)
	case f.day < 1 || f.day > daysIn(f.year, f.month):
		return timeError("day %02d is not in %04d-%02d", f.day, f.year, f.month)
	case f.hour > 23:
		return timeError("hour %02d is not 00 to 23", f.hour)
	case f.minute > 59:
		return timeError("minute %02d is not 00 to 59", f.minute)
	case f.second == 60:
		return timeError("second 60 (a leap second) cannot be kept: tally's times have no leap seconds")
	case f.second > 59:
		return timeError("second %02d is not 00 to 59", f.second)
	}
	return nil
}

// readFraction reads the optional time-secfrac ("." 1*DIGIT) of s at i and
// returns it in nanoseconds (digits past the ninth dropped) with the index
// just past it; without a fraction it returns 0 and i.
func readFraction(s string, i int) (nsec, next int, err error) {
	if i >= len(s) || s[i] != '.' {
		return 0, i, nil
	}
	i++
	start := i
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		if i-start < 9 {
			nsec = nsec*10 + int(s[i]-'0')
		}
	}
	if i == start {
		return 0, i, timeError("a fraction of a second needs at least one digit after the dot")
	}
	for n := i - start; n < 9; n++ {
		nsec *= 10
	}
	return nsec, i, nil
}

// readZone reads zone, the rest of the string after the time: "Z", "z" or a
// time-numoffset "+hh:mm" or "-hh:mm", and returns its offset east of UTC
// in seconds ("-00:00" is UTC, section 4.3).
func readZone(zone string) (offset int, err error) {
	switch {
	case zone == "Z" || zone == "z":
		return 0, nil
	case len(zone) == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':':
		return readNumOffset(zone)
	case zone == "":
		return 0, timeError("a zone is required (Z or ±hh:mm): a time without one is ambiguous")
	default:
		return 0, timeError("zone %q must be Z or ±hh:mm", clip(zone))
	}
}

// readNumOffset reads zone, six bytes of the shape "±hh:mm", as seconds
// east of UTC, with hh 00 to 23 and mm 00 to 59.
func readNumOffset(zone string) (offset int, err error) {
	oh, ok1 := digitsAt(zone, 1, 2)
	om, ok2 := digitsAt(zone, 4, 2)
	switch {
	case !ok1 || !ok2:
		return 0, timeError("offset %q must be Z or ±hh:mm", clip(zone))
	case oh > 23:
		return 0, timeError("offset hour %02d is not 00 to 23", oh)
	case om > 59:
		return 0, timeError("offset minute %02d is not 00 to 59", om)
	}
	offset = oh*3600 + om*60
	if zone[0] == '-' {
		offset = -offset
	}
	return offset, nil
}

// digitsAt reads the n decimal digits of s at i as a number; ok is false
// when any of them is not a digit.
func digitsAt(s string, i, n int) (v int, ok bool) {
	for j := i; j < i+n; j++ {
		c := s[j]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
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
