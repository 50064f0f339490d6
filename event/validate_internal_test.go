package event

import (
	"math/rand/v2"
	"regexp"
	"testing"
)

// validEventType agrees with EventTypePattern on hand-picked strings and on
// random strings over the bytes that matter.
func TestValidEventType(t *testing.T) {
	re := regexp.MustCompile(EventTypePattern)
	cases := []string{
		"", ".", "..", "a", "a.", ".a", "a.b", "a..b", "a.b.", "a.b.c", "a_b.c_9", "compute.instance.create.end",
		"A.b", "a.B", "a-b.c", "a.b\n", "\na.b", "a.b ", "a. b", "é.b", "a.b\x00", "_._", "0.0", "a.b.c.d.e.f",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "ab_0.Z-\n\xc3\xa9"
	for range 20000 {
		b := make([]byte, rng.IntN(8))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		if got, want := validEventType(s), re.MatchString(s); got != want {
			t.Errorf("validEventType(%q) = %v, the pattern says %v", s, got, want)
		}
	}
}
