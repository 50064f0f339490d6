package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	floodFDLimit = 2048 // tallyd's descriptor limit
	floodConns   = 3000 // idle keep-alive connections offered
)

// TestConnectionFlood: Connections: "Run under a limit of 2,048
// descriptors and offered 3,000 idle keep-alive connections, the server
// still answers /healthz on a new connection in under a second." tallyd
// runs as a child under `ulimit -n 2048` (its default cap is then 1,792);
// each of 3,000 connections sends one GET /healthz (no token needed) and
// stays open; then a new connection must get 200 from /healthz within a
// deadline of one second, and tallyd must never have run out of
// descriptors. Loopback only; bounded by the counts above.
func TestConnectionFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the flood opens 3,000 connections")
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < floodConns+256 {
		t.Skipf("this test process may open %d descriptors; the flood needs %d", lim.Cur, floodConns+256)
	}
	cmd := exec.Command("sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, floodFDLimit),
		tallydBinary(t), "--listen", "127.0.0.1:0", "--dev")
	d := startCommand(t, cmd)
	addr := strings.TrimPrefix(d.base, "http://")

	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	served := 0
	for i := range floodConns {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: flood\r\n\r\n"); err != nil {
			continue // shed already
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			continue
		}
		_ = resp.Body.Close()
		if resp.StatusCode == 200 {
			served++
		}
	}
	if served < floodConns {
		t.Logf("%d of %d flood connections were served before the cap", served, floodConns)
	}

	// A new connection, under a deadline of one second.
	start := time.Now()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("new connection after the flood: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(start.Add(time.Second))
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatalf("GET /healthz after the flood: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET /healthz after the flood, within 1 s: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /healthz after the flood: %d, want 200", resp.StatusCode)
	}
	t.Logf("GET /healthz on a new connection after %d idle ones: 200 in %s", floodConns, time.Since(start))

	shed := metric(t, d.base, "tally_http_connections_shed_total")
	if shed < floodConns-floodFDLimit {
		t.Errorf("tally_http_connections_shed_total = %v, want at least %d", shed, floodConns-floodFDLimit)
	}
	if s := d.stderr.String(); strings.Contains(s, "too many open files") {
		t.Errorf("tallyd ran out of descriptors:\n%s", s)
	}
}
