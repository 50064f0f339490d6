package pgstore

import (
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// setUserTimeout is the dialer's Control: on a TCP connection it sets
// TCP_USER_TIMEOUT (tcpUserTimeout), so that data the server's host does
// not acknowledge within it (a host that vanished, a network partition)
// fails the connection instead of waiting out TCP's retransmissions (about
// 15 minutes). It says nothing about a slow statement: a live server's
// kernel acknowledges at once.
func setUserTimeout(network, _ string, c syscall.RawConn) error {
	if !strings.HasPrefix(network, "tcp") {
		return nil
	}
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(tcpUserTimeout.Milliseconds()))
	}); err != nil {
		return err
	}
	return serr
}
