package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// ErrNotJSON is returned by [SplitBatch] for a body that is neither one
// object nor a well-formed JSON array. The HTTP layer answers 400.
var ErrNotJSON = errors.New("ingest: the body must be one JSON object or an array of them")

// SplitBatch splits a request body of POST /api/v1/events into raw items
// without decoding them (canonical-event.md, Delivery), so each item is
// judged, and kept if refused, exactly as it arrived: a body starting with
// '{' is one item, all of it; a body starting with '[' is an array whose
// elements, each with its exact bytes, are the items (an element that is
// not a valid object is still an item, refused alone). More than 1000
// elements fail with [ErrBatchTooLarge] without reading the rest; anything
// else, a broken array structure or data after the array fail with an
// error matching [ErrNotJSON]. The items are copies (of an array's
// elements, slices of one copy of the body): the body can be dropped once
// SplitBatch returns.
func SplitBatch(body []byte) ([][]byte, error) {
	i := 0
	for i < len(body) && isSpace(body[i]) {
		i++
	}
	if i == len(body) {
		return nil, fmt.Errorf("%w: the body is empty", ErrNotJSON)
	}
	switch body[i] {
	case '{':
		b := bytes.Clone(bytes.TrimRight(body[i:], " \t\r\n"))
		return [][]byte{b[:len(b):len(b)]}, nil
	case '[':
		return splitArray(body[i:])
	default:
		return nil, ErrNotJSON
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// splitArray splits the array that b starts with. It checks the array's
// structure (brackets that match, outside strings; a comma between
// elements; nothing after the array) but not the syntax inside an element:
// an element keeps its exact bytes and is judged by the pipeline as that
// item, so an element that breaks the decoder's depth limit (or holds a raw
// NUL, or is not valid JSON inside balanced brackets) is refused and
// dead-lettered alone, and its siblings proceed (docs/decisions.md, An item that
// breaks a parser limit). Nesting is counted without a limit, in one byte
// per level, bounded by the body's cap. It reads the body once, so its cost
// is linear in the body's length.
func splitArray(body []byte) ([][]byte, error) {
	// The items are slices of one copy of the body, each capped at its
	// end, rather than a copy each: one allocation instead of one per item.
	b := bytes.Clone(body)
	sc := &arrayScanner{b: b}
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
			items = append(items, item[:len(item):len(item)])
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
	b     []byte
	pos   int    // the index of the next byte
	stack []byte // the closers the open brackets of the current element want
}

func (sc *arrayScanner) next() (byte, error) {
	if sc.pos == len(sc.b) {
		return 0, io.EOF
	}
	c := sc.b[sc.pos]
	sc.pos++
	return c, nil
}

func (sc *arrayScanner) nextNonSpace() (byte, error) {
	for {
		c, err := sc.next()
		if err != nil || !isSpace(c) {
			return c, err
		}
	}
}

// fail reports msg as [ErrNotJSON], with err (io.EOF: the end of input).
func (sc *arrayScanner) fail(err error, msg string) ([][]byte, error) {
	switch {
	case err == io.EOF:
		msg += ": unexpected end of input"
	case err != nil:
		msg += ": " + err.Error()
	}
	return nil, fmt.Errorf("%w: %s", ErrNotJSON, msg)
}

var errStructure = errors.New("brackets do not match")

// element reads the element starting with c (just read) and returns its
// bytes (a subslice of the body) and, when reading it consumed the byte
// after it (a scalar ends at the first byte that cannot continue it), that
// byte; else 0.
func (sc *arrayScanner) element(c byte) (item []byte, after byte, err error) {
	start := sc.pos - 1
	switch c {
	case ',', ']', '}', ':':
		return nil, 0, fmt.Errorf("%w: %q where an element belongs", errStructure, c)
	case '"':
		err = sc.str()
		return sc.b[start:sc.pos], 0, err
	case '{', '[':
		sc.stack = append(sc.stack[:0], closer(c))
		for len(sc.stack) > 0 {
			// Only quotes and brackets matter here: skip the rest.
			i := sc.pos
			for i < len(sc.b) && !structural[sc.b[i]] {
				i++
			}
			sc.pos = i
			c, err := sc.next()
			if err != nil {
				return nil, 0, err
			}
			switch c {
			case '"':
				if err := sc.str(); err != nil {
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
		return sc.b[start:sc.pos], 0, nil
	}
	for {
		c, err := sc.next()
		if err != nil {
			return nil, 0, err
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			return sc.b[start : sc.pos-1], 0, nil
		case ',', ']', '}', '[', '{', '"', ':':
			return sc.b[start : sc.pos-1], c, nil
		}
	}
}

// structural marks the bytes an element's scan stops at: quotes and
// brackets.
var structural = [256]bool{'"': true, '{': true, '}': true, '[': true, ']': true}

// strEnd marks the bytes a string's scan stops at: the quote and the
// backslash.
var strEnd = [256]bool{'"': true, '\\': true}

// str reads the rest of a string whose opening quote was just read.
func (sc *arrayScanner) str() error {
	b, i := sc.b, sc.pos
	for {
		for i < len(b) && !strEnd[b[i]] {
			i++
		}
		if i == len(b) {
			sc.pos = i
			return io.EOF
		}
		i++
		if b[i-1] == '"' {
			sc.pos = i
			return nil
		}
		if i == len(b) { // a backslash at the very end
			sc.pos = i
			return io.EOF
		}
		i++ // the escaped byte
	}
}

func closer(open byte) byte {
	if open == '{' {
		return '}'
	}
	return ']'
}
