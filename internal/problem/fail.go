package problem

import (
	"errors"
	"log/slog"
	"net/http"
)

// Error is an error that is answered as its own problem: a refusal of the
// request that a handler, or a reader it calls (internal/httpbody), knows
// the whole answer of. [Fail] writes Details with the headers in Header.
type Error struct {
	// Details is the answer.
	Details Details
	// Header holds the answer's extra headers (Accept-Encoding on a 415 of
	// a content coding, Retry-After, Connection: close); nil for none.
	Header http.Header
	// Err is the underlying error, for logs; nil when there is none.
	Err error
}

// Error renders "<code>: <detail>", followed by ": <Err>" when Err is set.
func (e *Error) Error() string {
	s := string(e.Details.Code) + ": " + e.Details.Detail
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns Err, so errors.Is finds the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// ErrClientGone is matched (errors.Is) by an error meaning that the
// request's client went away (its connection broke while the body was
// read): nobody is left to read an answer, and [Fail] writes none.
var ErrClientGone = errors.New("the client went away")

// ErrNoCaller is the error of a request that reached a handler without an
// authenticated caller; [Fail] answers it 401 ([Unauthorized]).
var ErrNoCaller = errors.New("no authenticated caller")

// Fail answers err, the error a handler returned: the one mapper of both
// HTTP adapters and the server, which each handle only their own cases in
// own. The cases, in order:
//
//   - the client is gone ([ErrClientGone], or [ClientGone]): logged at
//     Debug, nothing written, and the handler aborted with
//     panic(http.ErrAbortHandler), so that net/http closes the connection
//     rather than send an implicit 200 for a request that stored nothing
//     (docs/decisions.md, A 2xx answer);
//   - an [*Error]: its problem and headers, logged at Info (the client, not
//     the server, failed);
//   - [ErrNoCaller]: 401 [Unauthorized];
//   - own(err), when own is not nil and reports true: the problem it gives;
//   - [Unavailable]: logged at Warn, 503 ([WriteUnavailable]);
//   - anything else: logged at Error, 500 [Internal] with generic text.
//
// Log lines start with name (the adapter's package name) and carry the
// method, the path and the error; log nil logs nothing.
func Fail(w http.ResponseWriter, r *http.Request, log *slog.Logger, name string, err error, own func(error) (Details, bool)) {
	logf := func(level slog.Level, msg string, args ...any) {
		if log != nil {
			log.Log(r.Context(), level, name+": "+msg, append([]any{"method", r.Method, "path", r.URL.Path, "err", err}, args...)...)
		}
	}
	var e *Error
	switch {
	case errors.Is(err, ErrClientGone) || ClientGone(r, err):
		logf(slog.LevelDebug, "client gone; no answer")
		panic(http.ErrAbortHandler)
	case errors.As(err, &e):
		logf(slog.LevelInfo, "request refused", "status", e.Details.Status)
		for k, vs := range e.Header {
			w.Header()[k] = vs
		}
		Write(w, e.Details)
		return
	case errors.Is(err, ErrNoCaller):
		Write(w, Unauthorized())
		return
	}
	if own != nil {
		if p, ok := own(err); ok {
			Write(w, p)
			return
		}
	}
	if Unavailable(err) {
		logf(slog.LevelWarn, "store unavailable")
		WriteUnavailable(w)
		return
	}
	logf(slog.LevelError, "request failed")
	Write(w, Internal())
}
