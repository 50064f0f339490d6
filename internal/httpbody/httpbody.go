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
// early, a body that trickles past the server's read timeout, a
// connection reset) is never an internal error: it is a 400 or a 408, or,
// for a client that is gone, no answer at all ([Answer]).
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
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strconv"
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

// Error is a request body that cannot be read, as the answer the client
// gets: Status 400 (malformed framing or coding, a body that ended early),
// 408 (the body did not arrive within the server's read timeout), 413
// (over the cap, on the wire or decoded), 415 (a content coding [Read] does
// not decode) or 503 (the [Budget] is spent). None is a server error.
type Error struct {
	// Status is the HTTP status of the answer.
	Status int
	// Code is the problem's stable code: invalid_body_framing,
	// body_incomplete, invalid_content_encoding, body_timeout,
	// body_too_large, unsupported_content_encoding or busy.
	Code string
	// Title and Detail are the problem's title and detail.
	Title, Detail string
	// Err is the underlying error, for logs; nil when there is none.
	Err error
}

// Error renders "httpbody: <detail>", followed by ": <Err>" when Err is set.
func (e *Error) Error() string {
	if e.Err != nil {
		return "httpbody: " + e.Detail + ": " + e.Err.Error()
	}
	return "httpbody: " + e.Detail
}

// Unwrap returns Err, so errors.Is finds the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// ErrClientGone is returned (wrapped) by [Read] when the connection broke
// while the body was read (reset by the peer, or closed): nobody is left to
// read an answer. [Answer] answers nothing.
var ErrClientGone = errors.New("httpbody: the client went away while sending the body")

// Read returns the decoded body of r, at most max bytes both as sent and as
// decoded (max must be positive). An empty body is an empty slice. The
// bytes are the caller's. It charges the [Budget] of r's context, if any,
// for the decoded bytes it holds; they are given back when the budget's
// handler returns.
//
// Errors: an [*Error] (see its Status) or an error wrapping
// [ErrClientGone]. w is used only to tell net/http to close the connection
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
	wire := &errReader{r: http.MaxBytesReader(w, r.Body, max)}
	acct := accountFrom(r.Context())

	// A declared identity body is read into a buffer that grows (by
	// doubling, up to the declared length) as its bytes arrive, each growth
	// charged before it is made: the budget holds what the body has brought
	// (at most twice that, and 16 KiB to start), not what it declares, so
	// uploads that declare the cap and send nothing cannot starve the
	// others of the budget.
	if coding == "" && r.ContentLength > 0 {
		want := r.ContentLength
		size := min(int64(initialBuffer), want)
		if err := acct.charge(r.Context(), size); err != nil {
			return nil, err
		}
		buf := make([]byte, 0, size)
		for int64(len(buf)) < want {
			if len(buf) == cap(buf) {
				next := min(2*int64(cap(buf)), want)
				if err := acct.charge(r.Context(), next-int64(cap(buf))); err != nil {
					return nil, err
				}
				nb := make([]byte, len(buf), next)
				copy(nb, buf)
				buf = nb
			}
			n, err := wire.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			if err == io.EOF && int64(len(buf)) < want {
				err = io.ErrUnexpectedEOF
			}
			if err != nil && err != io.EOF {
				return nil, readError(max, wire.err, err, "")
			}
		}
		return buf, nil
	}

	var src io.Reader = wire
	switch coding {
	case "gzip":
		zr, err := gzip.NewReader(wire)
		if err != nil {
			return nil, readError(max, wire.err, err, coding)
		}
		zr.Multistream(true)
		src = zr
	case "deflate":
		// RFC 9110 deflate is the zlib format; some clients send raw
		// deflate, told apart by the zlib header's checksum.
		br := bufio.NewReader(wire)
		hdr, _ := br.Peek(2)
		if len(hdr) == 2 && hdr[0]&0x0f == 8 && (uint16(hdr[0])<<8|uint16(hdr[1]))%31 == 0 {
			zr, err := zlib.NewReader(br)
			if err != nil {
				return nil, readError(max, wire.err, err, coding)
			}
			src = zr
		} else {
			src = flate.NewReader(br)
		}
	case "zstd":
		zr, err := zstd.NewReader(wire, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(MaxZstdWindow), zstd.WithDecoderMaxMemory(uint64(max)+1))
		if err != nil {
			return nil, readError(max, wire.err, err, coding)
		}
		defer zr.Close()
		src = zr
	}

	// Unknown size: grow by doubling, charging each growth, and read one
	// byte past the cap to tell "exactly max" from "more".
	size := min(int64(initialBuffer), max+1)
	if err := acct.charge(r.Context(), size); err != nil {
		return nil, err
	}
	buf := make([]byte, 0, size)
	for {
		if int64(len(buf)) == int64(cap(buf)) {
			if int64(len(buf)) > max {
				return nil, tooLarge(max, nil)
			}
			next := min(2*int64(cap(buf)), max+1)
			if err := acct.charge(r.Context(), next-int64(cap(buf))); err != nil {
				return nil, err
			}
			nb := make([]byte, len(buf), next)
			copy(nb, buf)
			buf = nb
		}
		n, err := src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, readError(max, wire.err, err, coding)
		}
	}
	if int64(len(buf)) > max {
		return nil, tooLarge(max, nil)
	}
	return buf, nil
}

