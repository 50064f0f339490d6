package ingest

import (
	"bytes"
	"fmt"
	"io"

	"github.com/go-json-experiment/json/jsontext"
)

// The range of numbers the size-schema validator judges (DECISIONS.md,
// Numbers the validator cannot judge). The validator compares exact
// rationals, whose cost grows with the digits and the exponent of a number
// literal, and which math/big cannot build at all for an exponent such as
// 1e1000001 (santhosh-tekuri/jsonschema issues #77 and #248). So every number
// in payload.size, and every number in a size schema, must be written with
//
//   - at most [MaxNumberDigits] digits before its exponent (integer and
//     fraction digits together, leading zeros included), and
//   - an exponent, when it has one, from -[MaxNumberExponent] to
//     [MaxNumberExponent].
//
// Every such number is 0 or has a magnitude between 10^-(MaxNumberDigits+
// MaxNumberExponent) and 10^(MaxNumberDigits+MaxNumberExponent); sizes in
// practice (vcpus, ram_mb, disk_gb) are far inside it. A size with a number
// outside the range is refused "size_schema: <pointer>: numberRange: …", a
// size schema with one is refused by [Service.PutResourceType] naming the
// keyword; numbers elsewhere in an event (payload.provider, say) are kept
// exactly as sent and never judged.
const (
	MaxNumberDigits   = 100
	MaxNumberExponent = 400
)

var msgNumberRange = fmt.Sprintf("must be a number of at most %d digits with an exponent from -%d to %d", MaxNumberDigits, MaxNumberExponent, MaxNumberExponent)

// numberInRange reports whether the JSON number literal n lies in the range
// the validator judges. n is a syntactically valid JSON number.
func numberInRange(n []byte) bool {
	if len(n) > 0 && n[0] == '-' {
		n = n[1:]
	}
	digits := 0
	i := 0
	for ; i < len(n) && n[i] != 'e' && n[i] != 'E'; i++ {
		if n[i] != '.' {
			digits++
		}
	}
	if digits > MaxNumberDigits {
		return false
	}
	if i == len(n) {
		return true
	}
	exp := n[i+1:]
	if len(exp) > 0 && (exp[0] == '+' || exp[0] == '-') {
		exp = exp[1:]
	}
	exp = bytes.TrimLeft(exp, "0")
	if len(exp) > 4 {
		return false
	}
	v := 0
	for _, c := range exp {
		v = v*10 + int(c-'0')
	}
	return v <= MaxNumberExponent
}

// numbersOutOfRange walks the JSON value v and returns the JSON Pointer
// (relative to v) of every number outside the range, at most limit of
// them, and how many there are in all. It reads v in one pass, so its cost
// is linear in len(v). v must be valid JSON.
func numbersOutOfRange(v jsontext.Value, limit int) (ptrs []string, total int, err error) {
	dec := jsontext.NewDecoder(bytes.NewReader(v), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	for {
		switch dec.PeekKind() {
		case 0:
			if _, err := dec.ReadToken(); err != io.EOF {
				return nil, 0, err
			}
			return ptrs, total, nil
		case '0':
			raw, err := dec.ReadValue()
			if err != nil {
				return nil, 0, err
			}
			if !numberInRange(raw) {
				total++
				if len(ptrs) < limit {
					ptrs = append(ptrs, string(dec.StackPointer()))
				}
			}
		default:
			if _, err := dec.ReadToken(); err != nil {
				return nil, 0, err
			}
		}
	}
}
