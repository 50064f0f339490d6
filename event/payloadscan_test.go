package event

import (
	"reflect"
	"testing"

	"github.com/go-json-experiment/json"
)

// fullPayload is PayloadEnvelope.UnmarshalJSON without its fast path.
func fullPayload(b []byte) (PayloadEnvelope, error) {
	var w wirePayload
	if err := json.Unmarshal(b, &w); err != nil {
		return PayloadEnvelope{}, err
	}
	if w.Unknown != nil {
		var err error
		if w.Unknown, err = rawUnknown(b); err != nil {
			return PayloadEnvelope{}, err
		}
	}
	return PayloadEnvelope(w), nil
}

var payloadSeeds = []string{
	`{}`, ` { } `, `{"state":"active","size":{"vcpus":4,"flavor":"f1"}}`,
	`{"state": "running", "size": {"vcpus": 4.50, "mem": [1, 2e3, -0.5E-2, true, false, null]}, "provider": {"a": {"b": [{}]}}}`,
	`{"state":null}`, `{"state":""}`, `{"state":3}`, `{"state":"a","state":"b"}`, `{"size":null}`, `{"size":"x"}`,
	`{"size":{"a":1,"a":2}}`, `{"size":{"a":{"b":1,"b":1}}}`, `{"size":{"a":1},"extra":true}`, `{"size":{"a":01}}`,
	`{"size":{"a":1.}}`, `{"size":{"a":-}}`, `{"size":{"a":1e}}`, `{"size":{"a":"\u00e9"}}`, `{"size":{"a":"é"}}`,
	`{"size":{"a":"\xff"}}`, `{"size":{"a":1}`, `{"size":{"a":1}}x`, `null`, `[]`, `{"size":[1,]}`, `{"size":{,}}`,
	`{"size":{"a":1,}}`, `{"provider":{"size_as_reported":{"vcpus":"4"}},"size":{"vcpus":4}}`, `{"state":"x",}`,
	`{"size":{"a":1}}` + "\n", `{"size":{"a":tru}}`, `{"size":{"a":1true}}`, `{"state":"a\tb"}`, `{"size":1}{}`,
	`{"sta\u0074e":"x"}`, `{"State":"x"}`, `{"size":{"a":-0.0e+0}}`,
}

func checkPayloadScan(t *testing.T, in string) {
	t.Helper()
	want, werr := fullPayload([]byte(in))
	var got PayloadEnvelope
	b := []byte(in)
	ok := scanPayload(b, &got)
	if !ok {
		return // the full decoder decides
	}
	if werr != nil {
		t.Fatalf("%q: the fast path accepts what the full decoder refuses: %v", in, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: fast %#v, full %#v", in, got, want)
	}
	for i := range b {
		b[i] = 'x' // the decoded values are copies
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: the fast path's values alias its input", in)
	}
}

func TestScanPayload(t *testing.T) {
	fast := 0
	for _, in := range payloadSeeds {
		checkPayloadScan(t, in)
		var p PayloadEnvelope
		if scanPayload([]byte(in), &p) {
			fast++
		}
	}
	if fast < 5 {
		t.Fatalf("the fast path took %d seeds", fast)
	}
	for _, in := range []string{`{"state":"active","size":{"vcpus":4,"flavor":"f1"}}`, `{"size":{"vcpus":4},"provider":{"x":[1,2]}}`, `{}`} {
		var p PayloadEnvelope
		if !scanPayload([]byte(in), &p) {
			t.Errorf("%s: not taken by the fast path", in)
		}
	}
}

// FuzzScanPayload checks that the fast path decodes exactly what the full
// decoder does, and accepts nothing it refuses.
func FuzzScanPayload(f *testing.F) {
	for _, s := range payloadSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) { checkPayloadScan(t, in) })
}
