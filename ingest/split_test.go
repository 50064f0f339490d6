package ingest_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/ingest"
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
		{"raw NUL inside an array", "[{\"a\":\"\x00\"}]", nil, ingest.ErrNotJSON},
		{"1000 items", "[" + strings.Repeat("{},", 999) + "{}]", repeat("{}", 1000), nil},
		{"1001 items", "[" + strings.Repeat("{},", 1000) + "{}]", nil, ingest.ErrBatchTooLarge},
		{"1001 items then garbage is still too large", "[" + strings.Repeat("{},", 1000) + "{} garbage", nil, ingest.ErrBatchTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ingest.SplitBatch(strings.NewReader(tt.body))
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

// The 1001st element is refused before the rest of the body is read.
func TestSplitBatchStopsReading(t *testing.T) {
	head := "[" + strings.Repeat("{},", 1001)
	r := io.MultiReader(strings.NewReader(head), iotest.ErrReader(errors.New("read past the limit")))
	if _, err := ingest.SplitBatch(r); !errors.Is(err, ingest.ErrBatchTooLarge) {
		t.Errorf("err = %v, want ErrBatchTooLarge", err)
	}
}

func TestSplitBatchReadError(t *testing.T) {
	boom := errors.New("boom")
	for _, body := range []string{`[{"a":1},`, `{"a":`, ``} {
		r := io.MultiReader(strings.NewReader(body), iotest.ErrReader(boom))
		if _, err := ingest.SplitBatch(r); !errors.Is(err, boom) || errors.Is(err, ingest.ErrNotJSON) {
			t.Errorf("%q: err = %v, want the read error", body, err)
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
		items, err := ingest.SplitBatch(bytes.NewReader(body))
		if err != nil {
			return
		}
		if len(items) > ingest.MaxBatch {
			t.Fatalf("%d items", len(items))
		}
		if bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("{")) {
			return
		}
		again, err := ingest.SplitBatch(bytes.NewReader(append(append([]byte("["), bytes.Join(items, []byte(","))...), ']')))
		if err != nil {
			t.Fatalf("re-split: %v", err)
		}
		if diff := cmp.Diff(items, again); diff != "" {
			t.Fatalf("(-first +again):\n%s", diff)
		}
	})
}
