package timeline

import (
	"bytes"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// SizeEqual reports whether two sizes are the same JSON value: objects
// with the same members in any order, arrays element by element, strings
// by their unquoted text, numbers by exact decimal value (4 equals 4.0 and
// 40e-1; no float rounding). Two nil (or empty) values are equal; a value
// that is not valid JSON equals only its identical bytes.
func SizeEqual(a, b jsontext.Value) bool {
	if bytes.Equal(a, b) {
		return true
	}
	ca, err1 := Canonical(a)
	cb, err2 := Canonical(b)
	return err1 == nil && err2 == nil && bytes.Equal(ca, cb)
}

// Canonical returns one text for every JSON value that [SizeEqual] deems
// equal to v: no insignificant space, object members sorted by name (byte
// order of the unquoted name), strings
// as jsontext writes them, numbers by [CanonicalNumber]. nil or empty v
// gives "null". The error is the decoder's, for invalid JSON or a duplicate name.
func Canonical(v jsontext.Value) (jsontext.Value, error) {
	if len(bytes.TrimSpace(v)) == 0 {
		return jsontext.Value("null"), nil
	}
	dec := jsontext.NewDecoder(bytes.NewReader(v))
	var out []byte
	out, err := canonValue(dec, out)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func canonValue(dec *jsontext.Decoder, out []byte) ([]byte, error) {
	switch dec.PeekKind() {
	case '{':
		return canonObject(dec, out)
	case '[':
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		out = append(out, '[')
		for n := 0; dec.PeekKind() != ']'; n++ {
			if n > 0 {
				out = append(out, ',')
			}
			var err error
			if out, err = canonValue(dec, out); err != nil {
				return nil, err
			}
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		return append(out, ']'), nil
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case '0':
		return append(out, CanonicalNumber(tok.String())...), nil
	case '"':
		return jsontext.AppendQuote(out, tok.String())
	}
	return append(out, tok.String()...), nil
}

func canonObject(dec *jsontext.Decoder, out []byte) ([]byte, error) {
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	type member struct {
		name string
		val  []byte
	}
	var ms []member
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		name := tok.String()
		val, err := canonValue(dec, nil)
		if err != nil {
			return nil, err
		}
		ms = slices.DeleteFunc(ms, func(m member) bool { return m.name == name })
		ms = append(ms, member{name, val})
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	slices.SortFunc(ms, func(a, b member) int { return strings.Compare(a.name, b.name) })
	out = append(out, '{')
	for i, m := range ms {
		if i > 0 {
			out = append(out, ',')
		}
		var err error
		if out, err = jsontext.AppendQuote(out, m.name); err != nil {
			return nil, err
		}
		out = append(append(out, ':'), m.val...)
	}
	return append(out, '}'), nil
}

// maxPlainExponent bounds how far from the decimal point [CanonicalNumber]
// writes digits out in full before it switches to an exponent.
const maxPlainExponent = 40

// CanonicalNumber returns the one text of the decimal value of the JSON
// number literal n: no leading or trailing zeros, no exponent unless the
// value needs more than 40 zeros beside its digits (then d.ddde±x), "0"
// for every zero. n must be a valid JSON number; anything else is returned
// as it is.
func CanonicalNumber(n string) string {
	d, exp, neg, ok := Digits(n)
	if !ok {
		return n
	}
	if d == "0" {
		return "0"
	}
	var s string
	switch {
	case exp >= 0 && exp <= maxPlainExponent:
		s = d + strings.Repeat("0", exp)
	case exp < 0 && -exp < len(d):
		s = d[:len(d)+exp] + "." + d[len(d)+exp:]
	case exp < 0 && -exp-len(d) <= maxPlainExponent:
		s = "0." + strings.Repeat("0", -exp-len(d)) + d
	default:
		e := exp + len(d) - 1
		s = d[:1]
		if len(d) > 1 {
			s += "." + d[1:]
		}
		s += "e" + strconv.Itoa(e)
	}
	if neg {
		s = "-" + s
	}
	return s
}

// Digits splits the JSON number literal n into its significant digits d
// (no leading or trailing zeros; "0" for zero) and the power of ten exp, so
// that |n| = d × 10^exp, and its sign. ok is false when n is not a JSON
// number or its exponent does not fit in ±1e9.
func Digits(n string) (d string, exp int, neg bool, ok bool) {
	s := n
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	mant, e, hasExp := strings.Cut(strings.ToLower(s), "e")
	if hasExp {
		if len(e) > 10 {
			return "", 0, false, false
		}
		v, err := strconv.Atoi(e)
		if err != nil {
			return "", 0, false, false
		}
		exp = v
	}
	ip, fp, _ := strings.Cut(mant, ".")
	if ip == "" || !allDigits(ip) || !allDigits(fp) || (len(ip) > 1 && ip[0] == '0') {
		return "", 0, false, false
	}
	d = strings.TrimLeft(ip+fp, "0")
	exp -= len(fp)
	t := strings.TrimRight(d, "0")
	exp += len(d) - len(t)
	if t == "" {
		return "0", 0, false, true
	}
	return t, exp, neg, true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
