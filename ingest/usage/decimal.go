package usage

import (
	"math"
	"math/big"
	"math/bits"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/timeline"
)

// decimal is an exact decimal number: v × 10^-scale, scale ≥ 0. The zero
// value is 0. While v fits in an int64 it is held in small (the fast
// path: no allocation, no math/big); the first sum that would overflow
// moves it to big for good. Either way the value and the scale are those
// the math/big arithmetic alone gives (TestDecimalFastMatchesBig).
type decimal struct {
	small int64
	v     big.Int // the value once isBig
	isBig bool
	scale int
}

var ten = big.NewInt(10)

func pow10(n int) *big.Int { return new(big.Int).Exp(ten, big.NewInt(int64(n)), nil) }

// pow10s are the powers of ten that fit in an int64.
var pow10s = [...]int64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18}

// mul64 is a × b, ok false when it does not fit in an int64.
func mul64(a, b int64) (int64, bool) {
	ua, ub := uint64(a), uint64(b)
	if a < 0 {
		ua = -ua
	}
	if b < 0 {
		ub = -ub
	}
	hi, lo := bits.Mul64(ua, ub)
	if hi != 0 || lo > math.MaxInt64 {
		return 0, false
	}
	if (a < 0) != (b < 0) {
		return -int64(lo), true
	}
	return int64(lo), true
}

// add64 is a + b, ok false when it does not fit in an int64.
func add64(a, b int64) (int64, bool) {
	s := a + b
	if a > 0 && b > 0 && s < 0 || a < 0 && b < 0 && s >= 0 {
		return 0, false
	}
	return s, true
}

// mulPow10 is m × 10^n, ok false when it does not fit in an int64.
func mulPow10(m int64, n int) (int64, bool) {
	if m == 0 {
		return 0, true
	}
	if n < 0 || n >= len(pow10s) {
		return 0, false
	}
	return mul64(m, pow10s[n])
}

// promote moves d's value to big.
func (d *decimal) promote() {
	if !d.isBig {
		d.v.SetInt64(d.small)
		d.small, d.isBig = 0, true
	}
}

// value returns d's value as a new big.Int.
func (d *decimal) value() *big.Int {
	if d.isBig {
		return new(big.Int).Set(&d.v)
	}
	return big.NewInt(d.small)
}

// addInt adds m × 10^-scale, without math/big while the sum fits.
func (d *decimal) addInt(m int64, scale int) {
	if !d.isBig {
		switch {
		case scale == d.scale:
			if s, ok := add64(d.small, m); ok {
				d.small = s
				return
			}
		case scale < d.scale:
			if t, ok := mulPow10(m, d.scale-scale); ok {
				if s, ok := add64(d.small, t); ok {
					d.small = s
					return
				}
			}
		default:
			if t, ok := mulPow10(d.small, scale-d.scale); ok {
				if s, ok := add64(t, m); ok {
					d.small, d.scale = s, scale
					return
				}
			}
		}
	}
	d.add(big.NewInt(m), scale)
}

// add adds m × 10^-scale with math/big.
func (d *decimal) add(m *big.Int, scale int) {
	d.promote()
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

// number is a parsed size member: digits × 10^exp. While the digits fit
// in an int64 they are held in small (fits true) and digits is unset.
type number struct {
	small  int64
	fits   bool
	digits big.Int
	exp    int
}

// maxSmallDigits is how many decimal digits always fit in an int64.
const maxSmallDigits = 18

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
	n.exp = exp
	if len(d) <= maxSmallDigits {
		if u, err := strconv.ParseInt(d, 10, 64); err == nil {
			if neg {
				u = -u
			}
			n.small, n.fits = u, true
			return n, true
		}
	}
	n.digits.SetString(d, 10)
	if neg {
		n.digits.Neg(&n.digits)
	}
	return n, true
}

// bigDigits returns n's digits as a big.Int (not to be changed).
func (n *number) bigDigits() *big.Int {
	if n.fits {
		return big.NewInt(n.small)
	}
	return &n.digits
}

// addTimes adds n × us microseconds, in seconds, to d: without math/big
// while the product and the sum fit in an int64.
func (d *decimal) addTimes(n *number, us int64) {
	if n.fits && !d.isBig {
		if m, ok := mul64(n.small, us); ok {
			scale := 6 - n.exp
			if scale < 0 {
				m, ok = mulPow10(m, -scale)
				scale = 0
			}
			if ok {
				d.addInt(m, scale)
				return
			}
		}
	}
	d.add(n.times(us))
}

// times returns n × us microseconds, in seconds, as (mantissa, scale),
// with math/big.
func (n *number) times(us int64) (*big.Int, int) {
	m := new(big.Int).Mul(n.bigDigits(), big.NewInt(us))
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
	v, scale := d.value(), d.scale
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
