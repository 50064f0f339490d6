// Command openstack-collector reads OpenStack oslo.messaging notifications
// as JSON lines (files or stdin), maps instances, volumes, floating IPs,
// images and load balancers to canonical lifecycle events with package
// [oslo], validates each one, and posts them in batches of up to 1000 to a
// tally server's POST /api/v1/events, printing the ingest result.
//
// A notification that cannot be mapped, or whose event is invalid, is
// reported on stderr with its file and line number and counted; nothing is
// dropped silently. It sends through [ingesthttp.Client], which retries
// transport failures and 408, 429 and 5xx answers, halves a batch answered
// 413, and never sends an item the server refused again.
//
// Usage:
//
//	openstack-collector --cloud os-prod-eu1 --token $TOKEN [flags] [file ...]
//	openstack-collector --cloud os-prod-eu1 --dry-run < notifications.jsonl
//
// Run it with --help for the flags.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/examples/openstack-collector/oslo"
	"github.com/tallyhq/tally/ingest/ingesthttp"
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
const maxBatch = ingesthttp.MaxBatch

type config struct {
	cloud, server, token string
	dryRun               bool
	gzip                 bool
	batchSize            int
	maxBatchBytes        int
	maxAttempts          int
	retryDelay           time.Duration
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
	fs.IntVar(&c.maxAttempts, "max-attempts", 5, "attempts per request in all; only transport failures and 408, 429 and 5xx answers are retried")
	fs.DurationVar(&c.retryDelay, "retry-delay", 200*time.Millisecond, "backoff before the first retry, doubled on each next one up to 30s, with jitter (a Retry-After is honoured up to 30s)")
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
	if c.retryDelay <= 0 {
		errs = append(errs, errors.New("--retry-delay must be positive"))
	}
	return c, errors.Join(errs...)
}

// counts are what the summary reports.
type counts struct {
	notifications, mapped, unmappable, invalid int
	sent, batches, requests                    int
	accepted, duplicates, rejected             int
	// stored counts items the server stored, accepted or duplicate, when
	// its answer could not tell which (ingesthttp.StatusStored); tooLarge
	// the items refused 413 alone; unsent those never answered.
	stored, tooLarge, unsent int
}

// collector holds one run's state.
type collector struct {
	cfg            config
	client         *ingesthttp.Client
	stdout, stderr io.Writer
	n              counts
	// the pending batch: each event and where it came from.
	batch []event.Event
	from  []string
}

// run is the whole program; main only wires the process to it.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, getenv, stderr)
	if err != nil {
		return err
	}
	c := &collector{cfg: cfg, stdout: stdout, stderr: stderr}
	if !cfg.dryRun {
		c.client, err = ingesthttp.NewClient(cfg.server, ingesthttp.ClientOptions{
			Token:         cfg.token,
			HTTPClient:    &http.Client{Timeout: cfg.timeout},
			MaxAttempts:   cfg.maxAttempts,
			Backoff:       cfg.retryDelay,
			BatchSize:     cfg.batchSize,
			MaxBatchBytes: cfg.maxBatchBytes,
			NoGzip:        !cfg.gzip,
		})
		if err != nil {
			return err
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
		c.n.mapped++
		if c.cfg.dryRun {
			b, err := o.Event.MarshalJSON()
			if err != nil { // a mapped event always encodes; report it anyway
				fmt.Fprintf(c.stderr, "%s: cannot encode: %v\n", where, err)
				continue
			}
			if _, err := fmt.Fprintf(c.stdout, "%s\n", b); err != nil {
				return err
			}
			continue
		}
		c.batch = append(c.batch, o.Event)
		c.from = append(c.from, where)
		if len(c.batch) >= c.cfg.batchSize {
			if err := c.flush(ctx); err != nil {
				return err
			}
		}
	}
}

// flush sends the pending batch through the client (which splits it
// further under --max-batch-bytes or on a 413) and reports every item that
// was not stored, by its file and line.
func (c *collector) flush(ctx context.Context) error {
	if len(c.batch) == 0 {
		return nil
	}
	events, from := c.batch, c.from
	c.batch, c.from = nil, nil
	res, err := c.client.Send(ctx, events)
	c.n.batches++
	c.n.requests += res.Requests
	var n counts
	for i, it := range res.Items {
		switch it.Status {
		case ingesthttp.StatusAccepted:
			n.accepted++
		case ingesthttp.StatusDuplicate:
			n.duplicates++
		case ingesthttp.StatusStored:
			n.stored++
		case ingesthttp.StatusRejected:
			n.rejected++
		case ingesthttp.StatusInvalid:
			n.invalid++
		case ingesthttp.StatusTooLarge:
			n.tooLarge++
		case ingesthttp.StatusUnsent:
			n.unsent++
		}
		if it.Reason != "" {
			fmt.Fprintf(c.stdout, "  %s: %s (index %d, event_id %s): %s\n", it.Status, from[i], i, it.EventID, it.Reason)
		}
	}
	c.n.sent += len(events) - n.unsent - n.invalid
	c.n.accepted += n.accepted
	c.n.duplicates += n.duplicates
	c.n.stored += n.stored
	c.n.rejected += n.rejected
	c.n.invalid += n.invalid
	c.n.tooLarge += n.tooLarge
	c.n.unsent += n.unsent
	fmt.Fprintf(c.stdout, "batch %d: %d events: accepted %d, duplicates %d, rejected %d%s\n",
		c.n.batches, len(events), n.accepted, n.duplicates, n.rejected, extra(n))
	if err != nil {
		return fmt.Errorf("batch %d (%d events, %s to %s): %d not sent: %w", c.n.batches, len(events), from[0], from[len(from)-1], n.unsent, err)
	}
	return nil
}

// extra names the counts that are seldom not zero.
func extra(n counts) string {
	s := ""
	for _, x := range []struct {
		name string
		n    int
	}{{"stored (accepted or duplicate)", n.stored}, {"too large", n.tooLarge}, {"unsent", n.unsent}} {
		if x.n > 0 {
			s += fmt.Sprintf(", %s %d", x.name, x.n)
		}
	}
	return s
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
	fmt.Fprintf(w, "summary: notifications %d, mapped %d, unmappable %d, invalid %d; sent %d in %d batches (%d requests): accepted %d, duplicates %d, rejected %d%s\n",
		n.notifications, n.mapped, n.unmappable, n.invalid, n.sent, n.batches, n.requests, n.accepted, n.duplicates, n.rejected, extra(n))
}
