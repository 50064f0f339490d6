package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"

	"github.com/tallyhq/tally/internal/pgtest"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// "--help states the precedence": flag > env > default.
func TestConfigPrecedence(t *testing.T) {
	defaults := config{
		Listen: "127.0.0.1:8080", DevCloud: "os-dev", MaxBodyBytes: 8 << 20, BodyBudgetBytes: 64 << 20, BodyBudgetWait: 5 * time.Second, BodyStallTimeout: 10 * time.Second,
		IdleTimeout: 30 * time.Second, FeedMaxSubscribers: 2048,
		LogFormat: "text", LogLevel: slog.LevelInfo, ShutdownTimeout: 30 * time.Second,
		MetricsRefresh: 30 * time.Second,
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want func(c *config)
	}{
		{"defaults", nil, nil, func(c *config) {}},
		{"env over default", nil, map[string]string{
			"TALLY_LISTEN": "127.0.0.1:9000", "TALLY_DATABASE_URL": "postgres://x", "TALLY_CREDENTIALS_FILE": "/c.json",
			"TALLY_DEV": "true", "TALLY_DEV_CLOUD": "os-x", "TALLY_INGEST_REQUIRE_SIZE_SCHEMA": "true",
			"TALLY_MAX_BODY_BYTES": "1024", "TALLY_CORS_ALLOWED_ORIGINS": "https://a.example, https://b.example",
			"TALLY_LOG_FORMAT": "json", "TALLY_LOG_LEVEL": "debug", "TALLY_SHUTDOWN_TIMEOUT": "5s",
			"TALLY_BODY_BUDGET_BYTES": "4096", "TALLY_BODY_BUDGET_WAIT": "500ms", "TALLY_BODY_STALL_TIMEOUT": "3s",
			"TALLY_MAX_CONNECTIONS": "100", "TALLY_IDLE_TIMEOUT": "5s", "TALLY_EVENTS_LEGACY_CREATE_200": "true",
			"TALLY_DB_ACQUIRE_TIMEOUT": "2s", "TALLY_METRICS_REFRESH_INTERVAL": "1m",
			"TALLY_IDEMPOTENCY_RETENTION": "72h", "TALLY_FEED_MAX_SUBSCRIBERS": "16",
			// The pool and Timeouts: each database setting has its
			// environment fallback.
			"TALLY_DB_MAX_CONNS": "32", "TALLY_DB_CONNECT_TIMEOUT": "3s", "TALLY_DB_STATEMENT_TIMEOUT": "20s",
			"TALLY_DB_IDLE_IN_TRANSACTION_TIMEOUT": "45s",
		}, func(c *config) {
			c.DBIdleInTxTimeout = 45 * time.Second
			c.LegacyCreate200 = true
			c.IdempotencyRetention = 72 * time.Hour
			c.DBAcquireTimeout = 2 * time.Second
			c.DBMaxConns, c.DBConnectTimeout, c.DBStatementTimeout = 32, 3*time.Second, 20*time.Second
			c.MetricsRefresh = time.Minute
			c.BodyBudgetBytes, c.BodyBudgetWait, c.BodyStallTimeout = 4096, 500*time.Millisecond, 3*time.Second
			c.MaxConnections, c.IdleTimeout = 100, 5*time.Second
			c.FeedMaxSubscribers = 16
			c.Listen, c.DatabaseURL, c.CredentialsFile = "127.0.0.1:9000", "postgres://x", "/c.json"
			c.Dev, c.DevCloud, c.RequireSizeSchema, c.MaxBodyBytes = true, "os-x", true, 1024
			c.CORSAllowedOrigins = []string{"https://a.example", "https://b.example"}
			c.LogFormat, c.LogLevel, c.ShutdownTimeout = "json", slog.LevelDebug, 5*time.Second
		}},
		{"flag over env", []string{
			"--listen", "127.0.0.1:7000", "--database-url=postgres://flag", "--require-size-schema=false",
			"--max-body-bytes", "2048", "--cors-allowed-origins", "https://c.example", "--log-level", "warn",
			"--events-legacy-create-200", "--db-acquire-timeout", "-1s", "--metrics-refresh-interval", "5s",
			"--db-max-conns", "8", "--db-connect-timeout", "1s", "--db-statement-timeout", "-1s",
			"--idempotency-retention", "24h", "--db-idle-in-transaction-timeout", "2s",
			"--feed-max-subscribers", "0",
		}, map[string]string{
			"TALLY_FEED_MAX_SUBSCRIBERS":           "16",
			"TALLY_DB_IDLE_IN_TRANSACTION_TIMEOUT": "45s",
			"TALLY_IDEMPOTENCY_RETENTION":          "72h",
			"TALLY_DB_MAX_CONNS":                   "32", "TALLY_DB_CONNECT_TIMEOUT": "3s", "TALLY_DB_STATEMENT_TIMEOUT": "20s",
			"TALLY_METRICS_REFRESH_INTERVAL": "1m",
			"TALLY_LISTEN":                   "127.0.0.1:9000", "TALLY_DATABASE_URL": "postgres://env", "TALLY_INGEST_REQUIRE_SIZE_SCHEMA": "true",
			"TALLY_MAX_BODY_BYTES": "1024", "TALLY_CORS_ALLOWED_ORIGINS": "https://a.example", "TALLY_LOG_LEVEL": "debug",
			"TALLY_DB_ACQUIRE_TIMEOUT": "2s",
		}, func(c *config) {
			c.DBAcquireTimeout = -time.Second
			c.DBIdleInTxTimeout = 2 * time.Second
			c.DBMaxConns, c.DBConnectTimeout, c.DBStatementTimeout = 8, time.Second, -time.Second
			c.Listen, c.DatabaseURL, c.MaxBodyBytes = "127.0.0.1:7000", "postgres://flag", 2048
			c.CORSAllowedOrigins, c.LogLevel = []string{"https://c.example"}, slog.LevelWarn
			c.LegacyCreate200 = true
			c.MetricsRefresh = 5 * time.Second
			c.IdempotencyRetention = 24 * time.Hour
			c.FeedMaxSubscribers = 0 // the server's default
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseConfig("tallyd", tt.args, env(tt.env), &bytes.Buffer{})
			if err != nil {
				t.Fatal(err)
			}
			want := defaults
			tt.want(&want)
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("config (-want +got):\n%s", d)
			}
		})
	}
}

