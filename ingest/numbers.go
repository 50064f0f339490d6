package ingest

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/big"

	"github.com/go-json-experiment/json/jsontext"
)

// The range of numbers the size-schema validator judges: at most
// MaxNumberDigits digits before the exponent (leading zeros included) and
// an exponent from -MaxNumberExponent to MaxNumberExponent. A size with a
// number outside it is refused "size_schema: <pointer>: numberRange: …", a
// size schema with one by [Service.PutResourceType]; numbers elsewhere in
// an event are never judged (docs/decisions.md, Numbers the validator
// cannot judge).
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

// countKeywords are the JSON Schema keywords whose value is a count (a
// non-negative integer). The validator reads each as a Go int, keeping only
// the low bits of a larger value ("maxLength": 1e300 would be enforced as
// 0, "maxItems": 18446744073709551617 as 1), so a size schema whose count
// exceeds [math.MaxInt] is refused naming the keyword, as a bound that
// cannot be enforced.
var countKeywords = map[string]bool{
	"minLength": true, "maxLength": true,
	"minItems": true, "maxItems": true,
	"minProperties": true, "maxProperties": true,
	"minContains": true, "maxContains": true,
}

var msgCountRange = fmt.Sprintf("must be a count of at most %d", math.MaxInt)

// countsOutOfRange walks the JSON value v (whose numbers are all in the
// range numberInRange accepts, so each is cheap to read exactly) and
// returns the JSON Pointer of the first number given to a count keyword
// that is larger than math.MaxInt, and how many there are in all. A member
// of that name inside data (const, enum, default) is judged too: a count
// that large is never meant. v must be valid JSON.
func countsOutOfRange(v jsontext.Value) (ptr string, total int, err error) {
	dec := jsontext.NewDecoder(bytes.NewReader(v), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	maxInt := new(big.Rat).SetInt64(math.MaxInt)
	for {
		switch dec.PeekKind() {
		case 0:
			if _, err := dec.ReadToken(); err != io.EOF {
				return "", 0, err
			}
			return ptr, total, nil
		case '0':
			raw, err := dec.ReadValue()
			if err != nil {
				return "", 0, err
			}
			p := dec.StackPointer()
			if !countKeywords[p.LastToken()] {
				continue
			}
			if n, ok := new(big.Rat).SetString(string(raw)); ok && n.Cmp(maxInt) > 0 {
				total++
				if ptr == "" {
					ptr = string(p)
				}
			}
		default:
			if _, err := dec.ReadToken(); err != nil {
				return "", 0, err
			}
		}
	}
}