// Coding returns the content coding of a request's headers: "" for none
// (or identity), else "gzip", "deflate" or "zstd". x-gzip is gzip (RFC
// 9110, section 8.4.1.3); tokens are case-insensitive. More than one coding
// other than identity, or any other coding, is an [*Error] with status 415.
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

// Answer answers err when it comes from [Read] or [Check] and reports
// whether it did; any other error is left to the caller. An [*Error] is
// answered as its problem, with Accept-Encoding on a 415, Retry-After on a
// 503 and Connection: close on a 408; it is logged on log (nil: not
// logged) at level Info, since the client, not the server, failed. For
// [ErrClientGone] nothing is answered: Answer logs at Info and aborts the
// handler with panic(http.ErrAbortHandler), the way net/http closes a
// connection without an answer or a server-error log; middleware therefore
// records no status for it.
func Answer(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) bool {
	if errors.Is(err, ErrClientGone) {
		if log != nil {
			log.InfoContext(r.Context(), "request body: the client went away; no answer", "method", r.Method, "path", r.URL.Path, "err", err)
		}
		panic(http.ErrAbortHandler)
	}
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	if log != nil {
		log.InfoContext(r.Context(), "request body refused", "method", r.Method, "path", r.URL.Path, "status", e.Status, "err", err)
	}
	switch e.Status {
	case http.StatusUnsupportedMediaType:
		w.Header().Set("Accept-Encoding", AcceptEncoding)
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	case http.StatusRequestTimeout:
		w.Header().Set("Connection", "close")
	}
	problem.Write(w, problem.New(e.Status, e.Code, e.Title, e.Detail))
	return true
}

func tooLarge(max int64, err error) *Error {
	d := problem.BodyTooLarge(max) // the shared case
	return &Error{Status: d.Status, Code: d.Code, Title: d.Title, Detail: d.Detail, Err: err}
}

func unsupported(detail string) *Error {
	return &Error{Status: http.StatusUnsupportedMediaType, Code: "unsupported_content_encoding",
		Title: "Unsupported content encoding", Detail: detail}
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
		return &Error{Status: http.StatusBadRequest, Code: "invalid_content_encoding", Title: "Invalid content encoding",
			Detail: fmt.Sprintf("the body is not valid %s: %v", coding, err), Err: err}
	}
	var ne net.Error
	switch {
	case errors.As(wireErr, &mb):
		return tooLarge(mb.Limit, wireErr)
	case errors.As(wireErr, &ne) && ne.Timeout():
		return &Error{Status: http.StatusRequestTimeout, Code: "body_timeout", Title: "Body timeout",
			Detail: "the body did not arrive within the server's read timeout; nothing was stored", Err: wireErr}
	case errors.Is(wireErr, io.ErrUnexpectedEOF):
		// The client closed its side early; it may still read the answer
		// (a half-close), and if it is gone the write fails unseen.
		return &Error{Status: http.StatusBadRequest, Code: "body_incomplete", Title: "Body incomplete",
			Detail: "the body ended before its declared length or its last chunk; nothing was stored", Err: wireErr}
	case errors.Is(wireErr, syscall.ECONNRESET), errors.Is(wireErr, syscall.EPIPE), errors.Is(wireErr, net.ErrClosed),
		errors.Is(wireErr, context.Canceled):
		return fmt.Errorf("%w: %w", ErrClientGone, wireErr)
	default:
		// Whatever else the connection's body reader says (a malformed
		// chunk length, a bad trailer) is the client's framing.
		return &Error{Status: http.StatusBadRequest, Code: "invalid_body_framing", Title: "Invalid body framing",
			Detail: "the body's framing is malformed (" + wireErr.Error() + "); nothing was stored", Err: wireErr}
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
