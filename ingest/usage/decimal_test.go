package usage

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// bigSum is the math/big arithmetic alone, the oracle of the fast path:
// every term through number.times and decimal.add.
func bigSum(t *testing.T, terms []term) (*decimal, bool) {
	t.Helper()
	var d decimal
	d.promote()
	ok := true
	for _, tm := range terms {
		if tm.qty == "" {
			d.add(big.NewInt(tm.us), 6)
			continue
		}
		n, nok := parseNumber(jsontext.Value(tm.qty))
		if !nok {
			ok = false
			continue
		}
		d.add(n.times(tm.us))
	}
	return &d, ok
}

func fastSum(terms []term) (*decimal, bool) {
	var d decimal
	ok := true
	for _, tm := range terms {
		if tm.qty == "" {
			d.addInt(tm.us, 6)
			continue
		}
		n, nok := parseNumber(jsontext.Value(tm.qty))
		if !nok {
			ok = false
			continue
		}
		d.addTimes(&n, tm.us)
	}
	return &d, ok
}

type term struct {
	qty string // "": the seconds alone
	us  int64
}

func checkSums(t *testing.T, terms []term) {
	t.Helper()
	want, wok := bigSum(t, terms)
	got, gok := fastSum(terms)
	if wok != gok || got.value().Cmp(want.value()) != 0 || got.scale != want.scale {
		t.Fatalf("%v: fast %v×10^-%d, big %v×10^-%d", terms, got.value(), got.scale, want.value(), want.scale)
	}
	for _, u := range []Unit{UnitSecond, UnitHour} {
		if g, w := got.format(u), want.format(u); g != w {
			t.Fatalf("%v in %s: fast %s, big %s", terms, u, g, w)
		}
	}
}

func TestDecimalFastMatchesBig(t *testing.T) {
	day := int64(86_400_000_000)
	cases := [][]term{
		nil,
		{{"", 1}},
		{{"4", day}, {"2", 3}, {"", 5}},
		{{"0.5", day}, {"10", day}, {"1e3", 7}, {"2.25", 1}},
		{{"-3", day}, {"3", day}},
		{{"1e30", day}, {"1", 1}},
		{{"1e-30", 1}, {"7", day}},
		{{"123456789012345678", day}},
		{{"1234567890123456789", 2}},
		{{"9223372036854775807", 1}},
		{{"", math.MaxInt64}, {"", 1}},
		{{"1", math.MaxInt64}, {"1", math.MaxInt64}, {"-1", 5}},
		{{"-9223372036854775808", 1}, {"1", -1}},
		{{"0.000001", day}, {"1e18", 1}, {"1e19", 1}},
		{{"x", 3}, {"4", 2}},
		{{"0", day}, {"0e99", day}, {"-0.0", 3}},
		{{"1e100", 1}, {"1e-100", 1}},
	}
	for i, c := range cases {
		t.Run(strconv.Itoa(i), func(t *testing.T) { checkSums(t, c) })
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		checkSums(t, randomTerms(r.Uint64(), r.Uint64()))
	}
}

func randomTerms(a, b uint64) []term {
	r := rand.New(rand.NewPCG(a, b))
	var out []term
	for range r.IntN(40) {
		var q string
		switch r.IntN(6) {
		case 0:
			q = ""
		case 1:
			q = strconv.Itoa(r.IntN(256))
		case 2:
			q = fmt.Sprintf("%d.%0*d", r.IntN(100), 1+r.IntN(4), r.IntN(1000))
		case 3:
			q = fmt.Sprintf("%de%d", r.Int64()>>r.IntN(63), r.IntN(60)-30)
		case 4:
			q = fmt.Sprintf("-%d", r.Uint64()>>r.IntN(64))
		default:
			q = strconv.FormatUint(r.Uint64(), 10)
		}
		us := r.Int64() >> r.IntN(64)
		if r.IntN(8) == 0 {
			us = -us
		}
		out = append(out, term{q, us})
	}
	return out
}

// FuzzDecimalFastMatchesBig compares the fast path with math/big alone on
// random quantities and durations.
func FuzzDecimalFastMatchesBig(f *testing.F) {
	f.Add(uint64(1), uint64(2), "4", int64(86_400_000_000))
	f.Add(uint64(3), uint64(4), "1e30", int64(1))
	f.Fuzz(func(t *testing.T, a, b uint64, qty string, us int64) {
		terms := append(randomTerms(a, b), term{qty, us}, term{qty, us})
		checkSums(t, terms)
	})
}
