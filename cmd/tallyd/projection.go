package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
)

const projectionUsage = `Usage: tallyd projection rebuild [flags]

Recomputes the projection of current resources from the stored events, in
bounded transactions (--batch-size resources each), printing progress. The
result equals the incremental projection, and a rebuild may run beside a
serving tallyd and be repeated. It needs PostgreSQL: the in-memory store
lives in the serving process only.

Flags (a flag on the command line > its TALLY_* environment variable > the default):
`

// projectionCmd runs `tallyd projection rebuild`.
func projectionCmd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "rebuild" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprint(stdout, projectionUsage)
			return nil
		}
		return fmt.Errorf("%w: projection takes the subcommand rebuild (see tallyd projection --help)", errUsage)
	}
	fs := pflag.NewFlagSet("tallyd projection rebuild", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	// No default from the environment: --help would print the URL, its
	// password included.
	url := fs.String("database-url", "", "PostgreSQL URL (env TALLY_DATABASE_URL)")
	cloud := fs.String("cloud", "", "only the resources of this cloud")
	resourceType := fs.String("resource-type", "", "only the resources of this type")
	batch := fs.Int("batch-size", 500, "resources rebuilt per transaction")
	help := fs.BoolP("help", "h", false, "print this help")
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%w: %w (see tallyd projection --help)", errUsage, err)
	}
	if *help {
		fmt.Fprint(stdout, projectionUsage+fs.FlagUsages())
		return nil
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if *url == "" {
		*url = getenv("TALLY_DATABASE_URL")
	}
	if *url == "" {
		return fmt.Errorf("%w: projection rebuild needs --database-url (or TALLY_DATABASE_URL)", errUsage)
	}
	if *batch < 1 {
		return fmt.Errorf("%w: --batch-size must be at least 1", errUsage)
	}
	db, err := openMigrated(ctx, *url)
	if err != nil {
		return err
	}
	defer db.Close()
	isvc, err := ingest.New(db.Ingest(), ingest.Options{})
	if err != nil {
		return err
	}
	svc, err := projection.New(db.Projection(), isvc)
	if err != nil {
		return err
	}
	start := time.Now()
	n, err := svc.Rebuild(ctx, projection.RebuildQuery{Cloud: *cloud, ResourceType: *resourceType, BatchSize: *batch},
		func(done int) { fmt.Fprintf(stdout, "rebuilt %d resources\n", done) })
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "projection rebuilt: %d resources in %s\n", n, time.Since(start).Round(time.Millisecond))
	return nil
}
