package pgstore

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The pool and Timeouts: Options win over the URL's own
// parameters, which win over the defaults; the URL's pool parameters are
// honoured (and never sent to the server: pgxpool strips them).
func TestPoolConfig(t *testing.T) {
	const base = "postgres://u@127.0.0.1:5432/db?sslmode=disable"
	type got struct {
		MaxConns         int32
		ConnectTimeout   time.Duration
		StatementTimeout string
		PoolParamSent    bool
	}
	tests := []struct {
		name string
		url  string
		opts Options
		want got
	}{
		{"defaults", base, Options{}, got{DefaultMaxConns, DefaultConnectTimeout, "10000", false}},
		{"the URL's parameters", base + "&pool_max_conns=3&connect_timeout=2&statement_timeout=1500", Options{},
			got{3, 2 * time.Second, "1500", false}},
		{"options over the URL", base + "&pool_max_conns=3&connect_timeout=2&statement_timeout=1500",
			Options{MaxConns: 7, ConnectTimeout: time.Second, StatementTimeout: 250 * time.Millisecond}, got{7, time.Second, "250", false}},
		{"no statement timeout", base, Options{StatementTimeout: -1}, got{DefaultMaxConns, DefaultConnectTimeout, "", false}},
		{"key=value form", "host=127.0.0.1 user=u dbname=db pool_max_conns=5", Options{}, got{5, DefaultConnectTimeout, "10000", false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := poolConfig(tc.url, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			_, sent := cfg.ConnConfig.RuntimeParams["pool_max_conns"]
			g := got{cfg.MaxConns, cfg.ConnConfig.ConnectTimeout, cfg.ConnConfig.RuntimeParams["statement_timeout"], sent}
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("pool config (-want +got):\n%s", diff)
			}
			if cfg.ShouldPing == nil {
				t.Error("connections are not checked on acquire")
			}
			p := probeConfig(cfg)
			if p.MaxConns != 1 || cfg.MaxConns != g.MaxConns {
				t.Errorf("probe pool: %d connections (main pool now %d)", p.MaxConns, cfg.MaxConns)
			}
		})
	}
	for _, o := range []Options{{MaxConns: -1}, {ConnectTimeout: -time.Second}} {
		if _, err := poolConfig(base, o); err == nil {
			t.Errorf("poolConfig(%+v): no error", o)
		}
	}
}
