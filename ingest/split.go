package ingest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/go-json-experiment/json/jsontext"
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
//     each with its exact bytes (invalid UTF-8 and member names given twice
//     included), are the items; an element that is not an object is still an
//     item, refused by the pipeline as that item. After 1000 elements, a
//     further one fails with [ErrBatchTooLarge] without reading the rest;
//   - anything else, an array that is not well-formed JSON, or data after
//     the array fails with an error matching [ErrNotJSON].
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

func splitArray(r io.Reader, er *errReader) ([][]byte, error) {
	dec := jsontext.NewDecoder(r, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	fail := func(err error) ([][]byte, error) {
		if er.err != nil {
			return nil, fmt.Errorf("ingest: read body: %w", er.err)
		}
		return nil, fmt.Errorf("%w: %v", ErrNotJSON, err)
	}
	if _, err := dec.ReadToken(); err != nil {
		return fail(err)
	}
	var items [][]byte
	for {
		k := dec.PeekKind()
		if k == ']' {
			break
		}
		if k == 0 {
			_, err := dec.ReadValue()
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return fail(err)
		}
		if len(items) == MaxBatch {
			return nil, ErrBatchTooLarge
		}
		v, err := dec.ReadValue()
		if err != nil {
			return fail(err)
		}
		items = append(items, bytes.Clone(v))
	}
	if _, err := dec.ReadToken(); err != nil {
		return fail(err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		if er.err != nil {
			return nil, fmt.Errorf("ingest: read body: %w", er.err)
		}
		return nil, fmt.Errorf("%w: data after the array", ErrNotJSON)
	}
	if items == nil {
		items = [][]byte{}
	}
	return items, nil
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
