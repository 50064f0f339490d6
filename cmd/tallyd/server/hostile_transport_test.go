package server

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"syscall"

	"github.com/klauspost/compress/zstd"

	"github.com/tallyhq/tally/internal/httpbody"
)

func gzipped(b func() []byte) func() []byte {
	return func() []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(b())
		_ = zw.Close()
		return buf.Bytes()
	}
}

func zstded(b func() []byte) func() []byte {
	return func() []byte {
		zw, _ := zstd.NewWriter(nil)
		defer zw.Close()
		return zw.EncodeAll(b(), nil)
	}
}

// transportCases are the rows of TestHostileInput for the transport rules
// (docs/decisions.md, Content-Encoding and Client-side body failures): a
// compressed body is decoded, the cap counts decoded bytes (a zip bomb is
// 413), any other coding is 415 with Accept-Encoding, and a body the
// client fails to deliver is 400 or 408, or no answer when the client is
// gone; never 5xx, nothing stored.
func transportCases() []hostileCase {
	// A bomb: 16 MiB of spaces inside a batch (16 KiB compressed), twice
	// the cap once decoded.
	bomb := func() []byte {
		b := append([]byte("["), bytes.Repeat([]byte(" "), 16<<20)...)
		return append(b, ']')
	}
	created := `{"category":"c","action":"a","correlationKey":"transport-1"}`
	gzipHdr := map[string]string{"Content-Encoding": "gzip"}
	accept := map[string]string{"Accept-Encoding": httpbody.AcceptEncoding}
	one := batchOf(hostileEvent("gz-1", "", ""))
	return []hostileCase{
		{name: "transport/gzip batch", header: gzipHdr, body: gzipped(batchOf(hostileEvent("gz-1", "", ""), hostileEvent("gz-2", "", ""))),
			status: 200, accepted: 2, rejected: []string{}, stored: counts{Events: 2}},
		{name: "transport/x-gzip batch", header: map[string]string{"Content-Encoding": "x-gzip"}, body: gzipped(batchOf(hostileEvent("gz-3", "", ""))),
			status: 200, accepted: 1, rejected: []string{}, stored: counts{Events: 1}},
		{name: "transport/zstd batch", header: map[string]string{"Content-Encoding": "zstd"}, body: zstded(batchOf(hostileEvent("zs-1", "", ""))),
			status: 200, accepted: 1, rejected: []string{}, stored: counts{Events: 1}},
		{name: "transport/gzip createEvent", path: "/api/events", token: tokEvents, header: gzipHdr, body: gzipped(bodyOf(created)),
			status: 201, stored: counts{Correlated: 1}},
		{name: "transport/br is 415 with Accept-Encoding", header: map[string]string{"Content-Encoding": "br"}, body: one,
			status: 415, code: "unsupported_content_encoding", detail: `\"br\" is not supported`, answerHeader: accept},
		{name: "transport/br createEvent is 415", path: "/api/events", token: tokEvents, header: map[string]string{"Content-Encoding": "br"},
			body: bodyOf(created), status: 415, code: "unsupported_content_encoding", answerHeader: accept},
		{name: "transport/gzip label on a plain body", header: gzipHdr, body: one,
			status: 400, code: "invalid_content_encoding"},
		{name: "transport/zip bomb (16 MiB decoded from 16 KiB)", header: gzipHdr, body: gzipped(bomb),
			status: 413, code: "body_too_large"},
		{name: "transport/zip bomb on createEvent", path: "/api/events", token: tokEvents, header: gzipHdr, body: gzipped(bomb),
			status: 413, code: "body_too_large"},
		// What net/http's body reader returns for a broken transfer.
		{name: "transport/truncated chunked body", body: bodyOf(`[{"event_id":"tr`), readErr: io.ErrUnexpectedEOF,
			status: 400, code: "body_incomplete"},
		{name: "transport/truncated chunked createEvent", path: "/api/events", token: tokEvents, body: bodyOf(`{"category":`), readErr: io.ErrUnexpectedEOF,
			status: 400, code: "body_incomplete"},
		{name: "transport/malformed chunk length", body: bodyOf(`[`), readErr: errors.New("invalid byte in chunk length"),
			status: 400, code: "invalid_body_framing"},
		{name: "transport/body past the read timeout", body: bodyOf(`[{"event_id":"slow`), readErr: os.ErrDeadlineExceeded,
			status: 408, code: "body_timeout", answerHeader: map[string]string{"Connection": "close"}},
		{name: "transport/gzip body past the read timeout", header: gzipHdr, body: func() []byte { return gzipped(one)()[:20] }, readErr: os.ErrDeadlineExceeded,
			status: 408, code: "body_timeout"},
		{name: "transport/client disconnects mid-body: no answer", body: bodyOf(`[{"event_id":"gone`), readErr: syscall.ECONNRESET,
			status: 0},
		{name: "transport/client disconnects mid-createEvent: no answer", path: "/api/events", token: tokEvents, body: bodyOf(`{"cat`), readErr: syscall.ECONNRESET,
			status: 0},
	}
}
