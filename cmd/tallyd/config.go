package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/tallyhq/tally/cmd/tallyd/server"
	"github.com/tallyhq/tally/route"
	"github.com/tallyhq/tally/store/pgstore"
)

// errUsage marks a command-line or environment mistake (exit status 2).
var errUsage = errors.New("usage")

// config is the server's configuration, from flags, then TALLY_*
// environment variables, then defaults.
type config struct {
	Listen               string
	TLSCert, TLSKey      string
	AllowPlaintext       bool
	DatabaseURL          string
	ReadDatabaseURL      string
	Store                string
	DBMaxConns           int
	DBConnectTimeout     time.Duration
	DBStatementTimeout   time.Duration
	DBIdleInTxTimeout    time.Duration
	DBAcquireTimeout     time.Duration
	CredentialsFile      string
	Dev                  bool
	DevCloud             string
	RequireSizeSchema    bool
	LegacyCreate200      bool
	FeedNotify           bool
	IdempotencyRetention time.Duration
	MaxBodyBytes         int64
	BodyBudgetBytes      int64
	BodyBudgetWait       time.Duration
	BodyStallTimeout     time.Duration
	MaxConnections       int
	IdleTimeout          time.Duration
	FeedMaxSubscribers   int
	CORSAllowedOrigins   []string
	LogFormat            string
	LogLevel             slog.Level
	ShutdownTimeout      time.Duration
	ShutdownDelay        time.Duration
	MetricsRefresh       time.Duration
}

// flagEnv pairs each flag with its environment fallback, in --help order.
var flagEnv = []struct{ flag, env string }{
	{"listen", "TALLY_LISTEN"},
	{"tls-cert", "TALLY_TLS_CERT"},
	{"tls-key", "TALLY_TLS_KEY"},
	{"allow-plaintext", "TALLY_ALLOW_PLAINTEXT"},
	{"database-url", "TALLY_DATABASE_URL"},
	{"read-database-url", "TALLY_READ_DATABASE_URL"},
	{"store", "TALLY_STORE"},
	{"db-max-conns", "TALLY_DB_MAX_CONNS"},
	{"db-connect-timeout", "TALLY_DB_CONNECT_TIMEOUT"},
	{"db-statement-timeout", "TALLY_DB_STATEMENT_TIMEOUT"},
	{"db-idle-in-transaction-timeout", "TALLY_DB_IDLE_IN_TRANSACTION_TIMEOUT"},
	{"db-acquire-timeout", "TALLY_DB_ACQUIRE_TIMEOUT"},
	{"credentials-file", "TALLY_CREDENTIALS_FILE"},
	{"dev", "TALLY_DEV"},
	{"dev-cloud", "TALLY_DEV_CLOUD"},
	{"require-size-schema", "TALLY_INGEST_REQUIRE_SIZE_SCHEMA"},
	{"events-legacy-create-200", "TALLY_EVENTS_LEGACY_CREATE_200"},
	{"feed-notify", "TALLY_FEED_NOTIFY"},
	{"idempotency-retention", "TALLY_IDEMPOTENCY_RETENTION"},
	{"max-body-bytes", "TALLY_MAX_BODY_BYTES"},
	{"body-budget-bytes", "TALLY_BODY_BUDGET_BYTES"},
	{"body-budget-wait", "TALLY_BODY_BUDGET_WAIT"},
	{"body-stall-timeout", "TALLY_BODY_STALL_TIMEOUT"},
	{"max-connections", "TALLY_MAX_CONNECTIONS"},
	{"idle-timeout", "TALLY_IDLE_TIMEOUT"},
	{"feed-max-subscribers", "TALLY_FEED_MAX_SUBSCRIBERS"},
	{"cors-allowed-origins", "TALLY_CORS_ALLOWED_ORIGINS"},
	{"log-format", "TALLY_LOG_FORMAT"},
	{"log-level", "TALLY_LOG_LEVEL"},
	{"shutdown-timeout", "TALLY_SHUTDOWN_TIMEOUT"},
	{"shutdown-delay", "TALLY_SHUTDOWN_DELAY"},
	{"metrics-refresh-interval", "TALLY_METRICS_REFRESH_INTERVAL"},
}

