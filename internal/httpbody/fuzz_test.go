package httpbody_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tallyhq/tally/internal/httpbody"
	"github.com/tallyhq/tally/internal/problem"
)

// fuzzCodings are the ways FuzzRead sends its input: as is, encoded in a
// coding Read decodes, or labelled with a coding and sent undecoded (so
// that the decoders meet bytes that are not theirs).
var fuzzCodings = []struct {
	header string
	encode func([]byte) []byte // nil: the input is sent as is
}{
	{"", nil},
	{"gzip", gz},
	{"deflate", zl},
	{"deflate", rawDeflate},
	{"zstd", zst},
	{"gzip", nil},
	{"deflate", nil},
	{"zstd", nil},
}

// FuzzRead: whatever the body, its coding and its framing, Read returns
// the body decoded and whole, at most max bytes, or an *Error that is a
// client's failure (400, 413), never another error and never a panic.
func FuzzRead(f *testing.F) {
	for _, s := range []string{"", "[]", `[{"event_id":"a"}]`, "\x1f\x8b\x08\x00", "\x28\xb5\x2f\xfd", "\x78\x9c"} {
		for mode := range len(fuzzCodings) {
			f.Add([]byte(s), uint8(mode), false, uint16(64))
			f.Add([]byte(s), uint8(mode), true, uint16(8))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte, mode uint8, chunked bool, maxBody uint16) {
		c := fuzzCodings[int(mode)%len(fuzzCodings)]
		max := int64(maxBody)%4096 + 1
		body := in
		if c.encode != nil {
			body = c.encode(in)
		}
		r := httptest.NewRequest("POST", "/", bytes.NewReader(body))
		if chunked {
			r.ContentLength = -1
			r.Body = io.NopCloser(bytes.NewReader(body)) // no length to learn
		}
		if c.header != "" {
			r.Header.Set("Content-Encoding", c.header)
		}
		got, err := httpbody.Read(httptest.NewRecorder(), r, max)
		if err != nil {
			var e *problem.Error
			if !errors.As(err, &e) || (e.Details.Status != http.StatusBadRequest && e.Details.Status != http.StatusRequestEntityTooLarge) {
				t.Fatalf("Read: %v, want a *problem.Error of status 400 or 413", err)
			}
			// zstd frames have a window of at least 1 KiB, which a smaller
			// cap may refuse as over the decoder's memory (WithDecoderMaxMemory).
			zstdWindow := c.header == "zstd" && max < 1<<10
			if c.encode != nil && !zstdWindow && len(in) <= int(max) && len(body) <= int(max) && e.Details.Status == http.StatusBadRequest {
				t.Fatalf("Read of a valid %s body within the cap: %v", c.header, err)
			}
			return
		}
		if int64(len(got)) > max {
			t.Fatalf("Read returned %d bytes, over the cap of %d", len(got), max)
		}
		if (c.header == "" || c.encode != nil) && !bytes.Equal(got, in) {
			t.Fatalf("Read = %q, want %q", got, in)
		}
		if c.header == "" && int64(len(body)) > max {
			t.Fatalf("Read accepted %d identity bytes over the cap of %d", len(body), max)
		}
	})
}
