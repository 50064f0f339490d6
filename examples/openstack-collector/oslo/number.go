package oslo

import (
	"math/big"
	"strings"
)

// exactDecimal writes r as a JSON number with no rounding: an integer when
// r is one, else the shortest decimal fraction equal to r. It reports false
// when r has no finite decimal expansion (its denominator has a prime
// factor other than 2 and 5); the quotients the mapping computes (MiB/1024,
// bytes/2^30, sums of such) always have one.
func exactDecimal(r *big.Rat) (string, bool) {
	if r.IsInt() {
		return r.Num().String(), true
	}
	d := new(big.Int).Set(r.Denom())
	two, five := big.NewInt(2), big.NewInt(5)
	var twos, fives int
	m := new(big.Int)
	for {
		if _, rem := new(big.Int).QuoRem(d, two, m); rem.Sign() != 0 {
			break
		}
		d.Quo(d, two)
		twos++
	}
	for {
		if _, rem := new(big.Int).QuoRem(d, five, m); rem.Sign() != 0 {
			break
		}
		d.Quo(d, five)
		fives++
	}
	if d.Cmp(big.NewInt(1)) != 0 {
		return "", false
	}
	s := r.FloatString(max(twos, fives)) // exact at this many digits
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, "."), true
}

// divPow2 returns r / 2^k.
func divPow2(r *big.Rat, k uint) *big.Rat {
	den := new(big.Int).Lsh(big.NewInt(1), k)
	return new(big.Rat).Quo(r, new(big.Rat).SetInt(den))
}
