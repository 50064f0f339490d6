package httpbody

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// stallReader fails a body from which no byte arrives for stall: each Read
// of r arms a timer, and a Read still waiting when it fires is woken by
// moving the connection's read deadline to now (w's
// [http.ResponseController]), so that it fails with a timeout, which Read
// gives back as a *stallError. Time between Reads (waiting for the
// budget, decoding) is not counted: only the wait for the client's bytes.
// A Read that brings anything, however little, disarms the timer, so a
// slow but steady body is never cut off.
type stallReader struct {
	r     io.Reader
	rc    *http.ResponseController
	stall time.Duration
	b     *Budget // counts the stalled bodies

	mu      sync.Mutex  // guards the fields below, shared with fire
	timer   *time.Timer // nil until the first Read
	waiting bool        // a Read of r is under way
	stalled bool        // fire moved the read deadline
}

// stalling wraps wire in a stallReader when the request's budget has a
// stall timeout, else returns wire.
func stalling(w http.ResponseWriter, wire io.Reader, acct *account) io.Reader {
	if acct == nil || acct.b.stall <= 0 {
		return wire
	}
	return &stallReader{r: wire, rc: http.NewResponseController(w), stall: acct.b.stall, b: acct.b}
}

func (s *stallReader) Read(p []byte) (int, error) {
	s.mu.Lock()
	if s.stalled { // the deadline has passed already; r fails at once
		s.mu.Unlock()
		n, err := s.r.Read(p)
		return n, s.wrap(err)
	}
	s.waiting = true
	if s.timer == nil {
		s.timer = time.AfterFunc(s.stall, s.fire)
	} else {
		s.timer.Reset(s.stall)
	}
	s.mu.Unlock()

	n, err := s.r.Read(p)

	s.mu.Lock()
	s.waiting = false
	s.timer.Stop()
	stalled := s.stalled
	s.mu.Unlock()
	if stalled {
		err = s.wrap(err)
	}
	return n, err
}

// wrap gives the failure of a Read after fire moved the read deadline as a
// *stallError; nil and io.EOF stay as they are.
func (s *stallReader) wrap(err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	return &stallError{stall: s.stall, err: err}
}

// fire wakes a Read that has waited for stall. Once the request's Read
// has returned it does nothing: the connection (which may serve the next
// request) keeps its deadline.
func (s *stallReader) fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.waiting || s.stalled {
		return
	}
	if err := s.rc.SetReadDeadline(time.Now()); err != nil {
		return // not offered by this ResponseWriter: the stall timeout does not apply
	}
	s.stalled = true
	s.b.stalled.Add(1)
}

// stallError is the failure of a body from which no byte arrived for
// stall; err is the connection's timeout.
type stallError struct {
	stall time.Duration
	err   error
}

func (e *stallError) Error() string {
	return fmt.Sprintf("no byte of the body arrived for %s: %v", e.stall, e.err)
}

func (e *stallError) Unwrap() error { return e.err }
