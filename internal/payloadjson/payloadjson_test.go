package payloadjson_test

import (
	"bytes"
	"testing"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/internal/payloadjson"
)

// payloads are envelopes as collectors send them: each member present or
// absent, a null state, unknown members before and after the named ones,
// whitespace inside raw values, text beyond ASCII.
var payloads = []string{
	`{}`,
	`{"state":"active"}`,
	`{"state":null}`,
	`{"state":""}`,
	`{"state":"active","size":{"vcpus":2,"ram_mb":4096,"flavor":"m1.small"}}`,
	`{"size":{"gb":100},"provider":{"nova":{"host":"h1","tags":["a","b"]}}}`,
	`{"x-trace":"t1","state":"shutoff","size":{ "vcpus" : 4 },"extra":[1,2,{"y":null}]}`,
	`{"state":"éñ☃","size":{"name":"\u00e9"},"provider":"raw string","z":true}`,
	`{"provider":null,"size":null}`,
	`{"unknown":{}}`,
}

// TestAppendIsMarshalJSON: the unchecked writer a store uses for payloads
// the pipeline decoded writes exactly what PayloadEnvelope.MarshalJSON
// does, byte for byte (the encoder's faithfulness rules).
func TestAppendIsMarshalJSON(t *testing.T) {
	for _, raw := range payloads {
		checkSame(t, []byte(raw))
	}
}

// FuzzAppendIsMarshalJSON: for any payload the decoder accepts, Append
// after a prefix equals MarshalJSON.
func FuzzAppendIsMarshalJSON(f *testing.F) {
	for _, raw := range payloads {
		f.Add([]byte(raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkSame(t, raw)
	})
}

func checkSame(t *testing.T, raw []byte) {
	t.Helper()
	var p event.PayloadEnvelope
	if err := p.UnmarshalJSON(raw); err != nil {
		return // not a payload the pipeline would hold
	}
	want, err := p.MarshalJSON()
	if err != nil {
		t.Fatalf("MarshalJSON of %s: %v", raw, err)
	}
	prefix := []byte("PGCOPY")
	got, err := payloadjson.Append(bytes.Clone(prefix), p.State, p.Size, p.Provider, p.Unknown)
	if err != nil {
		t.Fatalf("Append of %s: %v", raw, err)
	}
	if !bytes.Equal(got, append(prefix, want...)) {
		t.Errorf("payload %s:\nAppend      %s\nMarshalJSON %s", raw, got[len(prefix):], want)
	}
}

// BenchmarkAppend compares the checked encoding (MarshalJSON: each raw
// member parsed again) with Append alone, on a collector's payload.
func BenchmarkAppend(b *testing.B) {
	var p event.PayloadEnvelope
	if err := p.UnmarshalJSON([]byte(`{"state":"active","size":{"vcpus":2,"ram_mb":4096,"disk_gb":20,"flavor":"m1.small"},"provider":{"nova":{"host":"compute-17","az":"nova"}}}`)); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, 512)
	b.Run("MarshalJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out, _ := p.MarshalJSON()
			buf = append(buf[:0], out...)
		}
	})
	b.Run("Append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = payloadjson.Append(buf[:0], p.State, p.Size, p.Provider, p.Unknown)
		}
	})
}
