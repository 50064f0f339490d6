// Command openstack-reconciler lists one OpenStack cloud with gophercloud
// and posts what it saw to a tally server's POST
// /api/v1/clouds/{cloud}/sync as one observation (docs/reconciliation.md):
// every server of every project with its flavor's size, every volume with
// its type's id, cinder's volume types as the cloud's size names, and the
// servers nova reports deleted within --deletes-window. The server turns the
// drift into sync.create, sync.update and sync.delete events.
//
// Before listing anything it checks that the account sees the whole cloud:
// its token must hold --reach-role (admin by default) and one server
// listing across all projects must be answered. A refusal ends the run with
// an error naming the clouds.yaml entry, and nothing is posted. An account
// without the role would get narrowed listings that cinder answers 200 OK;
// --allow-narrowed posts such a run without any complete type, so it
// creates and updates but never deletes.
//
// Usage:
//
//	openstack-reconciler --os-cloud prod-eu1 --cloud os-prod-eu1 --server https://tally.example --token $TOKEN
//	openstack-reconciler --os-cloud prod-eu1 --cloud os-prod-eu1 --dry-run
//
// Run it with --help for the flags; run it on a schedule (cron, a
// Kubernetes CronJob), once per cloud.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/spf13/pflag"

	"github.com/tallyhq/tally/ingest/ingesthttp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, nil)
	stop()
	if errors.Is(err, pflag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "openstack-reconciler:", err)
		os.Exit(1)
	}
}

type options struct {
	src                  source
	cloud, server, token string
	dryRun               bool
	timeout              time.Duration
}

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	var c options
	fs := pflag.NewFlagSet("openstack-reconciler", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	fs.StringVar(&c.src.entry, "os-cloud", env("OS_CLOUD", ""), "the clouds.yaml entry to list (env OS_CLOUD)")
	fs.StringVar(&c.src.cloudsYAML, "clouds-yaml", env("OS_CLIENT_CONFIG_FILE", ""), "the clouds.yaml file; empty searches ./, ~/.config/openstack/, /etc/openstack/ (env OS_CLIENT_CONFIG_FILE)")
	fs.StringVar(&c.cloud, "cloud", env("TALLY_CLOUD", ""), "the cloud's name in tally, the reconcile credential's scope (env TALLY_CLOUD)")
	fs.StringVar(&c.server, "server", env("TALLY_SERVER", "http://127.0.0.1:8080"), "the tally server (env TALLY_SERVER)")
	fs.StringVar(&c.token, "token", env("TALLY_TOKEN", ""), "a bearer token with the reconcile role (env TALLY_TOKEN)")
	fs.StringVar(&c.src.reachRole, "reach-role", "admin", "the Keystone role that gives cloud-wide reach")
	fs.BoolVar(&c.src.allowNarrow, "allow-narrowed", false, "without that role, post creates and updates only (no complete type, no delete) instead of refusing")
	fs.DurationVar(&c.src.deleteWindow, "deletes-window", 24*time.Hour, "how far back nova's deleted servers are read (at least the schedule's period)")
	fs.BoolVar(&c.dryRun, "dry-run", false, "print the observation as JSON instead of posting it")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Minute, "the whole run's time limit")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: openstack-reconciler --os-cloud ENTRY --cloud CLOUD [flags]\nA flag wins over its environment variable.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var errs []error
	if c.src.entry == "" {
		errs = append(errs, errors.New("--os-cloud (or OS_CLOUD) is required"))
	}
	if c.cloud == "" {
		errs = append(errs, errors.New("--cloud (or TALLY_CLOUD) is required"))
	}
	if !c.dryRun && c.token == "" {
		errs = append(errs, errors.New("--token (or TALLY_TOKEN) is required unless --dry-run"))
	}
	if c.src.deleteWindow <= 0 {
		errs = append(errs, errors.New("--deletes-window must be positive"))
	}
	return c, errors.Join(errs...)
}

// run is the whole command; hc, when not nil, sends every request (the
// tests' servers).
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, hc *http.Client) error {
	c, err := parseFlags(args, getenv, stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	c.src.httpClient, c.src.now = hc, time.Now
	obs, err := observe(ctx, c.src)
	if err != nil {
		return err
	}
	if c.dryRun {
		b, err := json.Marshal(obs, jsontext.WithIndent("  "))
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, string(b))
		return err
	}
	client, err := ingesthttp.NewClient(c.server, ingesthttp.ClientOptions{Token: c.token, HTTPClient: hc})
	if err != nil {
		return err
	}
	out, err := client.Sync(ctx, c.cloud, obs)
	if err != nil {
		return fmt.Errorf("post the observation of %q: %w", c.cloud, err)
	}
	_, err = fmt.Fprintf(stdout, "run %d of %s: %d resources, %d deletes dated, %d size names; created %d, updated %d, deleted %d, unchanged %d, skipped %d, refused %d\n",
		out.RunID, c.cloud, len(obs.Resources), len(obs.Deletes), len(obs.SizeNames),
		out.Created, out.Updated, out.Deleted, out.Unchanged, out.Skipped, out.Refused)
	return err
}
