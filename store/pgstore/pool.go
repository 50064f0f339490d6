package pgstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/tallyhq/tally/internal/netpeek"
	"github.com/tallyhq/tally/store"
)

// Defaults of the pool [Open] makes, each used when neither the Options nor
// the URL set the value. The reasoning is in the README, section Operations.
const (
	// DefaultMaxConns is the most connections the pool opens: ingestion,
	// correlation and the read routes share them. A commit waits mostly
	// for PostgreSQL's write-ahead-log flush, during which the connection
	// does nothing, so throughput grows with concurrent transactions well
	// past the server's core count (commits that flush together are
	// grouped); 16 per replica leaves four replicas within PostgreSQL's
	// default max_connections of 100.
	DefaultMaxConns = 16
	// DefaultConnectTimeout bounds making one connection (TCP, TLS,
	// authentication): a database address that accepts and never answers
	// fails Open within it, with a clear error, instead of hanging.
	DefaultConnectTimeout = 5 * time.Second
	// DefaultStatementTimeout is PostgreSQL's statement_timeout on every
	// connection of the pool: a statement that waits on a lock or runs
	// longer is cancelled by the server (SQLSTATE 57014), its transaction
	// rolls back, and the store returns store.ErrUnavailable, which the
	// HTTP adapters answer 503 with Retry-After. A 1000-event batch
	// commits in well under a second; 10 s is generous for it and shorter
	// than a collector's typical 30 s request timeout, so the client gets
	// an answer it can act on.
	DefaultStatementTimeout = 10 * time.Second
	// DefaultAcquireTimeout bounds how long a store call waits for a free
	// connection of the pool (Options.AcquireTimeout). A healthy pool
	// hands one out far sooner even under load (README, Operations: a
	// whole createEvent request's p99 measured 554 ms with 32 producers
	// on 16 connections, 1019 ms on 4); a wait of seconds means the
	// connections are stuck (behind a lock, on a slow server) and a longer
	// queue only grows. 5 s sheds such a request with 503 and Retry-After,
	// so the client backs off or the load balancer tries another replica,
	// and keeps wait plus one statement (10 s) within a collector's
	// typical 30 s request timeout.
	DefaultAcquireTimeout = 5 * time.Second
	// DefaultIdleInTransactionTimeout is PostgreSQL's
	// idle_in_transaction_session_timeout on every connection of the
	// pool (Options.IdleInTransactionTimeout): a session that sits inside
	// an open transaction sending nothing for longer (its process was
	// stopped with SIGSTOP, or hung between two statements) is ended by
	// the server, its transaction rolled back and its row locks released,
	// so other replicas' writes to the same rows proceed. tally sends a
	// transaction's statements back to back; 30 s is far longer than any
	// gap between them and bounds how long one stuck replica blocks the
	// others to a few statement timeouts.
	DefaultIdleInTransactionTimeout = 30 * time.Second
	// probeTimeout bounds one readiness ping on the probe connection.
	probeTimeout = 2 * time.Second
)