func TestConfigRefuses(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"bad env value names the variable", nil, map[string]string{"TALLY_MAX_BODY_BYTES": "lots"}, `TALLY_MAX_BODY_BYTES="lots"`},
		{"bad env bool", nil, map[string]string{"TALLY_DEV": "maybe"}, `TALLY_DEV="maybe"`},
		{"unknown flag", []string{"--nope"}, nil, "unknown flag: --nope"},
		{"log format", []string{"--log-format", "xml"}, nil, `--log-format "xml": must be text or json`},
		{"log level", []string{"--log-level", "loud"}, nil, `--log-level "loud"`},
		{"body cap", []string{"--max-body-bytes", "0"}, nil, "--max-body-bytes 0: must be at least 1"},
		{"body budget below the cap", []string{"--body-budget-bytes", "1000", "--max-body-bytes", "2000"}, nil, "--body-budget-bytes 1000: must be at least --max-body-bytes (2000)"},
		{"body budget wait", []string{"--body-budget-wait", "0s"}, nil, "--body-budget-wait 0s: must be positive"},
		{"body stall timeout", []string{"--body-stall-timeout", "0s"}, nil, "--body-stall-timeout 0s: must be positive"},
		{"stray argument", []string{"extra"}, nil, `unexpected argument "extra"`},
		{"negative idempotency retention", []string{"--idempotency-retention", "-1h"}, nil, "--idempotency-retention -1h0m0s: must not be negative"},
		{"idempotency retention shorter than retries", []string{"--idempotency-retention", "1ns"}, nil, "--idempotency-retention 1ns: must be at least 1h0m0s"},
		{"metrics refresh interval", []string{"--metrics-refresh-interval", "0s"}, nil, "--metrics-refresh-interval 0s: must be positive"},
		{"negative max connections", []string{"--max-connections", "-1"}, nil, "--max-connections -1: must not be negative (0 derives it from the descriptor limit)"},
		{"idle timeout", []string{"--idle-timeout", "0s"}, nil, "--idle-timeout 0s: must be positive"},
		{"negative feed max subscribers", []string{"--feed-max-subscribers", "-1"}, nil, "--feed-max-subscribers -1: must not be negative (0: 2048)"},
		{"negative feed max subscribers from the environment", nil, map[string]string{"TALLY_FEED_MAX_SUBSCRIBERS": "-3"}, "--feed-max-subscribers -3: must not be negative"},
		{"db max conns", []string{"--db-max-conns", "-1"}, nil, "--db-max-conns -1: must be from 0 (the URL's, else 16) to 2147483647"},
		{"db max conns beyond int32", []string{"--db-max-conns", "2147483648"}, nil, "--db-max-conns 2147483648: must be from 0"},
		{"db connect timeout", []string{"--db-connect-timeout", "-1s"}, nil, "--db-connect-timeout -1s: must not be negative (0: the URL's, else 5s)"},
		{"shutdown timeout", []string{"--shutdown-timeout", "0s"}, nil, "--shutdown-timeout 0s: must be positive"},
		{"empty dev cloud", []string{"--dev", "--dev-cloud", ""}, nil, "--dev-cloud: must not be empty"},
		{"every bad env value at once, in flag order", nil, map[string]string{"TALLY_MAX_BODY_BYTES": "lots", "TALLY_DEV": "maybe"},
			`TALLY_DEV="maybe": invalid argument "maybe" for "--dev" flag: must be true or false` + "\n" + `TALLY_MAX_BODY_BYTES="lots"`},
		{"a bad env value before the command line", []string{"--nope"}, map[string]string{"TALLY_DEV": "maybe"}, `usage: TALLY_DEV="maybe"`},
		{"help before a stray argument", []string{"extra", "--help"}, nil, ""},
		{"every refusal at once, in flag order", []string{"--log-format", "xml", "--log-level", "loud", "--max-body-bytes", "0",
			"--body-budget-bytes", "-1", "--body-budget-wait", "0s", "--max-connections", "-1", "--idle-timeout", "0s",
			"--feed-max-subscribers", "-1", "--db-max-conns", "-1", "--db-connect-timeout", "-1s", "--idempotency-retention", "1m", "--shutdown-timeout", "0s",
			"--metrics-refresh-interval", "0s", "--dev", "--dev-cloud", ""}, nil,
			`usage: --log-format "xml": must be text or json` + "\n" +
				`--log-level "loud": must be debug, info, warn or error` + "\n" +
				"--max-body-bytes 0: must be at least 1\n" +
				"--body-budget-bytes -1: must be at least --max-body-bytes (0)\n" +
				"--body-budget-wait 0s: must be positive\n" +
				"--max-connections -1: must not be negative (0 derives it from the descriptor limit)\n" +
				"--idle-timeout 0s: must be positive\n" +
				"--feed-max-subscribers -1: must not be negative (0: 2048)\n" +
				"--db-max-conns -1: must be from 0 (the URL's, else 16) to 2147483647\n" +
				"--db-connect-timeout -1s: must not be negative (0: the URL's, else 5s)\n" +
				"--idempotency-retention 1m0s: must be at least 1h0m0s, longer than any client's retries (0 keeps every key)\n" +
				"--shutdown-timeout 0s: must be positive\n" +
				"--metrics-refresh-interval 0s: must be positive\n" +
				"--dev-cloud: must not be empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig("tallyd", tt.args, env(tt.env), &bytes.Buffer{})
			if tt.want == "" {
				if !errors.Is(err, pflag.ErrHelp) {
					t.Errorf("error %v: want pflag.ErrHelp", err)
				}
				return
			}
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v: want errUsage containing %q", err, tt.want)
			}
		})
	}
}

