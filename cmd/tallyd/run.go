package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tallyhq/tally/cmd/tallyd/server"
	"github.com/tallyhq/tally/store"
	"github.com/tallyhq/tally/store/memstore"
	"github.com/tallyhq/tally/store/pgstore"
)

// run is tallyd without the process around it: args are the command-line
// arguments after the program name, getenv reads the environment, stdout
// gets what a person reads (the address, a --dev token, `token` output),
// stderr the logs. It returns when ctx is cancelled (after a graceful
// shutdown) or on an error.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) == 1 && (args[0] == "--version" || args[0] == "version") {
		_, err := fmt.Fprintln(stdout, server.ReadBuild(version))
		return err
	}
	if len(args) > 0 {
		switch args[0] {
		case "serve", "migrate", "token", "projection", "retention", "healthcheck":
			cmd, args = args[0], args[1:]
		}
	}
	switch cmd {
	case "token":
		if len(args) > 0 {
			if args[0] == "-h" || args[0] == "--help" {
				fmt.Fprintln(stdout, "Usage: tallyd token\n\nPrints a new random bearer token and its sha256 (hex), the value of \"token_sha256\" in the credentials file.")
				return nil
			}
			return fmt.Errorf("%w: token takes no arguments", errUsage)
		}
		return printToken(stdout)
	case "projection":
		return projectionCmd(ctx, args, getenv, stdout)
	case "retention":
		return retentionCmd(ctx, args, getenv, stdout)
	case "healthcheck":
		return healthcheckCmd(ctx, args, getenv, stdout)
	case "migrate":
		c, err := parseConfig("tallyd migrate", args, getenv, stdout)
		if err != nil {
			return err
		}
		return migrate(ctx, c, stdout)
	default:
		c, err := parseConfig("tallyd", args, getenv, stdout)
		if err != nil {
			return err
		}
		err = serve(ctx, c, stdout, stderr)
		if err != nil && c.LogFormat == "json" {
			// Every line on both streams is JSON: the error too, which
			// main then does not print again.
			c.logger(stderr).Error("tallyd stopped", "err", err)
			return loggedError{err}
		}
		return err
	}
}

// loggedError is an error serve's caller logged already (as JSON); main
// exits with its status without printing it.
type loggedError struct{ err error }

func (e loggedError) Error() string { return e.err.Error() }
func (e loggedError) Unwrap() error { return e.err }

// announce prints where tallyd listens and the --dev token, if any, on
// stdout: as text, or with --log-format json as JSON lines (level INFO
// whatever --log-level, for they are not logs to filter out).
func announce(stdout io.Writer, c config, addr net.Addr, devToken string) {
	url := "http://" + addr.String()
	if c.TLSCert != "" {
		url = "https://" + addr.String()
	}
	if c.LogFormat == "json" {
		out := slog.New(slog.NewJSONHandler(stdout, nil))
		out.Info("tallyd listening", "url", url)
		if devToken != "" {
			out.Warn("--dev: one token with every role, for local use only, never for a shared or production server; it lives only in this process",
				"ingest_scope", "openstack/"+c.DevCloud, "organization", "dev", "user", "dev", "TALLY_SERVER", url, "TALLY_TOKEN", devToken)
		}
		return
	}
	fmt.Fprintf(stdout, "tallyd listening on %s\n", url)
	if devToken != "" {
		// Printed once; only its hash is kept.
		fmt.Fprintf(stdout, "\n--dev: one token with every role (ingest scope openstack/%s; events organization dev, user dev).\n"+
			"It is for local use only, never for a shared or production server, and lives only in this process.\n"+
			"In another shell:\n\n  export TALLY_SERVER=%s\n  export TALLY_TOKEN=%s\n\n", c.DevCloud, url, devToken)
	}
}

func printToken(w io.Writer) error {
	token, sum, err := server.NewToken()
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "token: %s\ntoken_sha256: %s\n", token, sum)
	return err
}

