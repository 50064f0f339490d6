//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package netpeek

import (
	"errors"
	"net"
	"syscall"
)

// Peek reports the state of c without waiting and without consuming
// anything: one recv(2) with MSG_PEEK|MSG_DONTWAIT. A TLS connection (any
// connection with a NetConn method, as *tls.Conn has) is peeked at on the
// connection beneath it, where a record in flight or a close_notify alert
// reads as Readable. Anything that cannot be peeked at is Unknown.
func Peek(c net.Conn) State {
	if t, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = t.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return Unknown
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return Unknown
	}
	var (
		buf  [1]byte
		n    int
		rerr error
	)
	// Control, not Read: another goroutine (pgconn's background reader)
	// may be blocked in a Read of this connection, holding the
	// descriptor's read lock. A peek never consumes, so the two do not
	// disturb each other.
	if err := raw.Control(func(fd uintptr) {
		n, _, rerr = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	}); err != nil {
		return Unknown
	}
	switch {
	case n > 0:
		return Readable
	case rerr == nil:
		return Closed // recv(2) returned 0: the peer's end of the stream
	case errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EWOULDBLOCK):
		return Quiet
	case errors.Is(rerr, syscall.EINTR):
		return Unknown
	}
	return Closed
}
