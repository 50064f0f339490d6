// Command correlation-producer reports a failing connection a few times, then
// its resolution, to a tally server's createEvent route (POST /api/events),
// and prints the Event-Disposition of each answer
// (event-correlation.md, createEvent semantics).
//
// It sends through [correlatehttp.Client]: every create carries a fresh
// Idempotency-Key, so a create retried after a transport failure or a 5xx is
// never counted twice: the server replays it.
//
//	go run ./examples/correlation-producer --occurrences 3
//
// reads the server's URL from TALLY_SERVER and the token of an events
// credential from TALLY_TOKEN (the two lines `tallyd --dev` prints to
// export), as the collector does; --server and --token win over them. It
// prints, against a fresh server:
//
//	occurrence 1: created (occurrenceCount 1)
//	occurrence 2: incremented (occurrenceCount 2)
//	occurrence 3: incremented (occurrenceCount 3)
//	resolution: resolved (occurrenceCount 3)
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/spf13/pflag"

	"github.com/tallyhq/tally/correlate/correlatehttp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); errors.Is(err, pflag.ErrHelp) {
		return
	} else if err != nil {
		fmt.Fprintln(os.Stderr, "correlation-producer:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := pflag.NewFlagSet("correlation-producer", pflag.ContinueOnError)
	server := fs.String("server", "http://127.0.0.1:8080", "tally server base URL (default $TALLY_SERVER when set)")
	token := fs.String("token", "", "bearer token of an events credential (default $TALLY_TOKEN)")
	key := fs.String("key", "example-producer/k8s-connection/prod-1/unreachable", "correlationKey naming the condition")
	n := fs.Int("occurrences", 3, "occurrences to report before the resolution")
	fs.SetOutput(stdout)
	if err := fs.Parse(args); err != nil {
		return err
	}
	// A flag on the command line wins over its environment variable, which
	// wins over the default, as in the collector and tallyd.
	if v := getenv("TALLY_SERVER"); v != "" && !fs.Changed("server") {
		*server = v
	}
	if *token == "" {
		*token = getenv("TALLY_TOKEN")
	}
	if *token == "" {
		return fmt.Errorf("no token: pass --token or set TALLY_TOKEN")
	}
	if *n < 1 {
		return fmt.Errorf("--occurrences must be at least 1")
	}
	c, err := correlatehttp.NewClient(*server, correlatehttp.ClientOptions{Token: *token})
	if err != nil {
		return err
	}
	for i := 1; i <= *n; i++ {
		e, d, err := c.Create(ctx, occurrence(*key))
		if err != nil {
			return fmt.Errorf("occurrence %d: %w", i, err)
		}
		fmt.Fprintf(stdout, "occurrence %d: %s (occurrenceCount %d)\n", i, d, *e.OccurrenceCount)
	}
	e, d, err := c.Create(ctx, resolution(*key, time.Now()))
	if err != nil {
		return fmt.Errorf("resolution: %w", err)
	}
	fmt.Fprintf(stdout, "resolution: %s (occurrenceCount %d)\n", d, *e.OccurrenceCount)
	return nil
}