func TestHelpStatesPrecedence(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"--help"}, env(nil), &out, &bytes.Buffer{})
	if !errors.Is(err, pflag.ErrHelp) {
		t.Fatalf("run --help: %v, want pflag.ErrHelp", err)
	}
	for _, want := range []string{
		"a flag on the command line > its TALLY_* environment variable > the default",
		"--listen", "(env TALLY_LISTEN)", `(default "127.0.0.1:8080")`,
		"--require-size-schema", "(env TALLY_INGEST_REQUIRE_SIZE_SCHEMA)",
		"--max-body-bytes", "(default 8388608)",
		"--idempotency-retention", "(env TALLY_IDEMPOTENCY_RETENTION)",
		"tallyd migrate", "tallyd token",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help output lacks %q:\n%s", want, out.String())
		}
	}
	for _, fe := range flagEnv {
		if !strings.Contains(out.String(), "--"+fe.flag) || !strings.Contains(out.String(), "(env "+fe.env+")") {
			t.Errorf("--help does not name --%s and %s", fe.flag, fe.env)
		}
	}
}

func TestTokenSubcommand(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token"}, env(nil), &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^token: (tly_[0-9a-f]{64})\ntoken_sha256: ([0-9a-f]{64})\n$`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("token output %q: want two lines, token: tly_<64 hex> and token_sha256: <64 hex>", out.String())
	}
	sum := sha256.Sum256([]byte(m[1]))
	if hex.EncodeToString(sum[:]) != m[2] {
		t.Errorf("token_sha256 %s is not the sha256 of the token", m[2])
	}
	if err := run(context.Background(), []string{"token", "x"}, env(nil), &out, &bytes.Buffer{}); !errors.Is(err, errUsage) {
		t.Errorf("token x: %v, want errUsage", err)
	}
}

