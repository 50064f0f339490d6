// Package netpeek tells, without waiting and without consuming anything,
// whether a connection has something to read, has been closed by its peer,
// or is quiet: one recv(2) with MSG_PEEK|MSG_DONTWAIT on the socket beneath
// it. store/pgstore checks a pooled connection with it before handing it
// out; internal/sse checks a hijacked stream's connection at each wake-up,
// so that a stream needs no goroutine blocked in a read to see its client
// leave.
package netpeek

// State is what [Peek] found on a connection.
type State int

// The states of a connection.
const (
	// Unknown: the connection cannot be peeked at (not a socket, or a
	// platform without the peek); nothing is known.
	Unknown State = iota
	// Quiet: open, with nothing to read.
	Quiet
	// Readable: at least one byte is waiting to be read. The peer may
	// have closed the connection after it; only reading tells.
	Readable
	// Closed: the peer closed its side (the end of the stream is next) or
	// the connection failed (reset by the peer).
	Closed
)

// String names s.
func (s State) String() string {
	switch s {
	case Quiet:
		return "quiet"
	case Readable:
		return "readable"
	case Closed:
		return "closed"
	}
	return "unknown"
}
