package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

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
		case "serve", "migrate", "token", "projection", "retention":
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
		return serve(ctx, c, stdout, stderr)
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
			`{"credentials":[{"name":"dev","token_sha256":%q,"roles":["ingest","read","admin","events"],"platform":"openstack","cloud":%q,"organization":"dev","user":"dev"}]}`,
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

// openStore opens PostgreSQL (after applying pending migrations) when a
// database URL is given, else a new in-memory store. close releases it;
// pg is the PostgreSQL database, nil in memory.
func openStore(ctx context.Context, c config, log *slog.Logger) (st server.Store, close func(), pg *pgstore.DB, err error) {
	kind, err := c.storeKind()
	if err != nil {
		return server.Store{}, nil, nil, err
	}
	if kind == "memory" {
		log.Warn("store: in memory; nothing survives a restart (give --database-url for PostgreSQL)")
		db, err := memstore.New(memstore.Options{})
		if err != nil {
			return server.Store{}, nil, nil, err
		}
		return server.Store{Ingest: db.Ingest(), Projection: db.Projection(), Correlate: db.Correlate(), Reconcile: db.Reconcile()}, func() {}, nil, nil
	}
	db, err := openDatabase(ctx, c)
	if err != nil {
		return server.Store{}, nil, nil, err
	}
	applied, err := db.Migrate(ctx)
	if err != nil {
		db.Close()
		return server.Store{}, nil, nil, err
	}
	log.Info("store: PostgreSQL", "migrations_applied", applied)
	warnInvalidIndexes(ctx, db, func(msg string, names []string) { log.Warn(msg, "indexes", names) })
	st = server.Store{Ingest: db.Ingest(), Projection: db.Projection(), Correlate: db.Correlate(), Reconcile: db.Reconcile(), Ping: db.Ping, FeedLag: db.FeedLag, Leader: db.Leader}
	if c.FeedNotify {
		st.NotifyFeed = db.NotifyFeed
	}
	if c.ReadDatabaseURL == "" {
		return st, db.Close, db, nil
	}
	rc := c
	rc.DatabaseURL = c.ReadDatabaseURL
	replica, err := openDatabase(ctx, rc)
	if err != nil {
		db.Close()
		return server.Store{}, nil, nil, fmt.Errorf("read replica (--read-database-url): %w", err)
	}
	wait := c.DBConnectTimeout
	if wait <= 0 {
		wait = pgstore.DefaultConnectTimeout
	}
	same, err := checkReplica(ctx, replica, db, wait)
	if err != nil {
		replica.Close()
		db.Close()
		return server.Store{}, nil, nil, fmt.Errorf("read replica (--read-database-url): %w", err)
	}
	if same {
		log.Warn("read replica: --read-database-url names the primary's own database; it serves the reads, taking nothing off the primary")
	}
	st.Replica = &server.Replica{Projection: replica.Projection(), Usage: replica.Ingest(), ReplayedAt: replica.ReplayedAt}
	log.Info("read replica: serves the listings of resources, usage, lifecycles and summaries")
	return st, func() { replica.Close(); db.Close() }, db, nil
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
	auth, devToken, err := authenticator(c, log)
	if err != nil {
		return err
	}
	st, closeStore, pg, err := openStore(ctx, c, log)
	if err != nil {
		return err
	}
	defer closeStore() // after the server has shut down: see below

	metrics, err := server.NewMetrics(nil, server.MetricsOptions{Build: server.ReadBuild(version)})
	if err != nil {
		return err
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
	fmt.Fprintf(stdout, "tallyd listening on http://%s\n", ln.Addr())
	if devToken != "" {
		// Printed once; only its hash is kept.
		fmt.Fprintf(stdout, "\n--dev: one token with every role (ingest scope openstack/%s; events organization dev, user dev).\n"+
			"It is for local use only, never for a shared or production server, and lives only in this process.\n"+
			"In another shell:\n\n  export TALLY_SERVER=http://%s\n  export TALLY_TOKEN=%s\n\n", c.DevCloud, ln.Addr(), devToken)
	}
	log.Info("listening", "addr", ln.Addr().String())

	reloadOnSIGHUP(ctx, c.CredentialsFile, auth, metrics, log)
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
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("stopped")
	return nil
}
