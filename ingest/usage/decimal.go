package usage

import (
	"math/big"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/timeline"
)

// decimal is an exact decimal number: v × 10^-scale, scale ≥ 0. The zero
// value is 0.
type decimal struct {
	v     big.Int
	scale int
}

var ten = big.NewInt(10)

func pow10(n int) *big.Int { return new(big.Int).Exp(ten, big.NewInt(int64(n)), nil) }

// add adds m × 10^-scale.
func (d *decimal) add(m *big.Int, scale int) {
	switch {
	case scale == d.scale:
		d.v.Add(&d.v, m)
	case scale < d.scale:
		t := new(big.Int).Mul(m, pow10(d.scale-scale))
		d.v.Add(&d.v, t)
	default:
		d.v.Mul(&d.v, pow10(scale-d.scale))
		d.scale = scale
		d.v.Add(&d.v, m)
	}
}

// number is a parsed size member: digits × 10^exp.
type number struct {
	digits big.Int
	exp    int
}

// parseNumber reads a size member's value as an exact number: a JSON number
// within the range the size-schema validator judges (ingest.MaxNumberDigits,
// ingest.MaxNumberExponent). ok is false for anything else.
func parseNumber(v jsontext.Value) (number, bool) {
	if v.Kind() != '0' {
		return number{}, false
	}
	s := strings.TrimSpace(string(v))
	d, exp, neg, ok := timeline.Digits(s)
	if !ok || len(d) > ingest.MaxNumberDigits || exp > ingest.MaxNumberExponent || exp < -ingest.MaxNumberExponent-ingest.MaxNumberDigits {
		return number{}, false
	}
	var n number
	n.digits.SetString(d, 10)
	if neg {
		n.digits.Neg(&n.digits)
	}
	n.exp = exp
	return n, true
}

// times returns n × us microseconds, in seconds, as (mantissa, scale).
func (n *number) times(us int64) (*big.Int, int) {
	m := new(big.Int).Mul(&n.digits, big.NewInt(us))
	scale := 6 - n.exp
	if scale < 0 {
		m.Mul(m, pow10(-scale))
		scale = 0
	}
	return m, scale
}

// hourDigits is how many more fractional digits a figure in hours has
// than the same figure in seconds: 1 µs is 2.78e-10 h.
const hourDigits = 10

// format writes d (a figure in seconds) in unit: exactly for seconds; for
// hours divided by 3600 and rounded half to even at hourDigits more
// fractional digits than d has. Trailing zeros are dropped.
func (d *decimal) format(u Unit) string {
	v, scale := new(big.Int).Set(&d.v), d.scale
	if u == UnitHour {
		v.Mul(v, pow10(hourDigits))
		scale += hourDigits
		q, r := new(big.Int).QuoRem(v, big.NewInt(3600), new(big.Int))
		r.Abs(r).Mul(r, big.NewInt(2))
		if c := r.Cmp(big.NewInt(3600)); c > 0 || c == 0 && q.Bit(0) == 1 {
			if v.Sign() < 0 {
				q.Sub(q, big.NewInt(1))
			} else {
				q.Add(q, big.NewInt(1))
			}
		}
		v = q
	}
	return plain(v, scale)
}

// plain writes v × 10^-scale without exponent and trailing zeros.
func plain(v *big.Int, scale int) string {
	neg := v.Sign() < 0
	s := new(big.Int).Abs(v).String()
	if scale > 0 {
		if len(s) <= scale {
			s = strings.Repeat("0", scale-len(s)+1) + s
		}
		s = s[:len(s)-scale] + "." + s[len(s)-scale:]
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if neg && s != "0" {
		s = "-" + s
	}
	return s
}
