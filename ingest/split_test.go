package ingest_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/store/storetest"
)

func TestSplitBatch(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    []string
		wantErr error
	}{
		{"one object", ` {"a":1} ` + "\n", []string{`{"a":1}`}, nil},
		{"one object not valid JSON stays one item", `{"a":`, []string{`{"a":`}, nil},
		{"one object with a raw NUL", "{\"a\":\"\x00\"}", []string{"{\"a\":\"\x00\"}"}, nil},
		{"array keeps exact bytes", `[ {"b" : 1.50} ,{"a":1,"a":2}, 42, "s", null, [1] ]`, []string{`{"b" : 1.50}`, `{"a":1,"a":2}`, `42`, `"s"`, `null`, `[1]`}, nil},
		{"array keeps invalid UTF-8", "[{\"a\":\"\xff\"}]", []string{"{\"a\":\"\xff\"}"}, nil},
		{"empty array", `[]`, []string{}, nil},
		{"empty body", ``, nil, ingest.ErrNotJSON},
		{"spaces only", "  \n", nil, ingest.ErrNotJSON},
		{"a number", `42`, nil, ingest.ErrNotJSON},
		{"a string", `"x"`, nil, ingest.ErrNotJSON},
		{"garbage", `hello`, nil, ingest.ErrNotJSON},
		{"broken array", `[{"a":1},`, nil, ingest.ErrNotJSON},
		{"unclosed element", `[{"a":1]`, nil, ingest.ErrNotJSON},
		{"data after the array", `[] x`, nil, ingest.ErrNotJSON},
		{"two arrays", `[][]`, nil, ingest.ErrNotJSON},
		{"raw NUL inside an array is an item", "[{\"a\":\"\x00\"}]", []string{"{\"a\":\"\x00\"}"}, nil},
		{"element deeper than the decoder's limit is an item", `[{"a":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `},{}]`, []string{`{"a":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`, `{}`}, nil},
		{"broken syntax inside balanced brackets is an item", `[{"a":1,}, {"a" 1}, tru, {}]`, []string{`{"a":1,}`, `{"a" 1}`, `tru`, `{}`}, nil},
		{"brackets and quotes inside strings do not count", `[{"a":"]}[{\"\\"},"]"]`, []string{`{"a":"]}[{\"\\"}`, `"]"`}, nil},
		{"mismatched brackets", `[{"a":[1}]}]`, nil, ingest.ErrNotJSON},
		{"trailing comma", `[{},]`, nil, ingest.ErrNotJSON},
		{"leading comma", `[,{}]`, nil, ingest.ErrNotJSON},
		{"missing comma", `[{} {}]`, nil, ingest.ErrNotJSON},
		{"scalars without comma", `[1 2]`, nil, ingest.ErrNotJSON},
		{"unclosed string", `["abc]`, nil, ingest.ErrNotJSON},
		{"array nested 100,000 deep is one item", strings.Repeat("[", 100000) + strings.Repeat("]", 100000), []string{strings.Repeat("[", 99999) + strings.Repeat("]", 99999)}, nil},
		{"array nested 100,000 deep, unclosed", strings.Repeat("[", 100000), nil, ingest.ErrNotJSON},
		{"1000 items", "[" + strings.Repeat("{},", 999) + "{}]", repeat("{}", 1000), nil},
		{"1001 items", "[" + strings.Repeat("{},", 1000) + "{}]", nil, ingest.ErrBatchTooLarge},
		{"1001 items then garbage is still too large", "[" + strings.Repeat("{},", 1000) + "{} garbage", nil, ingest.ErrBatchTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ingest.SplitBatch([]byte(tt.body))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr != nil {
				return
			}
			gotS := []string{}
			for _, it := range got {
				gotS = append(gotS, string(it))
			}
			if diff := cmp.Diff(tt.want, gotS); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// The 1001st element is refused before the rest of the body is looked at.
func TestSplitBatchStopsReading(t *testing.T) {
	body := "[" + strings.Repeat("{},", 1001) + "not JSON at all"
	if _, err := ingest.SplitBatch([]byte(body)); !errors.Is(err, ingest.ErrBatchTooLarge) {
		t.Errorf("err = %v, want ErrBatchTooLarge", err)
	}
}

// The items are copies: changing the body afterwards changes none.
func TestSplitBatchCopies(t *testing.T) {
	body := []byte(`[{"a":1},"x",2]`)
	items, err := ingest.SplitBatch(body)
	if err != nil {
		t.Fatal(err)
	}
	for i := range body {
		body[i] = ' '
	}
	if d := cmp.Diff([][]byte{[]byte(`{"a":1}`), []byte(`"x"`), []byte(`2`)}, items); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	// An item that grows does not overwrite the next.
	for i, it := range items {
		if cap(it) != len(it) {
			t.Errorf("item %d: cap %d, len %d", i, cap(it), len(it))
		}
	}
}

// FuzzSplitBatch checks that SplitBatch never panics, and that the items of
// an array it accepts are, joined by commas inside brackets, a body it splits
// into the same items.
func FuzzSplitBatch(f *testing.F) {
	for _, s := range []string{`[]`, `{"a":1}`, `[{"a":1},2,"x",[null]]`, "[\"\xff\"]", `[`, `]`, `[{}] x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		items, err := ingest.SplitBatch(body)
		if err != nil {
			return
		}
		if len(items) > ingest.MaxBatch {
			t.Fatalf("%d items", len(items))
		}
		if bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("{")) {
			return
		}
		// Where the JSON decoder reads the body as an array, the items are
		// its elements, byte for byte.
		if want, ok := jsonElements(body); ok {
			if diff := cmp.Diff(want, items); diff != "" {
				t.Fatalf("items differ from the decoder's elements (-decoder +split):\n%s", diff)
			}
		}
		again, err := ingest.SplitBatch(append(append([]byte("["), bytes.Join(items, []byte(","))...), ']'))
		if err != nil {
			t.Fatalf("re-split: %v", err)
		}
		if diff := cmp.Diff(items, again); diff != "" {
			t.Fatalf("(-first +again):\n%s", diff)
		}
	})
}

// jsonElements returns the elements of body as jsontext reads them, when it
// reads body as one array.
func jsonElements(body []byte) ([][]byte, bool) {
	dec := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '[' {
		return nil, false
	}
	out := [][]byte{}
	for dec.PeekKind() != ']' {
		v, err := dec.ReadValue()
		if err != nil {
			return nil, false
		}
		out = append(out, bytes.Clone(v))
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, false
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, false
	}
	return out, true
}

// BenchmarkSplitBatch splits a body of 1000 events (storetest.GenerateBatch)
// as POST /api/v1/events does. One op is the whole body.
//
//	go test -run='^$' -bench=SplitBatch -benchmem ./ingest
func BenchmarkSplitBatch(b *testing.B) {
	body := append(append([]byte("[\n"), bytes.Join(storetest.GenerateBatch(0, ingest.MaxBatch), []byte(",\n"))...), "\n]"...)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		items, err := ingest.SplitBatch(body)
		if err != nil || len(items) != ingest.MaxBatch {
			b.Fatal(len(items), err)
		}
	}
}