const usageHead = `tallyd is tally's reference server.

Usage:
  tallyd [serve] [flags]   serve the HTTP API (the default)
  tallyd migrate [flags]   apply pending PostgreSQL migrations, print their versions, exit
  tallyd token             print a new random token and its sha256 for the credentials file
  tallyd projection rebuild [--cloud C] [--resource-type T]
                           recompute the projection of current resources from the events
  tallyd retention [--keep-events D] [--keep-dead-letters D] [--keep-audit D]
                   [--keep-idempotency-keys D] [--keep-deleted-events D]
                           drop what is older than each horizon, once (docs/operations.md, Retention)
  tallyd healthcheck [--url URL]
                           GET /healthz of a running tallyd; exit 0 on 200 (a container HEALTHCHECK)

Every flag has an environment fallback, named after it. Precedence:
a flag on the command line > its TALLY_* environment variable > the default.

Flags:
`

// minIdempotencyRetention is the shortest --idempotency-retention accepted
// (besides 0, forever).
const minIdempotencyRetention = time.Hour

// parseConfig reads args (after the subcommand) and the environment through
// getenv. --help prints the usage to stdout and returns pflag.ErrHelp.
func parseConfig(name string, args []string, getenv func(string) string, stdout io.Writer) (config, error) {
	var c config
	fs, raw := c.flagSet(name)
	help := fs.BoolP("help", "h", false, "print this help")

	// The environment first, then the command line over it: flag > env >
	// default.
	if err := setFromEnv(fs, getenv); err != nil {
		return c, fmt.Errorf("%w: %w", errUsage, err)
	}
	if err := fs.Parse(args); err != nil {
		return c, fmt.Errorf("%w: %w (see --help)", errUsage, err)
	}
	if *help {
		fmt.Fprint(stdout, usageHead+fs.FlagUsages())
		return c, pflag.ErrHelp
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("%w: unexpected argument %q (see --help)", errUsage, fs.Arg(0))
	}
	c.CORSAllowedOrigins = splitOrigins(raw.origins)
	if err := errors.Join(c.check(raw.logLevel)...); err != nil {
		return c, fmt.Errorf("%w: %w", errUsage, err)
	}
	return c, nil
}

// rawFlags are the flags read as text and turned into c's fields after the
// parse.
type rawFlags struct {
	origins, logLevel string
}

