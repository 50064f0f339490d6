// Package httpbody reads the body of an HTTP request: the one reader that
// tally's HTTP adapters (ingest/ingesthttp, correlate/correlatehttp) and the
// server (cmd/tallyd/server) share (the hostile-input rules, Transport; docs/decisions.md,
// "Content-Encoding" and "Client-side body failures").
//
// [Read] decodes the body's Content-Encoding (gzip, deflate, zstd; identity
// is no coding) and caps the body twice: the bytes on the wire and the
// bytes after decoding are each at most the cap, so a zip bomb is refused
// with 413 after reading no more than the cap. Any other coding is refused
// with 415 and an Accept-Encoding header (RFC 9110, section 12.5.3).
//
// A failure of the client (a malformed chunk length, a body that ends
// early, a body that trickles past the server's read timeout or stops
// arriving for the budget's stall timeout, a connection reset) is never an
// internal error: it is a 400 or a 408, or, for a client that is gone, no
// answer at all. Every refusal is a [*problem.Error] carrying its whole
// answer (headers included), and a client that is gone is an error matching
// [problem.ErrClientGone]; the handler answers both with [problem.Fail].
//
// A [Budget] bounds the decoded body bytes that all requests hold at once;
// Read charges the request's share as it reads, and a request that cannot
// get its share within the budget's wait is refused with 503 and
// Retry-After.
package httpbody

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"

	"github.com/tallyhq/tally/internal/problem"
)

// AcceptEncoding lists the content codings [Read] decodes, as the value of
// the Accept-Encoding header of a 415 answer. identity (no coding) is
// always accepted as well.
const AcceptEncoding = "gzip, deflate, zstd"

// MaxZstdWindow is the largest zstd window a body may declare (8 MiB, what
// zstd's level 19 uses); a frame asking for more is refused with 400. The
// window is held while the body is decoded, beside the body itself.
const MaxZstdWindow = 8 << 20

// Read returns the decoded body of r, at most max bytes both as sent and as
// decoded (max must be positive). An empty body is an empty slice. The
// bytes are the caller's. It charges the [Budget] of r's context, if any,
// for the decoded bytes it holds; they are given back when the budget's
// handler returns, or at once when Read fails. A body from which no byte
// arrives for the budget's stall timeout fails with 408 body_timeout.
//
// Errors: a [*problem.Error], whose Details.Status is 400 (malformed
// framing or coding, a body that ended early: codes invalid_body_framing,
// invalid_content_encoding, body_incomplete), 408 (the body did not arrive
// within the server's read timeout, or no byte of it for the budget's stall
// timeout: body_timeout, with Connection: close),
// 413 (over the cap, on the wire or decoded: body_too_large), 415 (a
// content coding Read does not decode: unsupported_content_encoding, with
// Accept-Encoding) or 503 (the [Budget] is spent: busy, with Retry-After),
// none a server error; or an error wrapping [problem.ErrClientGone] (the
// connection broke while the body was read). w is used only to tell net/http to close the connection
// after a body over the cap ([http.MaxBytesReader]).
func Read(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	coding, err := Coding(r.Header)
	if err != nil {
		return nil, err
	}
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return []byte{}, nil
	}
	if r.ContentLength > max {
		return nil, tooLarge(max, nil)
	}
	acct := accountFrom(r.Context())
	wire := &errReader{r: stalling(w, http.MaxBytesReader(w, r.Body, max), acct)}
	b, err := readBody(wire, &buffer{ctx: r.Context(), acct: acct}, r.ContentLength, max, coding)
	if err != nil {
		acct.release() // nothing is kept: the budget is given back at once
	}
	return b, err
}

// readBody reads the body from wire, of declared length (-1: unknown) and
// coding, into buf.
func readBody(wire *errReader, buf *buffer, length, max int64, coding string) ([]byte, error) {
	if coding == "" && length > 0 {
		return readDeclared(wire, buf, length, max)
	}
	src, closeSrc, err := decoder(wire, coding, max)
	if err != nil {
		return nil, readError(max, wire.err, err, coding)
	}
	defer closeSrc()
	return readUnknown(src, wire, buf, max, coding)
}

// readDeclared reads an identity body of declared length want (at most
// max). Its buffer grows by doubling, up to want, as the bytes arrive,
// each growth charged before it is made: the budget holds what the body
// has brought (at most twice that, and 16 KiB to start), not what it
// declares, so uploads that declare the cap and send nothing cannot starve
// the others of the budget.
func readDeclared(wire *errReader, buf *buffer, want, max int64) ([]byte, error) {
	for buf.len() < want {
		if buf.full() {
			if err := buf.grow(want); err != nil {
				return nil, err
			}
		}
		err := buf.readFrom(wire)
		if err == io.EOF && buf.len() < want {
			err = io.ErrUnexpectedEOF
		}
		if err != nil && err != io.EOF {
			return nil, readError(max, wire.err, err, "")
		}
	}
	return buf.bytes(), nil
}

