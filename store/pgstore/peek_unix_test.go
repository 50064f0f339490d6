//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package pgstore

import (
	"io"
	"net"
	"testing"
	"time"
)

// quiet tells an idle, open connection (nothing to read) from one whose
// peer has written (PostgreSQL's FATAL message before it closes) or closed
// it, without waiting: the check checkOnAcquire runs on every acquire
// instead of a ping (Stale connections).
func TestQuiet(t *testing.T) {
	tests := []struct {
		name string
		peer func(net.Conn) // what the server side does before the check
		want bool
	}{
		{"idle and open", func(net.Conn) {}, true},
		{"the peer wrote", func(c net.Conn) { _, _ = c.Write([]byte("E")) }, false},
		{"the peer closed", func(c net.Conn) { _ = c.Close() }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, server := tcpPair(t)
			tt.peer(server)
			// What the peer sent reaches the client's socket within a moment
			// on loopback; quiet itself never waits.
			deadline := time.Now().Add(5 * time.Second)
			got := quiet(client)
			for got != tt.want && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
				got = quiet(client)
			}
			if got != tt.want {
				t.Errorf("quiet = %v, want %v", got, tt.want)
			}
			if tt.want { // and it consumed nothing: the connection still works
				if _, err := server.Write([]byte("x")); err != nil {
					t.Fatal(err)
				}
				buf := make([]byte, 1)
				if _, err := io.ReadFull(client, buf); err != nil || buf[0] != 'x' {
					t.Errorf("read after quiet: %q, %v", buf, err)
				}
			}
		})
	}
}

// A peeked byte stays on the socket: quiet is false for as long as it is
// unread, and the next read returns it.
func TestQuietDoesNotConsume(t *testing.T) {
	client, server := tcpPair(t)
	if _, err := server.Write([]byte("E")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := io.ReadFull(io.LimitReader(peekThen(t, client), 1), buf); err != nil || buf[0] != 'E' {
		t.Errorf("read after quiet: %q, %v", buf, err)
	}
}

// peekThen waits until quiet(c) is false twice in a row, then returns c.
func peekThen(t *testing.T, c net.Conn) net.Conn {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for quiet(c) {
		if time.Now().After(deadline) {
			t.Fatal("the peer's byte never arrived")
		}
		time.Sleep(time.Millisecond)
	}
	if quiet(c) {
		t.Fatal("quiet consumed the pending byte")
	}
	return c
}

// quiet never waits for the descriptor's read lock: pgconn's background
// reader can be blocked in a Read of an idle connection while the pool
// hands it out (a deadlock the first version of quiet had).
func TestQuietBesideABlockedRead(t *testing.T) {
	client, server := tcpPair(t)
	read := make(chan error, 1)
	go func() {
		_, err := client.Read(make([]byte, 1))
		read <- err
	}()
	time.Sleep(10 * time.Millisecond) // let the Read block
	done := make(chan bool, 1)
	go func() { done <- quiet(client) }()
	select {
	case got := <-done:
		if !got {
			t.Error("quiet = false for an idle, open connection")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("quiet waited for the blocked Read")
	}
	_ = server.Close()
	<-read
}