// flagSet defines every flag of flagEnv, in that order, each writing to its
// field of c (or of the rawFlags returned), with its environment variable
// in its usage.
func (c *config) flagSet(name string) (*pflag.FlagSet, *rawFlags) {
	var (
		raw       rawFlags
		origins   = &raw.origins
		logLevel  = &raw.logLevel
		fs        = pflag.NewFlagSet(name, pflag.ContinueOnError)
		envByFlag = map[string]string{}
	)
	for _, fe := range flagEnv {
		envByFlag[fe.flag] = fe.env
	}
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	usage := func(text string, flag string) string { return text + " (env " + envByFlag[flag] + ")" }
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:8080", usage("address to listen on, host:port", "listen"))
	fs.StringVar(&c.TLSCert, "tls-cert", "", usage("PEM certificate chain to serve HTTPS with (with --tls-key); read again on SIGHUP", "tls-cert"))
	fs.StringVar(&c.TLSKey, "tls-key", "", usage("PEM private key of --tls-cert; read again on SIGHUP", "tls-key"))
	fs.BoolVar(&c.AllowPlaintext, "allow-plaintext", false, usage("serve plain HTTP on a --listen address other hosts reach, because TLS ends at a proxy or load balancer in front of tallyd; without it (or --tls-cert) tallyd refuses to take bearer tokens in clear on a non-loopback address", "allow-plaintext"))
	fs.StringVar(&c.DatabaseURL, "database-url", "", usage("PostgreSQL URL (the store; migrations are applied on start)", "database-url"))
	fs.StringVar(&c.ReadDatabaseURL, "read-database-url", "", usage("PostgreSQL URL of a streaming replica of --database-url that serves the listings of resources, usage, lifecycles and summaries (answers say Tally-As-Of; the primary answers when the replica is down or behind); empty: the primary serves every route", "read-database-url"))
	fs.StringVar(&c.Store, "store", "", usage("the store: postgres (needs --database-url) or memory (nothing survives a restart); empty: postgres with --database-url, memory with --dev, else tallyd refuses to start", "store"))
	fs.IntVar(&c.DBMaxConns, "db-max-conns", 0, usage("PostgreSQL connections per process at most, shared by every route; 0: the URL's pool_max_conns, else 16", "db-max-conns"))
	fs.DurationVar(&c.DBConnectTimeout, "db-connect-timeout", 0, usage("how long making one PostgreSQL connection may take (start fails after it); 0: the URL's connect_timeout, else 5s", "db-connect-timeout"))
	fs.DurationVar(&c.DBStatementTimeout, "db-statement-timeout", 0, usage("PostgreSQL statement_timeout: a statement waiting or running longer is cancelled and its request answered 503; 0: the URL's statement_timeout, else 10s; negative: none", "db-statement-timeout"))
	fs.DurationVar(&c.DBIdleInTxTimeout, "db-idle-in-transaction-timeout", 0, usage("PostgreSQL idle_in_transaction_session_timeout: a session idle inside an open transaction longer (a stopped or hung replica) is ended by the server and its locks released; 0: the URL's idle_in_transaction_session_timeout, else "+pgstore.DefaultIdleInTransactionTimeout.String()+"; negative: none", "db-idle-in-transaction-timeout"))
	fs.DurationVar(&c.DBAcquireTimeout, "db-acquire-timeout", 0, usage("how long a request waits for a free PostgreSQL connection of the pool before it is answered 503; 0: "+pgstore.DefaultAcquireTimeout.String()+"; negative: as long as the request lasts", "db-acquire-timeout"))
	fs.StringVar(&c.CredentialsFile, "credentials-file", "", usage("JSON credentials file (see README); required unless --dev", "credentials-file"))
	fs.BoolVar(&c.Dev, "dev", false, usage("without a credentials file, create one token with every role, print it once; for local use only", "dev"))
	fs.StringVar(&c.DevCloud, "dev-cloud", "os-dev", usage("cloud of the --dev token's ingest scope (platform openstack)", "dev-cloud"))
	fs.BoolVar(&c.RequireSizeSchema, "require-size-schema", false, usage("refuse events whose (platform, resource_type) has no size schema instead of accepting payload.size unvalidated", "require-size-schema"))
	fs.BoolVar(&c.FeedNotify, "feed-notify", false, usage("with PostgreSQL, wake the change feeds of the other replicas after each commit (NOTIFY tally_feed, sent after the commit, coalesced); off, they find new items by polling every 500 ms. Leave it off behind PgBouncer in transaction mode, which does not carry LISTEN", "feed-notify"))
	fs.BoolVar(&c.LegacyCreate200, "events-legacy-create-200", false, usage("answer a legacy createEvent (neither correlationKey nor idempotencyKey) 200 instead of 201, as released Meshery Servers require of their remote provider", "events-legacy-create-200"))
	fs.DurationVar(&c.IdempotencyRetention, "idempotency-retention", 0, usage("how long a createEvent idempotencyKey replays; older keys are forgotten (purged every quarter of it, 1m to 1h apart) and a create with one has its effect anew; 0: every key is kept forever", "idempotency-retention"))
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", route.DefaultMaxBodyBytes, usage("largest request body accepted, in bytes, as sent and as decoded (Content-Encoding); larger → 413", "max-body-bytes"))
	fs.Int64Var(&c.BodyBudgetBytes, "body-budget-bytes", server.DefaultBodyBudgetBytes, usage("request body bytes all requests may hold at once; at least --max-body-bytes; beyond it a request waits --body-budget-wait, then 503", "body-budget-bytes"))
	fs.DurationVar(&c.BodyBudgetWait, "body-budget-wait", server.DefaultBodyBudgetWait, usage("how long a request body waits for the budget before 503 with Retry-After", "body-budget-wait"))
	fs.DurationVar(&c.BodyStallTimeout, "body-stall-timeout", server.DefaultBodyStallTimeout, usage("a request body from which no byte arrives for this long is answered 408 body_timeout and its share of the budget given back; a slow body that keeps arriving is not cut off", "body-stall-timeout"))
	fs.IntVar(&c.MaxConnections, "max-connections", 0, usage("concurrent connections at most; at the cap the longest-idle keep-alive connection is closed to make room; 0 derives it from the descriptor limit (the limit minus one eighth, at least 64 kept back)", "max-connections"))
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", server.DefaultIdleTimeout, usage("how long an idle keep-alive connection is kept open", "idle-timeout"))
	fs.IntVar(&c.FeedMaxSubscribers, "feed-max-subscribers", server.DefaultFeedMaxSubscribers, usage("Server-Sent Events subscribers of both change feeds together at most (GET /api/v1/events/feed as text/event-stream, GET /api/events/subscribe); one more is answered 503 busy with Retry-After; each also holds a connection; 0: "+strconv.Itoa(server.DefaultFeedMaxSubscribers), "feed-max-subscribers"))
	fs.StringVar(origins, "cors-allowed-origins", "", usage(`comma-separated origins allowed to call the API from a browser ("*" for any); empty: no CORS`, "cors-allowed-origins"))
	fs.StringVar(&c.LogFormat, "log-format", "text", usage("log format: text or json", "log-format"))
	fs.StringVar(logLevel, "log-level", "info", usage("log level: debug, info, warn or error", "log-level"))
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 30*time.Second, usage("on SIGINT/SIGTERM, how long in-flight requests may take to finish", "shutdown-timeout"))
	fs.DurationVar(&c.ShutdownDelay, "shutdown-delay", 0, usage("on SIGINT/SIGTERM, how long /readyz answers 503 while every route still serves, before the listener closes (so that a load balancer stops sending first); 0: close at once", "shutdown-delay"))
	fs.DurationVar(&c.MetricsRefresh, "metrics-refresh-interval", server.DefaultResourcesRefreshInterval, usage("how often the gauge tally_current_resources is recomputed from the projection (one aggregate query)", "metrics-refresh-interval"))
	return fs, &raw
}

