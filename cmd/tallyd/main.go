// Command tallyd is tally's reference server: the library's HTTP API over
// the in-memory store or PostgreSQL.
//
// Usage:
//
//	tallyd [serve] [flags]   serve the API (the default)
//	tallyd migrate [flags]   apply pending PostgreSQL migrations and exit
//	tallyd token             print a new random token and its SHA-256
//	tallyd projection rebuild, tallyd retention (see --help)
//	tallyd healthcheck       GET /healthz of a running tallyd, exit 0 on 200
//
// Every flag has a TALLY_* environment fallback; a flag given on the command
// line wins over the environment, which wins over the default. Run
// `tallyd --help` for the list.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
)

// version is the release this binary is, stamped by a release build:
// go build -ldflags "-X main.version=v0.3.0" ./cmd/tallyd. Empty: the
// module version the go command recorded ("(devel)" from a checkout).
var version string

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	var logged loggedError
	switch {
	case err == nil, errors.Is(err, pflag.ErrHelp):
	case errors.As(err, &logged) && errors.Is(err, errUsage):
		os.Exit(2)
	case errors.As(err, &logged):
		os.Exit(1)
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "tallyd:", err) // one refusal a line
		os.Exit(2)
	default:
		// One error, on one line: a joined cause (the driver's) follows
		// after "; ".
		fmt.Fprintln(os.Stderr, "tallyd:", oneLine(err.Error()))
		os.Exit(1)
	}
}
