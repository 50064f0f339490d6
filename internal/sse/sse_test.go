package sse

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEncodeFrameDataLines checks the data lines of a frame (the client's
// view is TestServeDataLines, in internal/feed).
func TestEncodeFrameDataLines(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       string // the data lines
	}{
		{"compact JSON", `{"a":1}`, "data: {\"a\":1}\n"},
		{"empty", "", "data: \n"},
		{"two lines", "a\nb", "data: a\ndata: b\n"},
		{"empty line inside", "a\n\nb", "data: a\ndata: \ndata: b\n"},
		{"CRLF", "a\r\nb", "data: a\ndata: b\n"},
		{"bare CR, a line end to a client", "a\rid: x", "data: a\ndata: id: x\n"},
		{"trailing line feed", "a\nb\n", "data: a\ndata: b\n"},
		{"indented JSON", "{\n  \"a\": 1\n}", "data: {\ndata:   \"a\": 1\ndata: }\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fr := Frame{ID: "c1", Event: "item", Data: []byte(tc.data)}
			want := "id: c1\nevent: item\n" + tc.want + "\n"
			got := string(encodeFrame(fr))
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("encodeFrame (-want +got):\n%s", d)
			}
		})
	}
}
