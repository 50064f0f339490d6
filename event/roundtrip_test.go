package event_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tallyhq/tally/event"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/roundtrip")

// TestRoundTripGolden decodes each testdata/roundtrip/NAME.in.json, encodes
// the event again and compares the bytes with NAME.out.json (rewritten with
// go test ./event -run TestRoundTripGolden -update). "A member the envelope
// does not name survives a decode and an encode untouched, which keeps an
// event byte-faithful to what the provider sent." (docs/decisions.md,
// Faithfulness: payload.provider, unknown payload members and payload.size
// are read back byte for byte as sent: white space and string escapes
// inside them included.)
//
// It also checks idempotence: the golden output decodes and encodes to
// itself, byte for byte, and to an equal event.
func TestRoundTripGolden(t *testing.T) {
	ins, err := filepath.Glob(filepath.Join("testdata", "roundtrip", "*.in.json"))
	if err != nil || len(ins) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	for _, in := range ins {
		name := strings.TrimSuffix(filepath.Base(in), ".in.json")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			ev, err := event.Decode(src)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			got, err := ev.MarshalJSON()
			if err != nil {
				t.Fatalf("MarshalJSON: %v", err)
			}
			got = append(got, '\n')
			out := strings.TrimSuffix(in, ".in.json") + ".out.json"
			if *update {
				if err := os.WriteFile(out, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(out)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("decode → encode of %s (-want +got):\n%s", in, diff)
			}

			// Idempotence: the output is a fixed point.
			ev2, err := event.Decode(want)
			if err != nil {
				t.Fatalf("Decode(golden output): %v", err)
			}
			again, err := ev2.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(bytes.TrimSuffix(want, []byte("\n"))), string(again)); diff != "" {
				t.Errorf("encode(decode(golden output)) is not the golden output (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(ev, ev2, cmpEventJSON); diff != "" {
				t.Errorf("decode(golden output) differs from decode(input) (-first +second):\n%s", diff)
			}

			// encoding/json (v1) writes the same bytes, up to its compaction of
			// white space and its escaping of <, > and & (it does both to any
			// Marshaler's output); and reads the output back to the same event.
			v1, err := json.Marshal(ev2)
			if err != nil {
				t.Fatal(err)
			}
			var compact, esc bytes.Buffer
			if err := json.Compact(&compact, again); err != nil {
				t.Fatal(err)
			}
			json.HTMLEscape(&esc, compact.Bytes())
			if !bytes.Equal(v1, esc.Bytes()) {
				t.Errorf("json.Marshal = %s\nwant %s", v1, esc.Bytes())
			}
			var ev3 event.Event
			if err := json.Unmarshal(v1, &ev3); err != nil {
				t.Fatalf("json.Unmarshal: %v", err)
			}
			if diff := cmp.Diff(ev2, ev3, cmpEventJSON); diff != "" {
				t.Errorf("json.Unmarshal differs from Decode (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRoundTripNumbersExact states what the big_numbers golden file shows,
// so that a run with -update cannot bless float64 rounding: "Numbers keep
// their exact value everywhere in the payload: 12345678901234567890 and 0.1
// survive a round trip unchanged".
func TestRoundTripNumbersExact(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "roundtrip", "big_numbers.in.json"))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := event.Decode(src)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ev.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{
		`"size_gb":12345678901234567890`, `"iops":0.1`, `"huge":1e400`, `"tiny":-1E-400`,
		`"trailing_zero":2.50`, `"exp":1E+2`, `"neg_zero":-0`, `18446744073709551616`,
		`0.30000000000000004`, `"counter":98765432109876543210987654321`,
	} {
		if !bytes.Contains(out, []byte(n)) {
			t.Errorf("%s did not survive the round trip: %s", n, out)
		}
	}
}