// poolConfig parses url and applies o over it: an Options value that is not
// zero wins, then the URL's own parameter (pool_max_conns, connect_timeout,
// statement_timeout), then the default. Every connection is checked when it
// is taken from the pool (see checkOnAcquire).
func poolConfig(rawURL string, o Options) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("pgstore: parse database url: %w", err)
	}
	params := urlParams(rawURL)
	switch {
	case o.MaxConns < 0:
		return nil, fmt.Errorf("pgstore: MaxConns %d: must not be negative", o.MaxConns)
	case o.MaxConns > 0:
		cfg.MaxConns = o.MaxConns
	case params["pool_max_conns"] == "":
		cfg.MaxConns = DefaultMaxConns
	}
	switch {
	case o.ConnectTimeout < 0:
		return nil, fmt.Errorf("pgstore: ConnectTimeout %s: must not be negative", o.ConnectTimeout)
	case o.ConnectTimeout > 0:
		cfg.ConnConfig.ConnectTimeout = o.ConnectTimeout
	case cfg.ConnConfig.ConnectTimeout == 0:
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	switch {
	case o.StatementTimeout < 0:
		delete(cfg.ConnConfig.RuntimeParams, "statement_timeout")
	case o.StatementTimeout > 0:
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(o.StatementTimeout.Milliseconds(), 10)
	case cfg.ConnConfig.RuntimeParams["statement_timeout"] == "":
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(DefaultStatementTimeout.Milliseconds(), 10)
	}
	isoDateStyle(cfg.ConnConfig.RuntimeParams)
	const idleTx = "idle_in_transaction_session_timeout"
	switch {
	case o.IdleInTransactionTimeout < 0:
		delete(cfg.ConnConfig.RuntimeParams, idleTx)
	case o.IdleInTransactionTimeout > 0:
		ms := o.IdleInTransactionTimeout.Milliseconds()
		if ms == 0 {
			ms = 1 // 0 would mean none to PostgreSQL
		}
		cfg.ConnConfig.RuntimeParams[idleTx] = strconv.FormatInt(ms, 10)
	case cfg.ConnConfig.RuntimeParams[idleTx] == "":
		cfg.ConnConfig.RuntimeParams[idleTx] = strconv.FormatInt(DefaultIdleInTransactionTimeout.Milliseconds(), 10)
	}
	// pg_stat_activity names the program on every connection; the URL's
	// own application_name wins. The probe, leader and listener
	// connections copy this configuration.
	if o.ApplicationName != "" && cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = o.ApplicationName
	}
	// The operations rules, Stale connections: after a PostgreSQL restart every pooled
	// connection is broken, and under load none is idle long enough for
	// pgxpool's default check (a ping after 1 s idle). checkOnAcquire finds
	// such a connection before any statement is sent, discards it and takes
	// (or makes) another, so the first request after the database is back
	// succeeds.
	cfg.ShouldPing = checkOnAcquire
	cfg.PingTimeout = cfg.ConnConfig.ConnectTimeout
	// A server that vanishes without closing (a partition) leaves a quiet
	// socket, which checkOnAcquire hands out; TCP_USER_TIMEOUT fails the
	// statement sent on it within tcpUserTimeout, answered 503 like any
	// connection failure, instead of after TCP's retransmissions.
	// A client host that vanishes (its replica's machine lost power) would
	// leave the server holding its session, and any locks, until the
	// server's own keepalives notice (about 2 h 11 min with the defaults);
	// keepalives from this side, keepAlive, keep intermediaries from
	// dropping a quiet connection and find a dead server within about a
	// minute.
	d := &net.Dialer{Timeout: cfg.ConnConfig.ConnectTimeout, Control: setUserTimeout, KeepAliveConfig: keepAlive}
	cfg.ConnConfig.DialFunc = d.DialContext
	return cfg, nil
}

// keepAlive is the TCP keepalive of every connection the pool dials: the
// first probe after 30 s without traffic, then every 10 s, the connection
// failing after 3 unanswered probes (about 60 s in all).
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 10 * time.Second, Count: 3}

// tcpUserTimeout is how long data sent to the server may stay
// unacknowledged by its host before the connection fails (Linux). A live
// server's kernel acknowledges within milliseconds whatever PostgreSQL is
// doing; 10 s is longer than TCP's first five retransmissions on a lossy
// link and as long as the default statement timeout.
const tcpUserTimeout = 10 * time.Second

// pingAfterIdle is how long a connection may sit in the pool before it is
// pinged when taken, whatever its socket says: pgxpool's own default. A
// peer that vanished without closing the connection (a network partition)
// leaves nothing to read, so only a round trip finds it.
const pingAfterIdle = time.Second

// quiet reports whether c, a connection idle between statements, has
// nothing to read, without waiting and without sending anything
// (internal/netpeek). A connection PostgreSQL has closed (a restart,
// pg_terminate_backend, an idle-session timeout) is readable: the server's
// FATAL message or the end of the stream is waiting on it, so quiet is
// false. A TLS connection is peeked at on the TCP connection beneath it:
// an idle one has no record in flight either. Anything that cannot be
// peeked at (every connection where the platform has no such peek) is not
// quiet, so checkOnAcquire pings it.
func quiet(c net.Conn) bool { return netpeek.Peek(c) == netpeek.Quiet }

// checkOnAcquire is the pool's ShouldPing: a connection taken from the pool
// is pinged when it has been idle for pingAfterIdle or more, or when its
// socket is not quiet (see quiet): a connection that PostgreSQL closed, on
// a restart or pg_terminate_backend, has the server's FATAL message or the
// end of its stream waiting, so the ping fails and pgxpool replaces it.
// A busy pool's connections are quiet and recent, and go out without the
// round trip: the performance work measured the ping on every acquire at about 8 % of
// tallyd's CPU per correlated create, and one more statement for the
// database per acquire.
func checkOnAcquire(_ context.Context, p pgxpool.ShouldPingParams) bool {
	return p.IdleDuration >= pingAfterIdle || !quiet(p.Conn.PgConn().Conn())
}