// readUnknown reads src, a body of unknown decoded size (chunked, or
// decoded from coding) to its end. Its buffer grows by doubling, each
// growth charged, and reads one byte past the cap to tell "exactly max"
// from "more" (413).
func readUnknown(src io.Reader, wire *errReader, buf *buffer, max int64, coding string) ([]byte, error) {
	for {
		if buf.full() {
			if buf.len() > max {
				return nil, tooLarge(max, nil)
			}
			if err := buf.grow(max + 1); err != nil {
				return nil, err
			}
		}
		err := buf.readFrom(src)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, readError(max, wire.err, err, coding)
		}
	}
	if buf.len() > max {
		return nil, tooLarge(max, nil)
	}
	return buf.bytes(), nil
}

// decoder returns the reader of the decoded body of coding ("" for none)
// over wire, and what closes it; its error is the decoder's refusal of the
// body's first bytes, or the failure of wire that it met.
func decoder(wire io.Reader, coding string, max int64) (io.Reader, func(), error) {
	switch coding {
	case "gzip":
		zr, err := gzip.NewReader(wire)
		if err != nil {
			return nil, nil, err
		}
		zr.Multistream(true)
		return zr, func() {}, nil
	case "deflate":
		r, err := deflateReader(wire)
		return r, func() {}, err
	case "zstd":
		zr, err := zstd.NewReader(wire, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(MaxZstdWindow), zstd.WithDecoderMaxMemory(uint64(max)+1))
		if err != nil {
			return nil, nil, err
		}
		return zr, zr.Close, nil
	}
	return wire, func() {}, nil
}

// deflateReader decodes RFC 9110 deflate, which is the zlib format; some
// clients send raw deflate, told apart by the zlib header's checksum.
func deflateReader(wire io.Reader) (io.Reader, error) {
	br := bufio.NewReader(wire)
	hdr, _ := br.Peek(2)
	if len(hdr) == 2 && hdr[0]&0x0f == 8 && (uint16(hdr[0])<<8|uint16(hdr[1]))%31 == 0 {
		return zlib.NewReader(br)
	}
	return flate.NewReader(br), nil
}

// buffer is the body read so far, whose capacity is charged to acct
// (nil: no budget) as it grows.
type buffer struct {
	ctx  context.Context
	acct *account
	b    []byte // the body so far; its capacity is what acct was charged
	// back is b's backing array at its full capacity: a buffer from pool
	// is larger than what the body has been charged so far, and b grows
	// into it without a copy. nil until the first grow.
	back []byte
}

// pool holds the backing arrays of bodies given back with [Recycle], at
// most poolSize of them (so at most poolSize × maxPooled bytes stay held
// while no request needs them). A channel rather than a sync.Pool: the
// garbage collector empties a sync.Pool every other cycle, and ingestion
// allocates enough to run one every request or two.
var pool = make(chan []byte, poolSize)

// poolSize is how many backing arrays pool keeps: one per core of a small
// server; requests beyond them allocate as without a pool.
const poolSize = 4

// maxPooled is the largest backing array pool keeps: a batch of 1000
// events takes a few hundred KiB to a few MiB.
const maxPooled = 4 << 20

// Recycle gives the backing array of body, a body [Read] returned, back
// for a later Read to fill. The caller must hold no reference into body
// afterwards, nor let anything else hold one: its bytes will be
// overwritten. A body of another origin, or larger than Recycle keeps, is
// left to the garbage collector.
func Recycle(body []byte) {
	if c := cap(body); c >= initialBuffer && c <= maxPooled {
		select {
		case pool <- body[:0]:
		default:
		}
	}
}

// bytes returns the body read, with the capacity of its backing array
// (for [Recycle]).
func (b *buffer) bytes() []byte {
	if b.back != nil {
		return b.back[:len(b.b)]
	}
	return b.b
}

func (b *buffer) len() int64 { return int64(len(b.b)) }

func (b *buffer) full() bool { return len(b.b) == cap(b.b) }

// grow doubles the buffer's capacity (16 KiB to start), to at most limit,
// charging the budget for the growth first: an [*problem.Error] 503 when the
// budget stays spent, or an error wrapping [problem.ErrClientGone].
func (b *buffer) grow(limit int64) error {
	next := min(max(2*int64(cap(b.b)), initialBuffer), limit)
	if err := b.acct.charge(b.ctx, next-int64(cap(b.b))); err != nil {
		return err
	}
	if b.back == nil {
		select {
		case b.back = <-pool:
		default:
		}
	}
	if int64(cap(b.back)) >= next {
		// The body so far is already at the start of back.
		b.b = b.back[:len(b.b):next]
		return nil
	}
	// An eighth more than charged, so that a recycled array also takes
	// the next body of about the same length (the budget still counts
	// what the body brought, not this headroom).
	nb := make([]byte, len(b.b), next+next/8)
	copy(nb, b.b)
	b.b, b.back = nb[:len(b.b):next], nb
	return nil
}

// readFrom reads once from r into the buffer's free capacity and returns
// r's error.
func (b *buffer) readFrom(r io.Reader) error {
	n, err := r.Read(b.b[len(b.b):cap(b.b)])
	b.b = b.b[:len(b.b)+n]
	return err
}