// openDatabase opens the PostgreSQL store with the configured pool. A
// database that cannot be reached is reported in one sentence naming the
// connect timeout, so that start fails clearly (the operations rules, Timeouts).
func openDatabase(ctx context.Context, c config) (*pgstore.DB, error) {
	db, err := pgstore.Open(ctx, c.DatabaseURL, c.dbOptions())
	if errors.Is(err, store.ErrUnavailable) {
		timeout := "the URL's connect_timeout, else " + pgstore.DefaultConnectTimeout.String()
		if c.DBConnectTimeout > 0 {
			timeout = c.DBConnectTimeout.String()
		}
		// The cause (a refused connection, or no answer within the
		// timeout) is in err; the sentence must fit both.
		return nil, fmt.Errorf("database unreachable: the connection was refused or got no answer within the connect timeout (%s; --db-connect-timeout): %w", timeout, err)
	}
	return db, err
}

// openMigrated opens the database at url for a command that reads a
// migrated schema (projection rebuild, retention) and refuses, in one
// sentence saying what to do, a schema that is missing or not migrated.
func openMigrated(ctx context.Context, url string) (*pgstore.DB, error) {
	db, err := openDatabase(ctx, config{DatabaseURL: url})
	if err != nil {
		return nil, err
	}
	if err := db.CheckMigrated(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func migrate(ctx context.Context, c config, stdout io.Writer) error {
	if c.DatabaseURL == "" {
		return fmt.Errorf("%w: migrate needs --database-url (or TALLY_DATABASE_URL)", errUsage)
	}
	db, err := openDatabase(ctx, c)
	if err != nil {
		return err
	}
	defer db.Close()
	applied, err := db.Migrate(ctx)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintln(stdout, "schema is current; no migration applied")
	}
	for _, v := range applied {
		fmt.Fprintf(stdout, "applied migration %05d\n", v)
	}
	warnInvalidIndexes(ctx, db, func(msg string, names []string) {
		fmt.Fprintf(stdout, "warning: %s: %s\n", msg, strings.Join(names, ", "))
	})
	return nil
}

// warnInvalidIndexes reports the invalid indexes of db's schema
// ([pgstore.DB.InvalidIndexes]: what a failed CREATE INDEX CONCURRENTLY
// leaves, which a migration's rerun keeps) through warn, and nothing when
// there are none. It is a warning, not a refusal: another replica may be
// building one right now, and the queries still answer, only slower.
func warnInvalidIndexes(ctx context.Context, db *pgstore.DB, warn func(msg string, names []string)) {
	names, err := db.InvalidIndexes(ctx)
	if err != nil || len(names) == 0 {
		return
	}
	warn("invalid indexes (a CREATE INDEX CONCURRENTLY failed midway); the queries they serve read without them: "+
		"DROP INDEX CONCURRENTLY each, then create it as its migration says (docs/operations.md)", names)
}

// authenticator reads the credentials file, or makes the --dev token,
// which it returns so that serve prints it once it listens.
func authenticator(c config, log *slog.Logger) (auth *server.Authenticator, devToken string, err error) {
	switch {
	case c.CredentialsFile != "":
		creds, err := readCredentials(c.CredentialsFile)
		if err != nil {
			return nil, "", err
		}
		if c.Dev {
			log.Warn("--dev is ignored: a credentials file is given")
		}
		auth, err := server.NewAuthenticator(creds, server.AuthenticatorOptions{})
		return auth, "", err
	case c.Dev:
		token, sum, err := server.NewToken()
		if err != nil {
			return nil, "", err
		}
		cred, err := server.ParseCredentials(fmt.Appendf(nil,
			`{"credentials":[{"name":"dev","token_sha256":%q,"roles":["ingest","read","admin","events","reconcile"],"platform":"openstack","cloud":%q,"organization":"dev","user":"dev"}]}`,
			sum, c.DevCloud))
		if err != nil {
			return nil, "", err
		}
		auth, err := server.NewAuthenticator(cred, server.AuthenticatorOptions{})
		return auth, token, err
	default:
		return nil, "", fmt.Errorf("%w: no credentials: give --credentials-file (or TALLY_CREDENTIALS_FILE), or --dev for a local, all-roles token", errUsage)
	}
}

// databases are the PostgreSQL databases serve opened: nil in memory, and
// replica nil without --read-database-url.
type databases struct{ primary, replica *pgstore.DB }

// pools are the connection pools of dbs by the value of their pool label in
// tally_db_pool_*: primary, probe (the readiness probe's, of the primary)
// and replica.
func (dbs databases) pools() map[string]func() server.PoolStats {
	out := map[string]func() server.PoolStats{}
	if dbs.primary != nil {
		out["primary"] = func() server.PoolStats { pool, _ := dbs.primary.PoolStats(); return poolStats(pool) }
		out["probe"] = func() server.PoolStats { _, probe := dbs.primary.PoolStats(); return poolStats(probe) }
	}
	if dbs.replica != nil {
		out["replica"] = func() server.PoolStats { pool, _ := dbs.replica.PoolStats(); return poolStats(pool) }
	}
	return out
}

// poolStats is s as the metrics read it (zero for nil).
func poolStats(s *pgxpool.Stat) server.PoolStats {
	if s == nil {
		return server.PoolStats{}
	}
	return server.PoolStats{
		Acquired: s.AcquiredConns(), Idle: s.IdleConns(), Total: s.TotalConns(), Max: s.MaxConns(),
		Acquires: s.AcquireCount(), AcquireDuration: s.AcquireDuration(),
		EmptyAcquires: s.EmptyAcquireCount(), EmptyAcquireWait: s.EmptyAcquireWaitTime(), CanceledAcquires: s.CanceledAcquireCount(),
		NewConns: s.NewConnsCount(), LifetimeDestroyed: s.MaxLifetimeDestroyCount(), IdleDestroyed: s.MaxIdleDestroyCount(),
	}
}

// logPool logs, once at start, the size and timeouts of db's pool (the
// options over the URL's parameters), so that an operator reads what is in
// force.
func logPool(log *slog.Logger, name string, db *pgstore.DB) {
	pc := db.PoolConfig()
	log.Info("database pool", "pool", name, "max_conns", pc.MaxConns, "min_conns", pc.MinConns,
		"connect_timeout", pc.ConnectTimeout, "acquire_timeout", pc.AcquireTimeout,
		"statement_timeout", pc.StatementTimeout, "idle_in_transaction_timeout", pc.IdleInTxTimeout,
		"max_conn_lifetime", pc.MaxConnLifetime, "max_conn_idle_time", pc.MaxConnIdleTime,
		"application_name", pc.ApplicationName)
}

// openStore opens PostgreSQL (after applying pending migrations) when a
// database URL is given, else a new in-memory store. close releases it;
// dbs are the PostgreSQL databases, none in memory.
func openStore(ctx context.Context, c config, log *slog.Logger) (st server.Store, close func(), dbs databases, err error) {
	kind, err := c.storeKind()
	if err != nil {
		return server.Store{}, nil, databases{}, err
	}
	if kind == "memory" {
		log.Warn("store: in memory; nothing survives a restart (give --database-url for PostgreSQL)")
		db, err := memstore.New(memstore.Options{})
		if err != nil {
			return server.Store{}, nil, databases{}, err
		}
		return server.Store{Ingest: db.Ingest(), Projection: db.Projection(), Correlate: db.Correlate(), Reconcile: db.Reconcile()}, func() {}, databases{}, nil
	}
	db, err := openDatabase(ctx, c)
	if err != nil {
		return server.Store{}, nil, databases{}, err
	}
	applied, err := db.Migrate(ctx)
	if err != nil {
		db.Close()
		return server.Store{}, nil, databases{}, err
	}
	log.Info("store: PostgreSQL", "migrations_applied", applied)
	logPool(log, "primary", db)
	warnInvalidIndexes(ctx, db, func(msg string, names []string) { log.Warn(msg, "indexes", names) })
	st = server.Store{Ingest: db.Ingest(), Projection: db.Projection(), Correlate: db.Correlate(), Reconcile: db.Reconcile(), Ping: db.Ping, FeedLag: db.FeedLag, Leader: db.Leader}
	if c.FeedNotify {
		st.NotifyFeed = db.NotifyFeed
	}
	if c.ReadDatabaseURL == "" {
		return st, db.Close, databases{primary: db}, nil
	}
	rc := c
	rc.DatabaseURL = c.ReadDatabaseURL
	replica, err := openDatabase(ctx, rc)
	if err != nil {
		db.Close()
		return server.Store{}, nil, databases{}, fmt.Errorf("read replica (--read-database-url): %w", err)
	}
	wait := c.DBConnectTimeout
	if wait <= 0 {
		wait = pgstore.DefaultConnectTimeout
	}
	same, err := checkReplica(ctx, replica, db, wait)
	if err != nil {
		replica.Close()
		db.Close()
		return server.Store{}, nil, databases{}, fmt.Errorf("read replica (--read-database-url): %w", err)
	}
	if same {
		log.Warn("read replica: --read-database-url names the primary's own database; it serves the reads, taking nothing off the primary")
	}
	st.Replica = &server.Replica{Projection: replica.Projection(), Usage: replica.Ingest(), ReplayedAt: replica.ReplayedAt}
	log.Info("read replica: serves the listings of resources, usage, lifecycles and summaries")
	logPool(log, "replica", replica)
	return st, func() { replica.Close(); db.Close() }, databases{primary: db, replica: replica}, nil
}

// checkReplica is [pgstore.DB.CheckReplicaOf], waiting up to wait while
// the replica's schema is older: it may still be replaying the migrations
// this process just applied to the primary.
func checkReplica(ctx context.Context, replica, primary *pgstore.DB, wait time.Duration) (same bool, err error) {
	deadline := time.Now().Add(wait)
	for {
		same, err = replica.CheckReplicaOf(ctx, primary)
		if !errors.Is(err, pgstore.ErrSchemaOlder) || time.Now().After(deadline) {
			return same, err
		}
		select {
		case <-ctx.Done():
			return false, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func serve(ctx context.Context, c config, stdout, stderr io.Writer) error {
	log := c.logger(stderr)
	certs, err := c.servingTLS()
	if err != nil {
		return err
	}
	auth, devToken, err := authenticator(c, log)
	if err != nil {
		return err
	}
	st, closeStore, dbs, err := openStore(ctx, c, log)
	if err != nil {
		return err
	}
	defer closeStore() // after the server has shut down: see below
	pg := dbs.primary

	metrics, err := server.NewMetrics(nil, server.MetricsOptions{Build: server.ReadBuild(version)})
	if err != nil {
		return err
	}
	if err := metrics.ObservePools(dbs.pools()); err != nil {
		return err
	}
	if pg != nil {
		if err := metrics.ObserveCreatePipelines(func() server.CreatePipelines {
			st := pg.PipelineStats()
			return server.CreatePipelines{Pipelines: st.Pipelines, Creates: st.Creates, Reruns: st.Reruns, Bypasses: st.Bypasses}
		}); err != nil {
			return err
		}
	}
	h, err := server.New(st, server.Options{
		Authenticator:        auth,
		Logger:               log,
		Metrics:              metrics,
		MaxBodyBytes:         c.MaxBodyBytes,
		BodyBudgetBytes:      c.BodyBudgetBytes,
		BodyBudgetWait:       c.BodyBudgetWait,
		BodyStallTimeout:     c.BodyStallTimeout,
		FeedMaxSubscribers:   c.FeedMaxSubscribers,
		RequireSizeSchema:    c.RequireSizeSchema,
		LegacyCreate200:      c.LegacyCreate200,
		IdempotencyRetention: c.IdempotencyRetention,
		CORSAllowedOrigins:   c.CORSAllowedOrigins,
	})
	if err != nil {
		return err
	}
	if c.FeedNotify && pg != nil {
		// The other replicas' commits wake this one's feeds (pgstore.DB.ListenFeed).
		go func() { _ = pg.ListenFeed(ctx, h.FeedNotify) }()
		log.Info("change feeds: woken by NOTIFY " + pgstore.FeedChannel)
	} else if c.FeedNotify {
		log.Warn("--feed-notify needs PostgreSQL; the in-memory store has no other replicas")
	}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// A connection flood never exhausts the descriptors: at the cap the
	// longest-idle connection is shed for a new one (the hostile-input rules, Connections).
	conns, err := server.NewConnLimiter(server.ConnLimiterOptions{Max: c.MaxConnections})
	if err != nil {
		return err
	}
	log.Info("connections", "max", conns.Max(), "idle_timeout", c.IdleTimeout)
	if err := h.Metrics().ObserveConns(conns); err != nil {
		return err
	}
	ln = conns.Listener(ln)
	srv := &http.Server{
		Handler:           h,
		ConnState:         conns.ConnState,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		WriteTimeout:      2 * time.Minute,
		IdleTimeout:       c.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	// A graceful shutdown ends the change-feed streams (each ends cleanly;
	// its client resumes on another replica with Last-Event-ID), which
	// would otherwise hold it for the whole shutdown timeout.
	srv.RegisterOnShutdown(h.EndStreams)
	if certs != nil {
		srv.TLSConfig = certs.config()
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	announce(stdout, c, ln.Addr(), devToken)
	log.Info("listening", "addr", ln.Addr().String())

	reloadOnSIGHUP(ctx, c.CredentialsFile, auth, certs, metrics, log)
	// tally_current_resources, recomputed from the projection until the
	// server stops; waited for before the store closes (deferred above).
	rctx, stopRefresh := context.WithCancel(ctx)
	refreshed := make(chan struct{})
	go func() { defer close(refreshed); metrics.RunResourcesRefresh(rctx, c.MetricsRefresh, log) }()
	defer func() { stopRefresh(); <-refreshed }()
	// Idempotency keys older than --idempotency-retention are forgotten
	// until the server stops; waited for before the store closes.
	purged := make(chan struct{})
	go func() { defer close(purged); h.RunIdempotencyPurge(rctx, c.IdempotencyRetention, log) }()
	defer func() { stopRefresh(); <-purged }()
	if pg != nil {
		// The partitions of the next months, made ahead at start and
		// hourly (docs/operations.md, Partitions); the metrics of the
		// events table's storage.
		kept := make(chan struct{})
		go func() { defer close(kept); keepPartitionsAhead(rctx, pg, time.Hour, log) }()
		defer func() { stopRefresh(); <-kept }()
		if err := metrics.ObserveEventStorage(eventStorage(pg), log); err != nil {
			return err
		}
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}

	// Graceful shutdown: first drain (/readyz 503 while every route still
	// serves, so that a load balancer stops routing here), then stop
	// accepting, let in-flight requests finish (each writes its batch
	// whole or not at all), then close the store.
	if c.ShutdownDelay > 0 {
		h.Drain()
		log.Info("draining: /readyz answers 503 until the listener closes", "delay_seconds", c.ShutdownDelay.Seconds())
		select {
		case <-time.After(c.ShutdownDelay):
		case err := <-served:
			return fmt.Errorf("serve: %w", err)
		}
	}
	log.Info("shutting down", "timeout", c.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), c.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	// The change-feed streams run on hijacked connections, which Shutdown
	// does not wait for: EndStreams (its hook) ended them; each closes its
	// connection before the store closes.
	if err := h.WaitStreams(sctx); err != nil {
		log.Warn("shutting down: change-feed streams still open", "err", err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("stopped")
	return nil
}
