package oslo

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/tallyhq/tally/event"
)

// DefaultMaxLineBytes bounds one notification line in a [Reader] unless
// [Reader.MaxLineBytes] says otherwise.
const DefaultMaxLineBytes = 16 << 20

// Outcome is what one line of input became.
type Outcome struct {
	// Line is the 1-based line number in the input.
	Line int
	// Shape is the envelope recognised; "" when the line is not a
	// notification.
	Shape Shape
	// Event is the mapped event, valid under [event.Validate]; set only
	// when Err is nil.
	Event event.Event
	// Err is nil, an [*UnmappableError], or an error matching
	// [event.ErrInvalid]; either way the line is not sent.
	Err error
}

// Reader reads notifications as JSON lines and maps each with a [Mapper].
// Blank lines are skipped (they count for the line numbers). A line longer
// than MaxLineBytes is reported as unmappable and skipped, not fatal. A
// Reader is not safe for concurrent use.
type Reader struct {
	// MaxLineBytes bounds one line; 0 means [DefaultMaxLineBytes].
	MaxLineBytes int

	m    Mapper
	r    *bufio.Reader
	line int
}

// NewReader returns a Reader mapping the lines of r with m.
func (m Mapper) NewReader(r io.Reader) *Reader {
	return &Reader{m: m, r: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the outcome of the next non-blank line. At the end of the
// input it returns io.EOF; on a read error it returns that error, wrapped.
// A final line without a newline is read like any other.
func (r *Reader) Next() (Outcome, error) {
	limit := r.MaxLineBytes
	if limit <= 0 {
		limit = DefaultMaxLineBytes
	}
	for {
		line, tooLong, err := r.readLine(limit)
		if err != nil && !errors.Is(err, io.EOF) {
			return Outcome{}, fmt.Errorf("oslo: read line %d: %w", r.line+1, err)
		}
		eof := err != nil
		if eof && len(line) == 0 && !tooLong {
			return Outcome{}, io.EOF
		}
		r.line++
		if tooLong {
			return Outcome{Line: r.line, Err: &UnmappableError{Reasons: []string{fmt.Sprintf("the line is longer than %d bytes", limit)}}}, nil
		}
		if len(bytes.TrimSpace(line)) == 0 {
			if eof { // trailing blanks
				return Outcome{}, io.EOF
			}
			continue
		}
		o := Outcome{Line: r.line}
		n, perr := Parse(line)
		if perr != nil {
			o.Err = &UnmappableError{Reasons: []string{perr.Error()}}
			return o, nil
		}
		o.Shape = n.Shape
		o.Event, o.Err = r.m.MapNotification(n)
		return o, nil
	}
}

// readLine reads up to and without the next newline. A line over limit is
// consumed and reported as tooLong, with no bytes. err is io.EOF when the
// input ended (line may still hold a last, unterminated line).
func (r *Reader) readLine(limit int) (line []byte, tooLong bool, err error) {
	var buf []byte
	for {
		chunk, err := r.r.ReadSlice('\n')
		if !tooLong {
			if len(buf)+len(bytes.TrimSuffix(chunk, []byte("\n"))) > limit {
				tooLong, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		switch {
		case err == nil:
			return bytes.TrimSuffix(buf, []byte("\n")), tooLong, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return buf, tooLong, err
		}
	}
}
