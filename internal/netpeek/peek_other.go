//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package netpeek

import "net"

// Peek is Unknown where the socket cannot be peeked at without waiting.
func Peek(net.Conn) State { return Unknown }
