// Command openstack-collector reads OpenStack oslo.messaging notifications
// as JSON lines (files or stdin), maps instances, volumes, floating IPs,
// images and load balancers to canonical lifecycle events with package
// [oslo], validates each one, and posts them in batches of up to 1000 to a
// tally server's POST /api/v1/events, printing the ingest result.
//
// A notification that cannot be mapped, or whose event is invalid, is
// reported on stderr with its file and line number and counted; nothing is
// dropped silently. Only transport failures and 5xx answers are retried;
// a 4xx, and any item the server refused, never is.
//
// Usage:
//
//	openstack-collector --cloud os-prod-eu1 --token $TOKEN [flags] [file ...]
//	openstack-collector --cloud os-prod-eu1 --dry-run < notifications.jsonl
//
// Run it with --help for the flags.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/tallyhq/tally/examples/openstack-collector/oslo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal ends the process at once
	}()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, pflag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "openstack-collector:", err)
		os.Exit(1)
	}
}

// maxBatch is the most items POST /api/v1/events takes in one call
// (canonical-event.md, Delivery).
const maxBatch = 1000

type config struct {
	cloud, server, token string
	dryRun               bool
	gzip                 bool
	batchSize            int
	maxBatchBytes        int
	maxAttempts          int
	retryDelay           time.Duration
	retryMaxDelay        time.Duration
	timeout              time.Duration
	files                []string
}

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	fs := pflag.NewFlagSet("openstack-collector", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	fs.StringVar(&c.cloud, "cloud", env("TALLY_CLOUD", ""), "the cloud every event names, as the ingest credential's scope has it (required; env TALLY_CLOUD)")
	fs.StringVar(&c.server, "server", env("TALLY_SERVER", "http://127.0.0.1:8080"), "base URL of the tally server (env TALLY_SERVER)")
	fs.StringVar(&c.token, "token", "", "bearer token of an ingest credential (env TALLY_TOKEN; required unless --dry-run)")
	fs.BoolVar(&c.dryRun, "dry-run", false, "print the canonical events as JSON lines on stdout instead of sending them")
	fs.IntVar(&c.batchSize, "batch-size", maxBatch, "events per request, 1 to 1000")
	fs.IntVar(&c.maxBatchBytes, "max-batch-bytes", 4<<20, "a request body stays under this many bytes (the server refuses bodies over its --max-body-bytes, 8 MiB by default)")
	fs.BoolVar(&c.gzip, "gzip", true, "compress request bodies with gzip (Content-Encoding: gzip); --gzip=false sends them plain")
	fs.IntVar(&c.maxAttempts, "max-attempts", 5, "attempts per batch in all; only transport failures and 5xx answers are retried")
	fs.DurationVar(&c.retryDelay, "retry-delay", 250*time.Millisecond, "backoff before the first retry, doubled on each next one, with jitter")
	fs.DurationVar(&c.retryMaxDelay, "retry-max-delay", 10*time.Second, "cap of the backoff between retries (also caps a Retry-After)")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "timeout of one request")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: openstack-collector --cloud NAME [--token TOKEN] [flags] [file ...]

Reads oslo.messaging notifications as JSON lines from the files, or stdin
when there are none (or "-"), maps them to canonical events and posts them
to POST {server}/api/v1/events. Unmappable lines are reported on stderr
with their line numbers.

A flag given on the command line wins over its environment variable, which
wins over the default.