// setFromEnv sets each flag of flagEnv whose environment variable is set
// (not empty), and returns every value the flag refuses at once, each
// naming its variable.
func setFromEnv(fs *pflag.FlagSet, getenv func(string) string) error {
	var errs []error
	for _, fe := range flagEnv {
		if v := getenv(fe.env); v != "" {
			if err := fs.Set(fe.flag, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %v", fe.env, v, err))
			}
		}
	}
	return errors.Join(errs...)
}

// splitOrigins splits --cors-allowed-origins at commas, dropping white space
// around each origin and empty ones; nil when none is left.
func splitOrigins(origins string) []string {
	var out []string
	for _, o := range strings.Split(origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			out = append(out, o)
		}
	}
	return out
}

// check sets c.LogLevel from logLevel and returns every value of c out of
// its range, each group in turn.
func (c *config) check(logLevel string) []error {
	var errs []error
	errs = append(errs, c.checkLog(logLevel)...)
	errs = append(errs, c.checkTLS()...)
	errs = append(errs, c.checkBody()...)
	errs = append(errs, c.checkConnections()...)
	errs = append(errs, c.checkDatabase()...)
	errs = append(errs, c.checkRetention()...)
	errs = append(errs, c.checkIntervals()...)
	if c.Dev && c.DevCloud == "" {
		errs = append(errs, errors.New("--dev-cloud: must not be empty"))
	}
	return errs
}

