package ingest

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// ErrBadParameter is matched (errors.Is) by every [*ParamError].
var ErrBadParameter = errors.New("ingest: invalid parameter")

// ParamError refuses a read or a put whose text parameter cannot name
// anything stored: it is not valid UTF-8, or holds a NUL character (the
// stored identifiers never do: event.Decode refuses both). Param is the
// parameter's name as the HTTP API spells it (cloud, resource_type, …). The
// HTTP layer answers 400 naming it.
type ParamError struct {
	Param   string
	Message string
}

// Error renders "ingest: <param>: <message>".
func (e *ParamError) Error() string { return "ingest: " + e.Param + ": " + e.Message }

// Is reports whether target is [ErrBadParameter].
func (e *ParamError) Is(target error) bool { return target == ErrBadParameter }

// checkText returns a *ParamError for the first pair (name, value) whose
// value is not valid UTF-8 or holds a NUL.
func checkText(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		v := pairs[i+1]
		if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
			return &ParamError{Param: pairs[i], Message: "must be valid UTF-8 without NUL"}
		}
	}
	return nil
}