// "Without a credentials file the server refuses to start unless --dev is
// given."
func TestServeRefusesWithoutCredentials(t *testing.T) {
	err := run(context.Background(), []string{"--listen", "127.0.0.1:0"}, env(nil), &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "no credentials: give --credentials-file (or TALLY_CREDENTIALS_FILE), or --dev") {
		t.Errorf("run without credentials: %v", err)
	}
}

func TestServeRefusesBadCredentialsFile(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, data string
		want       []string
	}{
		{"unknown role", `{"credentials":[{"name":"ops","token":"x-token-for-tests","roles":["root"]}]}`,
			[]string{`credentials[0] ("ops"): member "roles": unknown role "root"`}},
		{"ingest without scope", `{"credentials":[{"name":"col","token":"x-token-for-tests","roles":["ingest"],"platform":"openstack"}]}`,
			[]string{`credentials[0] ("col"): member "cloud": is required with the ingest role`}},
		{"events without organization", `{"credentials":[{"name":"app","token":"x-token-for-tests","roles":["events"]}]}`,
			[]string{`credentials[0] ("app"): member "organization": is required with the events role`}},
		{"bad hex", `{"credentials":[{"name":"h","token_sha256":"nothex","roles":["read"]}]}`,
			[]string{`credentials[0] ("h"): member "token_sha256": must be 64 hexadecimal digits`}},
		{"unknown member", `{"credentials":[{"name":"u","token":"x-token-for-tests","roles":["read"],"role":"admin"}]}`,
			[]string{`credentials[0] ("u"): member "role": unknown member`}},
		{"empty", `{"credentials":[]}`, []string{"no credential"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_")+".json")
			if err := os.WriteFile(path, []byte(tt.data), 0o600); err != nil {
				t.Fatal(err)
			}
			err := run(context.Background(), []string{"--listen", "127.0.0.1:0", "--credentials-file", path}, env(nil), &bytes.Buffer{}, &bytes.Buffer{})
			if err == nil {
				t.Fatal("run: no error")
			}
			for _, w := range append(tt.want, path) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	err := run(context.Background(), nil, env(map[string]string{"TALLY_CREDENTIALS_FILE": filepath.Join(dir, "missing.json")}), &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: %v", err)
	}
}

func TestMigrateNeedsDatabaseURL(t *testing.T) {
	err := run(context.Background(), []string{"migrate"}, env(nil), &bytes.Buffer{}, &bytes.Buffer{})
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--database-url") {
		t.Errorf("migrate: %v", err)
	}
}

// `tallyd migrate` applies the pending migrations of a fresh schema and
// prints their versions; run again, it applies none. The schema comes from
// pgtest.EmptyURL, whose own pool drops it on cleanup (a pool of this test,
// closed by a defer before the cleanups ran, left one schema per run).
func TestMigrate(t *testing.T) {
	ctx := context.Background()
	u := pgtest.EmptyURL(t) // skips without TEST_DATABASE_URL, or fails in CI

	var out bytes.Buffer
	if err := run(ctx, []string{"migrate"}, env(map[string]string{"TALLY_DATABASE_URL": u}), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(repoRoot(t), "store", "pgstore", "migrations"))
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, e := range entries {
		if v, ok := strings.CutSuffix(e.Name(), ".sql"); ok {
			fmt.Fprintf(&want, "applied migration %s\n", v[:5])
		}
	}
	if d := cmp.Diff(want.String(), out.String()); d != "" {
		t.Errorf("first migrate (-want +got):\n%s", d)
	}
	out.Reset()
	if err := run(ctx, []string{"migrate", "--database-url", u}, env(nil), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "schema is current; no migration applied\n" {
		t.Errorf("second migrate printed %q", got)
	}

	// An index a failed CREATE INDEX CONCURRENTLY left INVALID is named,
	// as a warning: a rerun's IF NOT EXISTS would keep it silently.
	name := pgtest.LeaveInvalidIndex(t, u)
	out.Reset()
	if err := run(ctx, []string{"migrate", "--database-url", u}, env(nil), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.HasPrefix(got, "schema is current; no migration applied\nwarning: invalid indexes") || !strings.HasSuffix(got, ": "+name+"\n") {
		t.Errorf("migrate over an invalid index printed %q", got)
	}
}

// X1: a database port where nothing listens was reported as "no answer
// within the connect timeout", which sends an operator after a firewall
// instead of a stopped server. The sentence fits both causes, and the
// cause itself follows it.
func TestOpenDatabaseRefusedSaysSo(t *testing.T) {
	c := config{DatabaseURL: "postgres://tally@127.0.0.1:1/tally?sslmode=disable", DBConnectTimeout: 2 * time.Second}
	_, err := openDatabase(context.Background(), c)
	if err == nil {
		t.Fatal("openDatabase on a closed port: no error")
	}
	msg := err.Error()
	for _, want := range []string{"database unreachable", "refused", "connect timeout (2s; --db-connect-timeout)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "unreachable, no answer within") {
		t.Errorf("error %q claims no answer for a refused connection", msg)
	}
}

// --feed-max-subscribers reaches the server: with 1, a second subscriber
// is answered 503 busy while the first streams.
func TestFeedMaxSubscribersFlag(t *testing.T) {
	base := serveInProcess(t, "--feed-max-subscribers", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	subscribe := func() *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/v1/events/feed", nil)
		req.Header.Set("Authorization", "Bearer "+tokAdmin)
		req.Header.Set("Accept", "text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := subscribe()
	defer first.Body.Close()
	if first.StatusCode != 200 {
		t.Fatalf("first subscriber: %d, want 200", first.StatusCode)
	}
	second := subscribe()
	defer second.Body.Close()
	if second.StatusCode != 503 || second.Header.Get("Retry-After") == "" {
		t.Fatalf("second subscriber: %d Retry-After %q, want 503 with Retry-After", second.StatusCode, second.Header.Get("Retry-After"))
	}
	if b, _ := io.ReadAll(second.Body); !strings.Contains(string(b), `"code":"busy"`) {
		t.Errorf("second subscriber's answer %s, want code busy", b)
	}
}

// The in-memory store is chosen explicitly outside --dev: tallyd started
// with a credentials file and no --database-url refuses to start instead
// of answering 200 to collectors with events that the next restart loses.
func TestServeStoreMustBeChosen(t *testing.T) {
	for _, tc := range []struct {
		name    string
		c       config
		want    string // the store, or a fragment of the refusal
		refused bool
	}{
		{"nothing: refused", config{}, "no store chosen: give --database-url (or TALLY_DATABASE_URL) for PostgreSQL, or --store memory", true},
		{"--dev: memory", config{Dev: true}, "memory", false},
		{"--store memory", config{Store: "memory"}, "memory", false},
		{"--database-url", config{DatabaseURL: "postgres://x"}, "postgres", false},
		{"--store postgres with a URL", config{Store: "postgres", DatabaseURL: "postgres://x"}, "postgres", false},
		{"--dev with a URL: postgres", config{Dev: true, DatabaseURL: "postgres://x"}, "postgres", false},
		{"--store postgres without a URL", config{Store: "postgres"}, "--store postgres needs --database-url", true},
		{"--store memory with a URL", config{Store: "memory", DatabaseURL: "postgres://x"}, "both given: choose one store", true},
		{"--read-database-url without a primary", config{Dev: true, ReadDatabaseURL: "postgres://replica"}, "--read-database-url needs --database-url", true},
		{"unknown store", config{Store: "sqlite"}, `--store "sqlite": must be postgres or memory`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.c.storeKind()
			if tc.refused {
				if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("storeKind() = %q, %v; want a usage error containing %q", got, err, tc.want)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("storeKind() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	// Through run: a credentials file alone is refused before anything listens.
	path := filepath.Join(t.TempDir(), "creds.json")
	if err := os.WriteFile(path, []byte(`{"credentials":[{"name":"r","token":"x-token-for-tests","roles":["read"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	err := run(context.Background(), []string{"--listen", "127.0.0.1:0", "--credentials-file", path}, env(nil), &stdout, &bytes.Buffer{})
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "no store chosen") {
		t.Errorf("run with a credentials file alone: %v, want the refusal naming --database-url and --store memory", err)
	}
	if strings.Contains(stdout.String(), "listening") {
		t.Errorf("it listened: %s", stdout.String())
	}
}

// docs/operations.md's flag table names every flag of tallyd with its
// environment variable, and no flag tallyd lacks.
func TestOperationsGuideListsEveryFlag(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `--([a-z0-9-]+)` \\| `([A-Z0-9_]+)` \\|")
	got := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		got[m[1]] = m[2]
	}
	want := map[string]string{}
	for _, fe := range flagEnv {
		want[fe.flag] = fe.env
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("docs/operations.md flag table (-tallyd's flags +the table):\n%s", d)
	}
}

// tallyd --version prints one line naming the build, and nothing starts.
func TestVersion(t *testing.T) {
	for _, arg := range []string{"--version", "version"} {
		var out bytes.Buffer
		if err := run(context.Background(), []string{arg}, env(nil), &out, io.Discard); err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		re := regexp.MustCompile(`^tallyd \S+ \(revision \S+, go\S+\)\n$`)
		if !re.MatchString(out.String()) {
			t.Errorf("%s printed %q, want a line matching %s", arg, out.String(), re)
		}
	}
}
