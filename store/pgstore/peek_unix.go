//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package pgstore

import (
	"errors"
	"net"
	"syscall"
)

// quiet reports whether c, a connection idle between statements, has
// nothing to read, without waiting and without sending anything: one
// recv(2) with MSG_PEEK|MSG_DONTWAIT that finds no byte (EAGAIN). A
// connection PostgreSQL has closed (a restart, pg_terminate_backend, an
// idle-session timeout) is readable: the server's FATAL message or the end
// of the stream is waiting on it, so quiet is false. A TLS connection is
// peeked at on the TCP connection beneath it: an idle one has no record in
// flight either. Anything that cannot be peeked at is not quiet.
func quiet(c net.Conn) bool {
	if t, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = t.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var (
		buf  [1]byte
		n    int
		rerr error
	)
	// Control, not Read: pgconn's background reader may still be blocked
	// in a Read of this connection (it is stopped only after its current
	// read), holding the descriptor's read lock. A peek never consumes, so
	// the two do not disturb each other; should that reader take the
	// server's FATAL message first, the end of the stream that follows it
	// is still there to peek at.
	if err := raw.Control(func(fd uintptr) {
		n, _, rerr = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	}); err != nil {
		return false
	}
	return n <= 0 && (errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EWOULDBLOCK))
}