Flags:
%s`, fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if !fs.Changed("token") {
		c.token = getenv("TALLY_TOKEN")
	}
	c.files = fs.Args()
	var errs []error
	if c.cloud == "" {
		errs = append(errs, errors.New("--cloud is required (or TALLY_CLOUD)"))
	}
	if !c.dryRun && c.token == "" {
		errs = append(errs, errors.New("a token is required unless --dry-run: --token or TALLY_TOKEN"))
	}
	if u, err := url.Parse(c.server); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("--server %q must be an http or https URL", c.server))
	}
	if c.batchSize < 1 || c.batchSize > maxBatch {
		errs = append(errs, fmt.Errorf("--batch-size must be 1 to %d, not %d", maxBatch, c.batchSize))
	}
	if c.maxBatchBytes < 1024 {
		errs = append(errs, errors.New("--max-batch-bytes must be at least 1024"))
	}
	if c.maxAttempts < 1 {
		errs = append(errs, errors.New("--max-attempts must be at least 1"))
	}
	if c.retryDelay < 0 || c.retryMaxDelay < c.retryDelay {
		errs = append(errs, errors.New("--retry-delay must be ≥ 0 and at most --retry-max-delay"))
	}
	return c, errors.Join(errs...)
}

// counts are what the summary reports.
type counts struct {
	notifications, mapped, unmappable, invalid int
	sent, batches                              int
	accepted, duplicates, rejected             int
}

// collector holds one run's state.
type collector struct {
	cfg            config
	sender         *sender
	stdout, stderr io.Writer
	n              counts
	// the pending batch: each event's JSON and where it came from.
	batch      [][]byte
	from       []string
	batchBytes int
}

// run is the whole program; main only wires the process to it.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, getenv, stderr)
	if err != nil {
		return err
	}
	c := &collector{cfg: cfg, stdout: stdout, stderr: stderr}
	if !cfg.dryRun {
		c.sender = &sender{
			client:      &http.Client{Timeout: cfg.timeout},
			url:         strings.TrimRight(cfg.server, "/") + "/api/v1/events",
			token:       cfg.token,
			maxAttempts: cfg.maxAttempts,
			baseDelay:   cfg.retryDelay,
			maxDelay:    cfg.retryMaxDelay,
			userAgent:   "tally-openstack-collector",
			gzip:        cfg.gzip,
			sleep:       sleepCtx,
		}
	}
	err = c.collect(ctx, stdin)
	c.summary()
	return err
}

func (c *collector) collect(ctx context.Context, stdin io.Reader) error {
	files := c.cfg.files
	if len(files) == 0 {
		files = []string{"-"}
	}
	m := oslo.Mapper{Cloud: c.cfg.cloud}
	for _, name := range files {
		var r io.Reader = stdin
		label := "<stdin>"
		if name != "-" {
			f, err := os.Open(name)
			if err != nil {
				return err
			}
			defer f.Close()
			r, label = f, name
		}
		if err := c.readAll(ctx, m.NewReader(r), label); err != nil {
			return err
		}
	}
	return c.flush(ctx)
}

func (c *collector) readAll(ctx context.Context, rd *oslo.Reader, label string) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		o, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", label, err)
		}
		c.n.notifications++
		where := fmt.Sprintf("%s:%d", label, o.Line)
		switch {
		case errors.Is(o.Err, oslo.ErrUnmappable):
			c.n.unmappable++
			fmt.Fprintf(c.stderr, "%s: unmappable, not sent: %v\n", where, o.Err)
			continue
		case o.Err != nil:
			c.n.invalid++
			fmt.Fprintf(c.stderr, "%s: invalid, not sent: %v\n", where, o.Err)
			continue
		}
		b, err := o.Event.MarshalJSON()
		if err != nil { // a mapped event always encodes; report it anyway
			c.n.invalid++
			fmt.Fprintf(c.stderr, "%s: cannot encode, not sent: %v\n", where, err)
			continue
		}
		c.n.mapped++
		if c.cfg.dryRun {
			if _, err := fmt.Fprintf(c.stdout, "%s\n", b); err != nil {
				return err
			}
			continue
		}
		if err := c.add(ctx, b, where); err != nil {
			return err
		}
	}
}

// add queues one event, sending the batch first when the event would take
// it past --batch-size items or --max-batch-bytes.
func (c *collector) add(ctx context.Context, b []byte, where string) error {
	if len(c.batch) > 0 && (len(c.batch) >= c.cfg.batchSize || c.batchBytes+len(b)+2 > c.cfg.maxBatchBytes) {
		if err := c.flush(ctx); err != nil {
			return err
		}
	}
	c.batch = append(c.batch, b)
	c.from = append(c.from, where)
	c.batchBytes += len(b) + 1 // the event and its comma, or the closing bracket
	return nil
}

func (c *collector) flush(ctx context.Context) error {
	if len(c.batch) == 0 {
		return nil
	}
	body := make([]byte, 0, c.batchBytes+2)
	body = append(body, '[')
	body = append(body, bytes.Join(c.batch, []byte{','})...)
	body = append(body, ']')
	items, from := len(c.batch), c.from
	c.batch, c.from, c.batchBytes = nil, nil, 0

	res, err := c.sender.send(ctx, body)
	if err != nil {
		return fmt.Errorf("batch %d (%d events, %s to %s) not sent: %w", c.n.batches+1, items, from[0], from[items-1], err)
	}
	c.n.batches++
	c.n.sent += items
	c.n.accepted += res.Accepted
	c.n.duplicates += res.Duplicates
	c.n.rejected += len(res.Rejected)
	fmt.Fprintf(c.stdout, "batch %d: %d events: accepted %d, duplicates %d, rejected %d\n",
		c.n.batches, items, res.Accepted, res.Duplicates, len(res.Rejected))
	for _, r := range res.Rejected {
		where := "?"
		if r.Index >= 0 && r.Index < items {
			where = from[r.Index]
		}
		fmt.Fprintf(c.stdout, "  rejected: %s (index %d, event_id %s): %s\n", where, r.Index, r.EventID, r.Reason)
	}
	if got := res.Accepted + res.Duplicates + len(res.Rejected); got != items {
		fmt.Fprintf(c.stderr, "warning: batch %d: the server accounted for %d of %d items\n", c.n.batches, got, items)
	}
	return nil
}

// summary prints the counts: on stdout when sending, on stderr in a dry
// run (whose stdout holds only events).
func (c *collector) summary() {
	w := c.stdout
	n := c.n
	if c.cfg.dryRun {
		fmt.Fprintf(c.stderr, "summary: notifications %d, mapped %d, unmappable %d, invalid %d (dry run, nothing sent)\n",
			n.notifications, n.mapped, n.unmappable, n.invalid)
		return
	}
	fmt.Fprintf(w, "summary: notifications %d, mapped %d, unmappable %d, invalid %d; sent %d in %d batches: accepted %d, duplicates %d, rejected %d\n",
		n.notifications, n.mapped, n.unmappable, n.invalid, n.sent, n.batches, n.accepted, n.duplicates, n.rejected)
}
