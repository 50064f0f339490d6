package server

import (
	"container/list"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultIdleTimeout is how long tallyd keeps an idle keep-alive connection
// open: 30 s (the hostile-input rules, Connections: "Shorten the idle timeout from today's
// 2 minutes"). Collectors that send every few seconds keep theirs; an idle
// one costs a descriptor for at most this long, and is shed sooner at the
// connection cap.
const DefaultIdleTimeout = 30 * time.Second

// newConnGrace is how long a connection that has sent no request yet is
// spared from shedding at the cap (1 s): long enough for a real client to
// send its request line, short enough that silent connections cannot hold
// the cap.
const newConnGrace = time.Second

// DefaultMaxConns returns the connection cap tallyd uses when none is
// configured, derived from the process's descriptor limit (RLIMIT_NOFILE,
// the soft limit, which the Go runtime raises to the hard one at start):
// the limit minus a reserve of one eighth of it (at least 64) for
// everything else the process opens (the listener, the database pool, log
// files). A limit of 2,048 gives 1,792; 1,024 gives 896; 65,536 gives
// 57,344. When the limit cannot be read, 1,024.
func DefaultMaxConns() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == 0 {
		return 1024
	}
	n := lim.Cur
	if n > 1<<30 {
		n = 1 << 30
	}
	reserve := max(n/8, 64)
	if n <= reserve {
		return 1
	}
	return int(n - reserve)
}

// ConnLimiter caps the concurrent connections of an http.Server (the hostile-input rules,
// Connections: "a connection flood never exhausts the process's
// descriptors"). Wrap the listener with [ConnLimiter.Listener] and set the
// server's ConnState to [ConnLimiter.ConnState]. When a new connection
// arrives at the cap, the limiter closes the connection idle the longest (a keep-alive connection between requests, or one that has sent
// nothing for 1 s), so a flood of idle connections never starves a new
// request such as GET /healthz; when every connection is busy with a
// request, the new connection waits for one to close (further ones wait in
// the kernel's backlog). Open connections are never more than the cap plus
// the one being admitted. Safe for concurrent use.
type ConnLimiter struct {
	max int

	mu     sync.Mutex
	cond   *sync.Cond
	open   int                        // connections accepted and not yet closed
	idle   *list.List                 // of *limitedConn, idle or new, oldest first
	states map[*limitedConn]*connInfo // every open connection

	shed atomic.Int64
}

type connInfo struct {
	state http.ConnState
	since time.Time
	elem  *list.Element // in idle, when idle or new
}

// ConnLimiterOptions configures [NewConnLimiter].
type ConnLimiterOptions struct {
	// Max caps the connections open at once; 0 means [DefaultMaxConns]();
	// it must not be negative.
	Max int
}

// NewConnLimiter returns a limiter of opts.Max connections. Errors: a
// negative Max.
func NewConnLimiter(opts ConnLimiterOptions) (*ConnLimiter, error) {
	var errs []error
	if opts.Max < 0 {
		errs = append(errs, fmt.Errorf("server: ConnLimiterOptions.Max (%d) is negative", opts.Max))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	max := opts.Max
	if max == 0 {
		max = DefaultMaxConns()
	}
	l := &ConnLimiter{max: max, idle: list.New(), states: map[*limitedConn]*connInfo{}}
	l.cond = sync.NewCond(&l.mu)
	return l, nil
}

// Max is the cap.
func (l *ConnLimiter) Max() int { return l.max }

// Open is the number of connections open now.
func (l *ConnLimiter) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// Shed is the number of idle connections closed to make room so far.
func (l *ConnLimiter) Shed() int64 { return l.shed.Load() }

// Listener returns ln limited to the cap.
func (l *ConnLimiter) Listener(ln net.Listener) net.Listener {
	return &limitedListener{Listener: ln, l: l}
}

// ConnState is the http.Server.ConnState hook that tells the limiter which
// connections are idle. A program with its own hook calls this one from it.
// A hijacked connection (a change-feed stream over HTTP/1.x) gets no more
// states from net/http: it stays counted, and is never shed, until whoever
// took it over closes it (a *tls.Conn closes the limited connection
// beneath it).
func (l *ConnLimiter) ConnState(c net.Conn, s http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn() // the server's TLS over the limited listener
	}
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	info, ok := l.states[lc]
	if !ok {
		return // closed already
	}
	if info.elem != nil {
		l.idle.Remove(info.elem)
		info.elem = nil
	}
	info.state, info.since = s, time.Now()
	if s == http.StateIdle || s == http.StateNew {
		info.elem = l.idle.PushBack(lc)
	}
}

// admit counts a newly accepted connection and, while the count is over
// the cap, sheds the idle connection of longest standing or waits for a
// place. The new connection itself holds a descriptor meanwhile: at most
// one over the cap, since the server accepts one at a time.
func (l *ConnLimiter) admit(lc *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open++
	for l.open > l.max {
		if victim := l.sheddable(); victim != nil {
			l.forget(victim)
			l.shed.Add(1)
			l.mu.Unlock()
			_ = victim.Conn.Close()
			l.mu.Lock()
			continue
		}
		l.cond.Wait()
	}
	info := &connInfo{state: http.StateNew, since: time.Now()}
	info.elem = l.idle.PushBack(lc)
	l.states[lc] = info
}

// sheddable returns the idle connection of longest standing, or a new one
// silent for longer than newConnGrace; nil when none. l.mu is held.
func (l *ConnLimiter) sheddable() *limitedConn {
	now := time.Now()
	for e := l.idle.Front(); e != nil; e = e.Next() {
		lc := e.Value.(*limitedConn)
		info := l.states[lc]
		if info.state == http.StateIdle || now.Sub(info.since) > newConnGrace {
			return lc
		}
	}
	return nil
}

// forget removes lc from the books and frees its place. l.mu is held.
func (l *ConnLimiter) forget(lc *limitedConn) {
	info, ok := l.states[lc]
	if !ok {
		return
	}
	if info.elem != nil {
		l.idle.Remove(info.elem)
	}
	delete(l.states, lc)
	l.open--
	l.cond.Broadcast()
}

type limitedListener struct {
	net.Listener
	l *ConnLimiter
}

func (ll *limitedListener) Accept() (net.Conn, error) {
	c, err := ll.Listener.Accept()
	if err != nil {
		return nil, err
	}
	lc := &limitedConn{Conn: c, l: ll.l}
	ll.l.admit(lc)
	return lc, nil
}

type limitedConn struct {
	net.Conn
	l    *ConnLimiter
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.forget(c)
		c.l.mu.Unlock()
	})
	return err
}

// SyscallConn reaches the socket beneath, when there is one: a change-feed
// stream on a hijacked connection looks for its client's departure with a
// non-blocking peek at it (internal/netpeek), which sees nothing through a
// wrapper without this method.
func (c *limitedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// CloseWrite half-closes the connection when the underlying one can, as
// net/http does before closing a connection it answered with an error.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
