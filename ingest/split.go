package ingest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// ErrNotJSON is returned by [SplitBatch] for a body that is neither one
// object nor a well-formed JSON array. The HTTP layer answers 400.
var ErrNotJSON = errors.New("ingest: the body must be one JSON object or an array of them")

// SplitBatch splits a request body of POST /api/v1/events into raw items
// without decoding them (canonical-event.md, Delivery: "one event or an
// array of at most 1000 of them"), so each item is judged, and kept if
// refused, exactly as it arrived:
//
//   - a body whose first non-space byte is '{' is one item: all of it, as
//     it is, even when it is not valid JSON (the pipeline then refuses it
//     "schema: invalid JSON…" and keeps it as a dead letter);
//   - a body whose first non-space byte is '[' is an array whose elements,
//     each with its exact bytes (invalid UTF-8, NUL, member names given
//     twice and any nesting depth included), are the items; an element that
//     is not an object, or not valid JSON inside its brackets, or nested
//     deeper than the decoder's limit ([event.MaxDepth]), is still an item,
//     refused by the pipeline as that item and dead-lettered, while its
//     siblings proceed. After 1000 elements, a further one fails with
//     [ErrBatchTooLarge] without reading the rest;
//   - anything else, an array whose structure is broken (brackets that do
//     not match outside strings, a missing or extra comma, a body that ends
//     inside the array), or data after the array fails with an error
//     matching [ErrNotJSON].
//
// An error reading r is returned wrapped (errors.As finds an
// *http.MaxBytesError, say). The items alias no buffer of r.
func SplitBatch(r io.Reader) ([][]byte, error) {
	er := &errReader{r: r}
	br := bufio.NewReader(er)
	for {
		c, err := br.ReadByte()
		if err != nil {
			if er.err != nil {
				return nil, fmt.Errorf("ingest: read body: %w", er.err)
			}
			return nil, fmt.Errorf("%w: the body is empty", ErrNotJSON)
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			_ = br.UnreadByte()
			b, err := io.ReadAll(br)
			if err != nil {
				return nil, fmt.Errorf("ingest: read body: %w", err)
			}
			return [][]byte{bytes.TrimRight(b, " \t\r\n")}, nil
		case '[':
			_ = br.UnreadByte()
			return splitArray(br, er)
		default:
			return nil, ErrNotJSON
		}
	}
}

// splitArray splits the array that br starts with. It checks the array's
// structure (brackets that match, outside strings; a comma between
// elements; nothing after the array) but not the syntax inside an element:
// an element keeps its exact bytes and is judged by the pipeline as that
// item, so an element that breaks the decoder's depth limit (or holds a raw
// NUL, or is not valid JSON inside balanced brackets) is refused and
// dead-lettered alone, and its siblings proceed (DECISIONS.md, An item that
// breaks a parser limit). Nesting is counted without a limit, in one byte
// per level, bounded by the body's cap. It reads the body once, byte by
// byte, so its cost is linear in the body's length.
func splitArray(br *bufio.Reader, er *errReader) ([][]byte, error) {
	sc := &arrayScanner{br: br, er: er}
	if c, err := sc.next(); err != nil || c != '[' {
		return sc.fail(err, "the body must start with [")
	}
	items := [][]byte{}
	c, err := sc.nextNonSpace()
	if err != nil {
		return sc.fail(err, "the array is not closed")
	}
	if c != ']' {
		for {
			if len(items) == MaxBatch {
				return nil, ErrBatchTooLarge
			}
			item, after, err := sc.element(c)
			if err != nil {
				return sc.fail(err, fmt.Sprintf("element %d", len(items)))
			}
			items = append(items, item)
			if after == 0 {
				if after, err = sc.nextNonSpace(); err != nil {
					return sc.fail(err, "the array is not closed")
				}
			}
			if after == ']' {
				break
			}
			if after != ',' {
				return sc.fail(nil, fmt.Sprintf("want , or ] after element %d, found %q", len(items)-1, after))
			}
			if c, err = sc.nextNonSpace(); err != nil {
				return sc.fail(err, "the array is not closed")
			}
		}
	}
	if _, err := sc.nextNonSpace(); err != io.EOF {
		return sc.fail(err, "data after the array")
	}
	return items, nil
}

// arrayScanner reads an array's bytes one at a time.
type arrayScanner struct {
	br    *bufio.Reader
	er    *errReader
	stack []byte // the closers the open brackets of the current element want
}

func (sc *arrayScanner) next() (byte, error) { return sc.br.ReadByte() }

func (sc *arrayScanner) nextNonSpace() (byte, error) {
	for {
		c, err := sc.br.ReadByte()
		if err != nil {
			return 0, err
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c, nil
	}
}

// fail reports a read error of the body as such, anything else as
// [ErrNotJSON] with msg.
func (sc *arrayScanner) fail(err error, msg string) ([][]byte, error) {
	if sc.er.err != nil {
		return nil, fmt.Errorf("ingest: read body: %w", sc.er.err)
	}
	switch {
	case err == io.EOF:
		msg += ": unexpected end of input"
	case err != nil:
		msg += ": " + err.Error()
	}
	return nil, fmt.Errorf("%w: %s", ErrNotJSON, msg)
}

var errStructure = errors.New("brackets do not match")

// element reads the element starting with c and returns its bytes and,
// when reading it consumed the byte after it (a scalar ends at the first
// byte that cannot continue it), that byte; else 0.
func (sc *arrayScanner) element(c byte) (item []byte, after byte, err error) {
	buf := []byte{c}
	switch c {
	case ',', ']', '}', ':':
		return nil, 0, fmt.Errorf("%w: %q where an element belongs", errStructure, c)
	case '"':
		buf, err = sc.str(buf)
		return buf, 0, err
	case '{', '[':
		sc.stack = append(sc.stack[:0], closer(c))
		for len(sc.stack) > 0 {
			c, err := sc.next()
			if err != nil {
				return nil, 0, err
			}
			buf = append(buf, c)
			switch c {
			case '"':
				if buf, err = sc.str(buf); err != nil {
					return nil, 0, err
				}
			case '{', '[':
				sc.stack = append(sc.stack, closer(c))
			case '}', ']':
				if sc.stack[len(sc.stack)-1] != c {
					return nil, 0, errStructure
				}
				sc.stack = sc.stack[:len(sc.stack)-1]
			}
		}
		return buf, 0, nil
	}
	for {
		c, err := sc.next()
		if err != nil {
			return nil, 0, err
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			return buf, 0, nil
		case ',', ']', '}', '[', '{', '"', ':':
			return buf, c, nil
		}
		buf = append(buf, c)
	}
}

// str appends the rest of a string whose opening quote buf ends with.
func (sc *arrayScanner) str(buf []byte) ([]byte, error) {
	for {
		c, err := sc.next()
		if err != nil {
			return nil, err
		}
		buf = append(buf, c)
		switch c {
		case '"':
			return buf, nil
		case '\\':
			c, err := sc.next()
			if err != nil {
				return nil, err
			}
			buf = append(buf, c)
		}
	}
}

func closer(open byte) byte {
	if open == '{' {
		return '}'
	}
	return ']'
}

// errReader remembers the first error of r other than io.EOF, so a read
// failure (a body over its cap) is told from malformed JSON.
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
