//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package pgstore

import "net"

// quiet is false where the socket cannot be peeked at without waiting: every
// connection is pinged when taken from the pool (see checkOnAcquire).
func quiet(net.Conn) bool { return false }