// probeConfig is the configuration of the readiness probe's own pool: one
// connection, so that a ping never queues behind request traffic for the
// main pool, checked like the main pool's.
func probeConfig(cfg *pgxpool.Config) *pgxpool.Config {
	p := cfg.Copy()
	p.MaxConns = 1
	p.MinConns = 0
	p.MinIdleConns = 0
	p.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(probeTimeout.Milliseconds(), 10)
	return p
}

// urlParams returns the parameters of a postgres:// URL's query or of a
// key=value connection string, as written (nil when unparsable; pgx
// reports that).
func urlParams(raw string) map[string]string {
	out := map[string]string{}
	if strings.HasPrefix(raw, "postgres://") || strings.HasPrefix(raw, "postgresql://") {
		u, err := url.Parse(raw)
		if err != nil {
			return nil
		}
		for k, v := range u.Query() {
			out[k] = v[len(v)-1]
		}
		return out
	}
	for _, f := range strings.Fields(raw) {
		if k, v, ok := strings.Cut(f, "="); ok {
			out[k] = strings.Trim(v, "'")
		}
	}
	return out
}

// errAcquireTimeout is the cause of the context that bounds the wait for a
// connection, which tells that bound's expiry from the caller's ctx's.
var errAcquireTimeout = errors.New("pgstore: acquire timeout")

// acquireTimeout resolves Options.AcquireTimeout: zero is the default,
// negative none (0).
func acquireTimeout(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return DefaultAcquireTimeout
	case d < 0:
		return 0
	}
	return d
}

// boundAcquire runs acquire (which takes a connection of the pool) with ctx
// bounded by the acquire timeout d (none when 0). When the bound, not ctx,
// ended the wait, the error wraps store.ErrUnavailable; the connection acquire
// returns is not tied to the bounded context, so the caller then uses it
// under ctx alone.
func boundAcquire[T any](ctx context.Context, d time.Duration, acquire func(context.Context) (T, error)) (T, error) {
	if d <= 0 {
		return acquire(ctx)
	}
	actx, cancel := context.WithTimeoutCause(ctx, d, errAcquireTimeout)
	defer cancel()
	c, err := acquire(actx)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(actx), errAcquireTimeout) {
		return c, fmt.Errorf("pgstore: no connection of the pool was free within the acquire timeout (%s): %w", d, store.ErrUnavailable)
	}
	return c, err
}

// acquireConn takes a connection of the pool for the pgx-direct paths
// (Commit's and Projection.Rebuild's transactions), waiting at most the
// acquire timeout. The caller releases it.
func (c *conn) acquireConn(ctx context.Context) (*pgxpool.Conn, error) {
	return boundAcquire(ctx, c.acquire, c.pool.Acquire)
}

// openDB is the database/sql handle on c.pool that sqlx uses, as
// stdlib.OpenDBFromPool makes it (no idle connections of its own: every
// call takes a connection of the pool and gives it back), except that the
// connector bounds the wait for a connection by the acquire timeout.
func (c *conn) openDB() *sql.DB {
	db := sql.OpenDB(boundedConnector{stdlib.GetPoolConnector(c.pool), c.acquire})
	db.SetMaxIdleConns(0)
	return db
}

// boundedConnector is a driver.Connector whose Connect (which takes a
// connection of the pool) waits at most d.
type boundedConnector struct {
	driver.Connector
	d time.Duration
}

// Connect implements driver.Connector.
func (b boundedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	return boundAcquire(ctx, b.d, b.Connector.Connect)
}

// isoDateStyle sets the session's DateStyle to ISO output, keeping the
// field order (DMY, MDY, YMD) the URL gives, else the server's: the
// partitions' bounds are read back from pg_get_expr's text, which
// follows DateStyle (German, SQL and Postgres print no offset).
func isoDateStyle(params map[string]string) {
	order := ""
	for k, v := range params {
		if !strings.EqualFold(k, "datestyle") {
			continue
		}
		delete(params, k)
		for _, o := range []string{"DMY", "MDY", "YMD"} {
			if strings.Contains(strings.ToUpper(v), o) {
				order = ", " + o
			}
		}
	}
	params["datestyle"] = "ISO" + order
}
