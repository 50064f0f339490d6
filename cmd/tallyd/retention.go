package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/tallyhq/tally/cmd/tallyd/server"
	"github.com/tallyhq/tally/store/pgstore"
)

const retentionUsage = `Usage: tallyd retention [flags]

Applies retention once (docs/operations.md, Retention) and prints what it
did. Every --keep-* is a duration (Go's, such as 720h, or a number of days
such as 365d); 0, the default, keeps everything of its kind. --keep-events
drops the monthly partitions of events wholly older than it, after writing
a checkpoint of each resource with events in them, so that the projection
and its rebuild answer as before; an event older than the horizon that
arrives later is refused as a dead letter. It may run beside serving
replicas (nothing waits for it) and be repeated; run it from cron or a
timer. It needs PostgreSQL.

Flags (a flag on the command line > its TALLY_* environment variable > the default):
`

// days is a pflag.Value of a duration that also takes a number of days
// ("365d").
type days struct{ d *time.Duration }

func (v days) String() string {
	if v.d == nil || *v.d == 0 {
		return "0"
	}
	return v.d.String()
}

func (v days) Set(s string) error {
	d, err := parseDays(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

func (v days) Type() string { return "duration" }

// maxDays is the most days a time.Duration holds (about 292 years).
const maxDays = int64(1<<63-1) / int64(24*time.Hour)

// parseDays parses a Go duration or a whole number of days followed by d.
// Errors: anything else, or a negative duration.
func parseDays(s string) (time.Duration, error) {
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		v, err := strconv.ParseInt(n, 10, 64)
		if errors.Is(err, strconv.ErrRange) || err == nil && v > maxDays {
			return 0, fmt.Errorf("%q is more than %dd (about 292 years), the longest duration kept: give 0 to keep everything", s, maxDays)
		}
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration (such as 720h) nor a number of days (such as 365d)", s)
		}
		d = time.Duration(v) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q is not a duration (such as 720h) nor a number of days (such as 365d)", s)
		}
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	return d, nil
}

// retentionCmd runs `tallyd retention`.
func retentionCmd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := pflag.NewFlagSet("tallyd retention", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	// No default from the environment: --help would print the URL, its
	// password included.
	url := fs.String("database-url", "", "PostgreSQL URL (env TALLY_DATABASE_URL)")
	var o pgstore.RetentionOptions
	for _, f := range []struct {
		name, env, help string
		d               *time.Duration
	}{
		{"keep-events", "TALLY_KEEP_EVENTS", "keep the events of this long (whole UTC months go)", &o.KeepEvents},
		{"keep-dead-letters", "TALLY_KEEP_DEAD_LETTERS", "keep the dead letters received this long ago or later", &o.KeepDeadLetters},
		{"keep-audit", "TALLY_KEEP_AUDIT", "keep the audit rows of this long", &o.KeepAudit},
		{"keep-idempotency-keys", "TALLY_KEEP_IDEMPOTENCY_KEYS", "keep the idempotency keys bound this long ago or later", &o.KeepIdempotencyKeys},
		{"keep-deleted-events", "TALLY_KEEP_DELETED_EVENTS", "keep the correlated events soft-deleted this long ago or later", &o.KeepDeletedEvents},
	} {
		fs.Var(days{f.d}, f.name, f.help+"; 0: keep all (env "+f.env+")")
		if v := getenv(f.env); v != "" {
			d, err := parseDays(v)
			if err != nil {
				return fmt.Errorf("%w: %s: %w", errUsage, f.env, err)
			}
			*f.d = d
		}
	}
	fs.IntVar(&o.BatchSize, "batch-size", pgstore.DefaultRetentionBatchSize, "rows per deletion, resources per checkpoint transaction")
	help := fs.BoolP("help", "h", false, "print this help")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w (see tallyd retention --help)", errUsage, err)
	}
	if *help {
		fmt.Fprint(stdout, retentionUsage+fs.FlagUsages())
		return nil
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if *url == "" {
		*url = getenv("TALLY_DATABASE_URL")
	}
	if *url == "" {
		return fmt.Errorf("%w: retention needs --database-url (or TALLY_DATABASE_URL)", errUsage)
	}
	if o.BatchSize < 1 {
		return fmt.Errorf("%w: --batch-size must be at least 1", errUsage)
	}
	db, err := openMigrated(ctx, *url)
	if err != nil {
		return err
	}
	defer db.Close()
	start := time.Now()
	res, err := db.Retention(ctx, o)
	if err != nil {
		return err
	}
	stamp := func(t time.Time) string {
		if t.IsZero() {
			return "none"
		}
		return t.Format(time.RFC3339Nano)
	}
	fmt.Fprintf(stdout, "events horizon: %s; oldest event kept: %s\n", stamp(res.Horizon), stamp(res.OldestEvent))
	fmt.Fprintf(stdout, "checkpoints written: %d; partitions dropped: %d %v (%d events)\n", res.Checkpoints, len(res.PartitionsDropped), res.PartitionsDropped, res.EventsDropped)
	fmt.Fprintf(stdout, "deleted: %d dead letters, %d audit rows, %d idempotency keys, %d soft-deleted correlated events\n",
		res.DeadLetters, res.Audit, res.IdempotencyKeys, res.DeletedEvents)
	fmt.Fprintf(stdout, "retention done in %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// keepPartitionsAhead makes the partitions of the next months at once and
// every interval until ctx ends; a failure is logged and retried at the
// next tick.
func keepPartitionsAhead(ctx context.Context, db *pgstore.DB, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		made, err := db.KeepPartitionsAhead(ctx, 0)
		switch {
		case err != nil && ctx.Err() == nil:
			log.WarnContext(ctx, "partitions of the next months not made; the next try is in an hour (a batch makes its own month's on demand)", "err", err)
		case len(made) > 0:
			log.InfoContext(ctx, "partitions made ahead", "partitions", made)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// eventStorage reads db's events storage for the metrics.
func eventStorage(db *pgstore.DB) func(context.Context) (server.EventStorage, error) {
	return func(ctx context.Context) (server.EventStorage, error) {
		st, err := db.EventStorage(ctx)
		return server.EventStorage{Partitions: st.Partitions, Horizon: st.Horizon, OldestEvent: st.OldestEvent,
			PartitionsDropped: st.PartitionsDropped, EventsDropped: st.EventsDropped}, err
	}
}
