//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package pgstore

import "testing"

// Where the socket cannot be peeked at, quiet is false even for an idle,
// open connection, so checkOnAcquire pings every connection taken from the
// pool (README, Stale connections: "elsewhere every connection is pinged").
// The peek's own tests (peek_unix_test.go) hold only where it is built.
func TestQuietElsewhereAlwaysPings(t *testing.T) {
	client, _ := tcpPair(t)
	if quiet(client) {
		t.Error("quiet = true where the socket cannot be peeked at; want false (ping on every acquire)")
	}
}