// Coding returns the content coding of a request's headers: "" for none
// (or identity), else "gzip", "deflate" or "zstd". x-gzip is gzip (RFC
// 9110, section 8.4.1.3); tokens are case-insensitive. More than one coding
// other than identity, or any other coding, is a [*problem.Error] with
// status 415 (unsupported_content_encoding, Accept-Encoding set).
func Coding(h http.Header) (string, error) {
	var coding string
	for _, v := range h.Values("Content-Encoding") {
		for _, tok := range strings.Split(v, ",") {
			tok = strings.ToLower(strings.TrimSpace(tok))
			switch tok {
			case "", "identity":
				continue
			case "x-gzip":
				tok = "gzip"
			case "gzip", "deflate", "zstd":
			default:
				return "", unsupported(fmt.Sprintf("the content coding %q is not supported; send one of %s, or none", tok, AcceptEncoding))
			}
			if coding != "" {
				return "", unsupported(fmt.Sprintf("the body may have one content coding, not %s and %s", coding, tok))
			}
			coding = tok
		}
	}
	return coding, nil
}

// Check refuses a request before its body is read: [Coding]'s 415, or 413
// when the declared Content-Length is over max. The server runs it right
// after authentication; [Read] repeats it.
func Check(r *http.Request, max int64) error {
	if r.ContentLength == 0 {
		return nil
	}
	if _, err := Coding(r.Header); err != nil {
		return err
	}
	if r.ContentLength > max {
		return tooLarge(max, fmt.Errorf("Content-Length %d", r.ContentLength))
	}
	return nil
}

func tooLarge(max int64, err error) *problem.Error {
	return &problem.Error{Details: problem.BodyTooLarge(max), Err: err} // the shared case
}

func timeout(detail string, err error) *problem.Error {
	return &problem.Error{Details: problem.New(problem.CodeBodyTimeout, detail), // the shared case
		Header: http.Header{"Connection": {"close"}}, Err: err}
}

func unsupported(detail string) *problem.Error {
	return &problem.Error{Details: problem.New(problem.CodeUnsupportedContentEncoding, detail),
		Header: http.Header{"Accept-Encoding": {AcceptEncoding}}}
}

// readError classifies a failed read: wireErr is the first error the
// connection's body reader returned (nil when the failure is the
// decoder's), err what the reading returned.
func readError(max int64, wireErr, err error, coding string) error {
	var mb *http.MaxBytesError
	if wireErr == nil {
		if errors.As(err, &mb) {
			return tooLarge(mb.Limit, err)
		}
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
			return tooLarge(max, err) // a frame declaring more than the cap
		}
		if errors.Is(err, io.ErrUnexpectedEOF) && coding == "" {
			wireErr = err
		}
	}
	if wireErr == nil {
		// The bytes arrived; the decoder refused them.
		return &problem.Error{Details: problem.New(problem.CodeInvalidContentEncoding,
			fmt.Sprintf("the body is not valid %s: %v", coding, err)), Err: err}
	}
	var ne net.Error
	var se *stallError
	switch {
	case errors.As(wireErr, &mb):
		return tooLarge(mb.Limit, wireErr)
	case errors.As(wireErr, &se):
		return timeout(fmt.Sprintf("no byte of the body arrived for %s, the server's body stall timeout; nothing was stored", se.stall), wireErr)
	case errors.As(wireErr, &ne) && ne.Timeout():
		return timeout("the body did not arrive within the server's read timeout; nothing was stored", wireErr)
	case errors.Is(wireErr, io.ErrUnexpectedEOF):
		// The client closed its side early; it may still read the answer
		// (a half-close), and if it is gone the write fails unseen.
		return &problem.Error{Details: problem.New(problem.CodeBodyIncomplete,
			"the body ended before its declared length or its last chunk; nothing was stored"), Err: wireErr}
	case errors.Is(wireErr, syscall.ECONNRESET), errors.Is(wireErr, syscall.EPIPE), errors.Is(wireErr, net.ErrClosed),
		errors.Is(wireErr, context.Canceled):
		return fmt.Errorf("httpbody: %w while sending the body: %w", problem.ErrClientGone, wireErr)
	default:
		// Whatever else the connection's body reader says (a malformed
		// chunk length, a bad trailer) is the client's framing.
		return &problem.Error{Details: problem.New(problem.CodeInvalidBodyFraming,
			"the body's framing is malformed ("+wireErr.Error()+"); nothing was stored"), Err: wireErr}
	}
}

// errReader remembers the first error of r other than io.EOF, so that a
// failure of the connection is told from one of the decoder.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}

// IsJSON reports whether mediaType, a Content-Type value with or without
// parameters, names JSON as the CloudEvents JSON event format (section 3.1)
// counts it: "its media type, when stripped of parameters, has the form
// */json or */*+json" (application/json, text/json, application/vnd.x+json;
// case-insensitive). A value that does not parse as a media type is not
// JSON.
func IsJSON(mediaType string) bool {
	mt, _, err := mime.ParseMediaType(mediaType)
	if err != nil {
		return false
	}
	_, sub, ok := strings.Cut(mt, "/")
	return ok && (sub == "json" || len(sub) > len("+json") && strings.HasSuffix(sub, "+json"))
}
