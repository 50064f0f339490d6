package oslo

import (
	"math/big"
	"testing"
)

func TestExactDecimal(t *testing.T) {
	tests := []struct {
		num, den string // r = num/den
		shift    uint   // then divided by 2^shift
		want     string
		ok       bool
	}{
		{"512", "1", 10, "0.5", true},
		{"2048", "1", 10, "2", true},
		{"256", "1", 10, "0.25", true},
		{"4979632", "1", 30, "0.00463764369487762451171875", true},
		{"1", "1", 30, "0.000000000931322574615478515625", true},
		{"0", "1", 30, "0", true},
		{"-3", "1", 1, "-1.5", true},
		{"15", "10", 0, "1.5", true},
		{"1", "3", 0, "", false},
	}
	for _, tt := range tests {
		r, _ := new(big.Rat).SetString(tt.num + "/" + tt.den)
		got, ok := exactDecimal(divPow2(r, tt.shift))
		if got != tt.want || ok != tt.ok {
			t.Errorf("exactDecimal(%s/%s/2^%d) = %q, %v; want %q, %v", tt.num, tt.den, tt.shift, got, ok, tt.want, tt.ok)
		}
		if ok {
			back, _ := new(big.Rat).SetString(got)
			if back.Cmp(divPow2(r, tt.shift)) != 0 {
				t.Errorf("%q is not exactly %s/%s/2^%d", got, tt.num, tt.den, tt.shift)
			}
		}
	}
}
