//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package netpeek

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Close() })
	return client, server
}

// Peek tells a quiet connection from one its peer wrote to, half-closed
// or closed, without waiting; it consumes nothing.
func TestPeek(t *testing.T) {
	tests := []struct {
		name string
		peer func(net.Conn) // what the other end does before the peek
		want State
	}{
		{"idle and open", func(net.Conn) {}, Quiet},
		{"the peer wrote", func(c net.Conn) { _, _ = c.Write([]byte("E")) }, Readable},
		{"the peer wrote, then closed", func(c net.Conn) { _, _ = c.Write([]byte("E")); _ = c.Close() }, Readable},
		{"the peer half-closed", func(c net.Conn) { _ = c.(*net.TCPConn).CloseWrite() }, Closed},
		{"the peer closed", func(c net.Conn) { _ = c.Close() }, Closed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			local, peer := tcpPair(t)
			tt.peer(peer)
			// What the peer did reaches the socket within a moment on
			// loopback; Peek itself never waits.
			got := Peek(local)
			for deadline := time.Now().Add(5 * time.Second); got != tt.want && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
				got = Peek(local)
			}
			if diff := cmp.Diff(tt.want.String(), got.String()); diff != "" {
				t.Errorf("Peek (-want +got):\n%s", diff)
			}
			if tt.want == Readable { // the byte is still there
				buf := make([]byte, 1)
				if _, err := io.ReadFull(local, buf); err != nil || buf[0] != 'E' {
					t.Errorf("read after Peek: %q, %v", buf, err)
				}
			}
		})
	}
}

// A connection that is not a socket cannot be peeked at.
func TestPeekNotASocket(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if got := Peek(a); got != Unknown {
		t.Errorf("Peek(net.Pipe) = %v, want unknown", got)
	}
}

// Peek never waits for the descriptor's read lock: another goroutine may
// be blocked in a Read of the connection.
func TestPeekBesideABlockedRead(t *testing.T) {
	local, peer := tcpPair(t)
	read := make(chan error, 1)
	go func() {
		_, err := local.Read(make([]byte, 1))
		read <- err
	}()
	time.Sleep(10 * time.Millisecond) // let the Read block
	done := make(chan State, 1)
	go func() { done <- Peek(local) }()
	select {
	case got := <-done:
		if got != Quiet {
			t.Errorf("Peek = %v for an idle, open connection, want quiet", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Peek waited for the blocked Read")
	}
	_ = peer.Close()
	<-read
}