// checkLog checks --log-format and reads --log-level into c.LogLevel.
func (c *config) checkLog(logLevel string) []error {
	var errs []error
	switch c.LogFormat {
	case "text", "json":
	default:
		errs = append(errs, fmt.Errorf("--log-format %q: must be text or json", c.LogFormat))
	}
	if err := c.LogLevel.UnmarshalText([]byte(logLevel)); err != nil {
		errs = append(errs, fmt.Errorf("--log-level %q: must be debug, info, warn or error", logLevel))
	}
	return errs
}

// checkBody checks --max-body-bytes, --body-budget-bytes (at least the
// former) and --body-budget-wait.
func (c *config) checkBody() []error {
	var errs []error
	if c.MaxBodyBytes < 1 {
		errs = append(errs, fmt.Errorf("--max-body-bytes %d: must be at least 1", c.MaxBodyBytes))
	}
	if c.BodyBudgetBytes < c.MaxBodyBytes {
		errs = append(errs, fmt.Errorf("--body-budget-bytes %d: must be at least --max-body-bytes (%d)", c.BodyBudgetBytes, c.MaxBodyBytes))
	}
	if c.BodyBudgetWait <= 0 {
		errs = append(errs, fmt.Errorf("--body-budget-wait %s: must be positive", c.BodyBudgetWait))
	}
	if c.BodyStallTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--body-stall-timeout %s: must be positive", c.BodyStallTimeout))
	}
	return errs
}

// checkConnections checks --max-connections, --idle-timeout and
// --feed-max-subscribers.
func (c *config) checkConnections() []error {
	var errs []error
	if c.MaxConnections < 0 {
		errs = append(errs, fmt.Errorf("--max-connections %d: must not be negative (0 derives it from the descriptor limit)", c.MaxConnections))
	}
	if c.IdleTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--idle-timeout %s: must be positive", c.IdleTimeout))
	}
	if c.FeedMaxSubscribers < 0 {
		errs = append(errs, fmt.Errorf("--feed-max-subscribers %d: must not be negative (0: %d)", c.FeedMaxSubscribers, server.DefaultFeedMaxSubscribers))
	}
	return errs
}

// storeKind is the store serve opens, "postgres" or "memory", from --store
// and --database-url: the in-memory store, whose events are gone at the
// next restart, is never chosen by omission outside --dev.
func (c *config) storeKind() (string, error) {
	switch {
	case c.Store != "" && c.Store != "memory" && c.Store != "postgres":
		return "", fmt.Errorf("%w: --store %q: must be postgres or memory", errUsage, c.Store)
	case c.Store == "memory" && c.DatabaseURL != "":
		return "", fmt.Errorf("%w: --store memory and --database-url (or TALLY_DATABASE_URL) both given: choose one store", errUsage)
	case c.ReadDatabaseURL != "" && c.DatabaseURL == "":
		return "", fmt.Errorf("%w: --read-database-url needs --database-url (or TALLY_DATABASE_URL): a replica serves the reads of a primary", errUsage)
	case c.Store == "postgres" && c.DatabaseURL == "":
		return "", fmt.Errorf("%w: --store postgres needs --database-url (or TALLY_DATABASE_URL)", errUsage)
	case c.DatabaseURL != "":
		return "postgres", nil
	case c.Store == "memory" || c.Dev:
		return "memory", nil
	}
	return "", fmt.Errorf("%w: no store chosen: give --database-url (or TALLY_DATABASE_URL) for PostgreSQL, or --store memory "+
		"for the in-memory store, whose events are gone at the next restart (--dev chooses it by itself)", errUsage)
}

