package pgstore

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// Every connection the pool dials over TCP carries TCP_USER_TIMEOUT
// (tcpUserTimeout): a statement sent to a server that vanished without
// closing fails within it (a database that stops answering gets
// 503; busy connections are not pinged, so nothing else finds such a
// server sooner).
func TestPoolSetsTCPUserTimeout(t *testing.T) {
	cfg, err := poolConfig("postgres://u@127.0.0.1:1/db?sslmode=disable", Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := cfg.ConnConfig.DialFunc(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	type opts struct{ UserTimeoutMS, KeepAlive, KeepIdleS, KeepIntvlS, KeepCnt int }
	var got opts
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		get := func(level, opt int) int {
			v, err := unix.GetsockoptInt(int(fd), level, opt)
			if err != nil {
				gerr = err
			}
			return v
		}
		got = opts{
			get(unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT),
			get(unix.SOL_SOCKET, unix.SO_KEEPALIVE),
			get(unix.IPPROTO_TCP, unix.TCP_KEEPIDLE),
			get(unix.IPPROTO_TCP, unix.TCP_KEEPINTVL),
			get(unix.IPPROTO_TCP, unix.TCP_KEEPCNT),
		}
	}); err != nil || gerr != nil {
		t.Fatal(err, gerr)
	}
	// The keepalives bound how long a vanished peer holds the session
	// ("A host that vanishes without closing its connections keeps that
	// session and its locks until TCP keepalive notices").
	want := opts{int(tcpUserTimeout.Milliseconds()), 1, 30, 10, 3}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("socket options (-want +got):\n%s", diff)
	}
}