// checkDatabase checks --db-max-conns (it must fit pgstore's int32) and
// --db-connect-timeout.
func (c *config) checkDatabase() []error {
	var errs []error
	if c.DBMaxConns < 0 || c.DBMaxConns > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("--db-max-conns %d: must be from 0 (the URL's, else 16) to %d", c.DBMaxConns, math.MaxInt32))
	}
	if c.DBConnectTimeout < 0 {
		errs = append(errs, fmt.Errorf("--db-connect-timeout %s: must not be negative (0: the URL's, else 5s)", c.DBConnectTimeout))
	}
	return errs
}

// checkRetention checks --idempotency-retention: 0 (forever) or at least
// minIdempotencyRetention.
func (c *config) checkRetention() []error {
	switch {
	case c.IdempotencyRetention < 0:
		return []error{fmt.Errorf("--idempotency-retention %s: must not be negative (0 keeps every key)", c.IdempotencyRetention)}
	case c.IdempotencyRetention > 0 && c.IdempotencyRetention < minIdempotencyRetention:
		// A key must outlive its client's retries, or each retry is a second
		// create: a retention shorter than an hour is a mistake, not a choice.
		return []error{fmt.Errorf("--idempotency-retention %s: must be at least %s, longer than any client's retries (0 keeps every key)", c.IdempotencyRetention, minIdempotencyRetention)}
	}
	return nil
}

// checkIntervals checks --shutdown-timeout and --metrics-refresh-interval.
func (c *config) checkIntervals() []error {
	var errs []error
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--shutdown-timeout %s: must be positive", c.ShutdownTimeout))
	}
	if c.ShutdownDelay < 0 {
		errs = append(errs, fmt.Errorf("--shutdown-delay %s: must not be negative (0: close at once)", c.ShutdownDelay))
	}
	if c.MetricsRefresh <= 0 {
		errs = append(errs, fmt.Errorf("--metrics-refresh-interval %s: must be positive", c.MetricsRefresh))
	}
	return errs
}

// dbOptions are the pool options of the PostgreSQL store: zero values
// leave the URL's own parameters, else pgstore's defaults, in force.
func (c config) dbOptions() pgstore.Options {
	return pgstore.Options{
		MaxConns:                 int32(c.DBMaxConns),
		ConnectTimeout:           c.DBConnectTimeout,
		StatementTimeout:         c.DBStatementTimeout,
		IdleInTransactionTimeout: c.DBIdleInTxTimeout,
		AcquireTimeout:           c.DBAcquireTimeout,
		ApplicationName:          "tallyd", // the URL's own application_name wins
	}
}

// logger builds the slog logger the configuration asks for, writing to w:
// every value on one line (see logAttr), and with --log-format json
// durations in seconds.
func (c config) logger(w io.Writer) *slog.Logger {
	json := c.LogFormat == "json"
	opts := &slog.HandlerOptions{Level: c.LogLevel, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr { return logAttr(a, json) }}
	if json {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// logAttr is the loggers' ReplaceAttr: an error or a string is logged on
// one line (errors.Join and the driver put causes on lines of their own:
// see oneLine); in JSON a duration is a number of seconds under its key
// with "_seconds" appended, so that a log pipeline reads a number.
func logAttr(a slog.Attr, json bool) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindString:
		if s := a.Value.String(); strings.Contains(s, "\n") {
			return slog.String(a.Key, oneLine(s))
		}
	case slog.KindAny:
		if err, ok := a.Value.Any().(error); ok {
			return slog.String(a.Key, oneLine(err.Error()))
		}
	case slog.KindDuration:
		if json {
			key := a.Key
			if !strings.HasSuffix(key, "_seconds") {
				key += "_seconds"
			}
			return slog.Float64(key, a.Value.Duration().Seconds())
		}
	}
	return a
}

// oneLine joins the lines of s with "; ", for a log value or an error
// message that must read on one line.
func oneLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }), "; ")
}
