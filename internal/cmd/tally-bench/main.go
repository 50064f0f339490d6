// Command tally-bench measures tally's write paths against the physical
// limit of the machine, in one run on one database, and checks after every
// phase that what was stored is right (the performance rules).
//
// On PostgreSQL it creates a database of its own (dropped at exit, one
// migrated schema per phase) and runs, in order:
//
//  1. the ceiling: pgx CopyFrom of the same rows into the product's events
//     table (same columns and indexes, no checks, no projection), 2
//     connections, one COPY per batch;
//  2. the library path: ingest.Service.Ingest on pgstore, 2 goroutines,
//     batches of 1000 items, with size names, the seeded size schemas and
//     the projection;
//  3. the all-duplicates path: the same events again;
//     then, on PostgreSQL, the library path --partition-runs times without
//     and as often with partition DDL in a loop beside it (make, attach,
//     detach concurrently, drop), alternating: the ratio of the p99s;
//     then, on PostgreSQL, usage: --usage-resources resources with 10
//     events each stored through the store, a month of usage by day grouped
//     by project and resource type against PostgreSQL copying the same
//     events out once, --usage-runs times each, alternating;
//     then --partition-ingest-runs times into events partitioned by month
//     and as often into events as one plain table, alternating: the
//     ratio of the median rates, and the CPU per event of each;
//  4. the HTTP path: tallyd (started from --tallyd, or --url), 2 clients
//     posting 1000-item bodies;
//  5. the feed phase: the HTTP path again, --feed-runs times without
//     subscribers and as often with --feed-subscribers Server-Sent Events
//     subscribers on GET /api/v1/events/feed, alternating, each run new
//     events; the ratio of the medians, and the delivery latency (a
//     batch's last event at each subscriber after the batch's answer);
//  6. the correlation ceiling: the product's createEvent statements as bare
//     SQL through pgx on 64 connections;
//  7. correlation over HTTP: 64 producers.
//
// The OpenStack workload: five resource types with sizes valid for the
// seeded schemas (instance flavors and volume types sent as ids that size
// names replace), several clouds with one ingest credential each, 1 % late
// events (sent after a newer event of their resource), and configurable
// shares of duplicates and invalid items. The Meshery-shaped correlation
// traffic: 200 keys × 4 users, 12 % resolutions, 10 % of the creates sent
// with an idempotency key and retried.
//
// After each phase it checks: every event stored once, one dead letter per
// invalid item, each batch's answer (invalid items refused at their index),
// the projection equal to the bench's own fold of what it sent; at most one
// open correlated event per key, occurrence counts equal to what was sent,
// every retry replayed. A run whose checks fail exits 1; a run that cannot
// run exits 2.
//
// It prints events/s (creates/s), p50 and p99 of one call, tallyd's peak
// RSS (from /proc), the ratios to the ceilings, and the machine. --json
// writes the same as JSON on stdout. Traffic goes only to the database
// URL and to tallyd on loopback, or to --url.
//
//	go build -o /tmp/tallyd ./cmd/tallyd
//	go run ./internal/cmd/tally-bench --tallyd /tmp/tallyd
//	go run ./internal/cmd/tally-bench --tallyd /tmp/tallyd --store memory
//	go run ./internal/cmd/tally-bench --tallyd /tmp/tallyd --short   # CI: checks only
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/spf13/pflag"
)

type options struct {
	databaseURL  string
	store        string
	tallyd       string
	url          string
	events       int
	creates      int
	batch        int
	clouds       int
	dupShare     float64
	invalidShare float64
	lateShare    float64
	producers    int
	seed         uint64
	short        bool
	jsonOut      bool
	quiet        bool
	timeout      time.Duration
	tallydArgs   []string
	printCreds   bool
	cpuProfile   string
	serverPool   int
	feedRuns     int
	partRuns     int
	partIngest   int
	feedSubs     int
	feedEvents   int
	usageRes     int
	usageRuns    int
}

const (
	maxEvents  = 2_000_000
	maxCreates = 500_000
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	var o options
	fs := pflag.NewFlagSet("tally-bench", pflag.ContinueOnError)
	fs.StringVar(&o.databaseURL, "database-url", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable",
		"PostgreSQL server to bench on: a URL whose user may CREATE DATABASE (the bench creates its own and drops it)")
	fs.StringVar(&o.store, "store", "postgres", "postgres, or memory (the in-memory store: no ceilings, results labelled in-memory)")
	fs.StringVar(&o.tallyd, "tallyd", "", "path of a tallyd binary to start for the HTTP phases (go build -o /tmp/tallyd ./cmd/tallyd)")
	fs.StringVar(&o.url, "url", "", "use this running tallyd instead (started with the file --print-credentials writes, on an empty store)")
	fs.StringArrayVar(&o.tallydArgs, "tallyd-arg", nil, "an extra argument for the tallyd the bench starts (repeatable)")
	fs.IntVar(&o.events, "events", 100_000, fmt.Sprintf("distinct valid events per ingest phase (at most %d)", maxEvents))
	fs.IntVar(&o.creates, "creates", 20_000, fmt.Sprintf("correlation creates per phase, retries not counted (at most %d)", maxCreates))
	fs.IntVar(&o.batch, "batch", 1000, "items per batch (1..1000)")
	fs.IntVar(&o.clouds, "clouds", 4, "clouds, one ingest credential each")
	fs.Float64Var(&o.dupShare, "duplicates", 0.02, "share of items that repeat an item sent before")
	fs.Float64Var(&o.invalidShare, "invalid", 0.01, "share of items that break a rule (half the canonical schema, half a size schema)")
	fs.Float64Var(&o.lateShare, "late", 0.01, "share of events sent after a newer event of their resource")
	fs.IntVar(&o.producers, "producers", 64, "concurrent correlation producers (and bare-SQL connections)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the workload (and of the tokens)")
	fs.BoolVar(&o.short, "short", false, "a small run for CI: 3000 events, 600 creates, 8 producers; checks only, the rates mean nothing")
	fs.BoolVar(&o.jsonOut, "json", false, "write the report as JSON on stdout")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress line on stderr")
	fs.DurationVar(&o.timeout, "timeout", 20*time.Minute, "the whole run stops after this")
	fs.IntVar(&o.serverPool, "server-pool", 0, "pool_max_conns of the database URL the bench gives tallyd (0: tallyd's default)")
	fs.IntVar(&o.partRuns, "partition-runs", 2, "runs of the partition-DDL phase (PostgreSQL) without and with a partition made, attached, detached and dropped in a loop each, alternating (0: no such phase)")
	fs.IntVar(&o.partIngest, "partition-ingest-runs", 3, "runs of the library path into partitioned events and as many into events as one table (PostgreSQL), alternating: the ratio of the medians (0: no such phase; --short: 1)")
	fs.IntVar(&o.feedRuns, "feed-runs", 3, "runs of the feed phase with and without subscribers each, alternating (0: no feed phase)")
	fs.IntVar(&o.feedSubs, "feed-subscribers", 100, "SSE subscribers of GET /api/v1/events/feed attached during the feed phase's runs with subscribers")
	fs.IntVar(&o.feedEvents, "feed-events", 0, "distinct valid events per run of the feed phase (0: a quarter of --events)")
	fs.IntVar(&o.usageRes, "usage-resources", 100_000, "resources of the usage phase (PostgreSQL), 10 events each (0: no usage phase)")
	fs.IntVar(&o.usageRuns, "usage-runs", 3, "runs of the usage phase's query and of its ceiling (COPY the same events out) each, alternating")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the library phase (the Go side of ingestion, in this process) to this file")
	fs.BoolVar(&o.printCreds, "print-credentials", false, "print the credentials file a tallyd for --url needs, and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "tally-bench: %v (--help lists the flags)\n", err)
		return 2
	}
	if o.short {
		if !fs.Changed("events") {
			o.events = 3000
		}
		if !fs.Changed("creates") {
			o.creates = 600
		}
		if !fs.Changed("producers") {
			o.producers = 8
		}
		if !fs.Changed("usage-resources") {
			o.usageRes = 300
		}
		if !fs.Changed("partition-ingest-runs") {
			o.partIngest = 1
		}
		if !fs.Changed("timeout") {
			o.timeout = 5 * time.Minute
		}
	}
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "tally-bench:", err)
		return 2
	}
	b := newBench(o)
	if o.printCreds {
		os.Stdout.Write(b.creds.file(b.w.Clouds, b.cc))
		return 0
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, o.timeout)
	defer cancelT()

	stop := make(chan struct{})
	progDone := make(chan struct{})
	go func() { b.prog.run(stop); close(progDone) }()
	err := b.run(ctx)
	close(stop)
	<-progDone
	if err != nil {
		b.rep.Errors = append(b.rep.Errors, err.Error())
	}
	b.rep.OK = b.rep.ok()
	if o.jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(b.rep)
	} else {
		b.rep.print(os.Stdout)
	}
	switch {
	case err != nil:
		return 2
	case !b.rep.OK:
		return 1
	}
	return 0
}

func (o *options) validate() error {
	var errs []error
	if o.store != "postgres" && o.store != "memory" {
		errs = append(errs, fmt.Errorf("--store: postgres or memory, not %q", o.store))
	}
	for _, r := range []struct {
		name        string
		v, min, max int
	}{
		{"--events", o.events, 1, maxEvents}, {"--creates", o.creates, 1, maxCreates},
		{"--feed-runs", o.feedRuns, 0, 20}, {"--feed-subscribers", o.feedSubs, 1, 1000}, {"--partition-runs", o.partRuns, 0, 20},
		{"--usage-resources", o.usageRes, 0, 200_000}, {"--usage-runs", o.usageRuns, 1, 20},
		{"--partition-ingest-runs", o.partIngest, 0, 20},
		{"--feed-events", o.feedEvents, 0, maxEvents}, {"--batch", o.batch, 1, 1000},
		{"--clouds", o.clouds, 1, 100}, {"--producers", o.producers, 1, 256},
	} {
		if r.v < r.min || r.v > r.max {
			errs = append(errs, fmt.Errorf("%s: %d..%d", r.name, r.min, r.max))
		}
	}
	for _, s := range []struct {
		name string
		v    float64
	}{{"--duplicates", o.dupShare}, {"--invalid", o.invalidShare}, {"--late", o.lateShare}} {
		if s.v < 0 || s.v > 0.5 {
			errs = append(errs, fmt.Errorf("%s: 0..0.5", s.name))
		}
	}
	if !o.printCreds && o.tallyd == "" && o.url == "" {
		errs = append(errs, errors.New("--tallyd or --url is required (the HTTP phases)"))
	}
	if o.tallyd != "" && o.url != "" {
		errs = append(errs, errors.New("--tallyd and --url exclude each other"))
	}
	return errors.Join(errs...)
}

func newBench(o options) *bench {
	prefix := fmt.Sprintf("bench%d", o.seed)
	w := generate(genConfig{Seed: o.seed, Prefix: prefix, Clouds: o.clouds, Events: o.events, BatchSize: o.batch,
		LateShare: o.lateShare, DupShare: o.dupShare, InvalidShare: o.invalidShare})
	cc := corrConfig{Seed: o.seed, Org: "bench-org", Prefix: prefix, Creates: o.creates, Keys: 200, Users: 4,
		Producers: o.producers, Resolve: 0.12, Retry: 0.10}
	b := &bench{opt: o, w: w, cc: cc, creds: makeCreds(o.seed, w.Clouds, cc), prog: newProgress(o.quiet)}
	store := "postgresql"
	if o.store == "memory" {
		store = "in-memory"
	}
	b.rep = &report{Store: store, Short: o.short, Machine: readMachine(), Workload: map[string]any{
		"events": w.Valid, "batches": len(w.Batches), "batch_items": o.batch, "clouds": len(w.Clouds), "resource_types": len(resourceSpecs),
		"late": w.Late, "duplicates": w.Dups, "invalid": w.Invalid,
		"creates": o.creates, "producers": o.producers, "keys": fmt.Sprintf("%d×%d users", cc.Keys, cc.Users),
		"resolutions": cc.Resolve, "retried_with_key": cc.Retry, "seed": o.seed, "server_pool": o.serverPool,
	}}
	return b
}

func (b *bench) run(ctx context.Context) error {
	if b.opt.store == "postgres" {
		pg, err := createDatabase(ctx, b.opt.databaseURL)
		if err != nil {
			return err
		}
		b.pg = pg
		defer func() {
			b.prog.note("dropping database %s", pg.name)
			if err := pg.drop(); err != nil {
				b.rep.Errors = append(b.rep.Errors, fmt.Sprintf("drop database %s: %v", pg.name, err))
			}
		}()
		b.prog.note("database %s created (dropped at exit)", pg.name)
		if b.rep.Machine.PostgreSQL, err = machinePG(ctx, pg.admin); err != nil {
			return err
		}
	}
	add := func(p *phaseResult) {
		b.prog.end()
		b.rep.Phases = append(b.rep.Phases, p)
		b.prog.note("%-40s %10s %s  p50 %.1f ms  p99 %.1f ms  %s", p.Name, thousands(p.Rate), p.Unit, p.P50Ms, p.P99Ms, map[bool]string{true: "checks ok", false: "CHECKS FAILED"}[len(p.Problems) == 0])
	}
	var ceiling, lib, dup, web, corrSQL, corrWeb *phaseResult
	var err error
	if b.pg != nil {
		if ceiling, err = b.phaseCeiling(ctx); err != nil {
			return fmt.Errorf("copy ceiling: %w", err)
		}
		add(ceiling)
	}
	ps, err := b.phaseLibrary(ctx)
	if err != nil {
		return fmt.Errorf("library: %w", err)
	}
	lib, dup = ps[0], ps[1]
	add(lib)
	add(dup)
	if b.pg != nil {
		if err := b.partitionPhases(ctx, add); err != nil {
			return err
		}
	}
	if b.pg != nil && b.opt.usageRes > 0 {
		read, query, err := b.phaseUsage(ctx, b.opt.usageRes, b.opt.usageRuns)
		if err != nil {
			return fmt.Errorf("usage: %w", err)
		}
		add(read)
		add(query)
		b.rep.Ratios = append(b.rep.Ratios, ratio{"usage query / reading its events once (COPY out), time", query.Seconds / read.Seconds, "target ≤ 2.0"})
	}
	if err := b.startServer(ctx); err != nil {
		return fmt.Errorf("start tallyd: %w", err)
	}
	defer b.srv.stop()
	if web, err = b.phaseHTTP(ctx); err != nil {
		return fmt.Errorf("HTTP: %w", err)
	}
	add(web)
	if b.opt.feedRuns > 0 {
		n := b.opt.feedEvents
		if n == 0 {
			n = max(b.opt.events/4, 1)
		}
		without, with, err := b.phaseFeed(ctx, b.opt.feedRuns, b.opt.feedSubs, n)
		if err != nil {
			return fmt.Errorf("feed: %w", err)
		}
		add(without)
		add(with)
		b.rep.Ratios = append(b.rep.Ratios, ratio{fmt.Sprintf("HTTP with %d feed subscribers / without (medians)", b.opt.feedSubs), with.Rate / without.Rate, "target ≥ 0.95"})
		b.rep.Ratios = append(b.rep.Ratios, ratio{"feed delivery p99 after the write's answer, ms (one replica)", with.DeliveryP99Ms, "target ≤ 100"})
	}
	ops := corrOps(b.cc)
	if b.pg != nil {
		if corrSQL, err = b.phaseCorrSQL(ctx, ops); err != nil {
			return fmt.Errorf("correlation SQL: %w", err)
		}
		add(corrSQL)
	}
	if corrWeb, err = b.phaseCorrHTTP(ctx, ops); err != nil {
		return fmt.Errorf("correlation HTTP: %w", err)
	}
	add(corrWeb)
	if ceiling != nil {
		b.ceilingRatios(ceiling, lib, dup, web, corrSQL, corrWeb)
	}
	if web.ServerRSSEarlyMiB > 0 {
		target := "target ≤ 1.2"
		if b.pg == nil {
			target = "none: the in-memory store holds every event"
		}
		b.rep.Ratios = append(b.rep.Ratios, ratio{"server RSS end / after a tenth (HTTP ingest)", web.ServerRSSEndMiB / web.ServerRSSEarlyMiB, target})
	}
	if ctx.Err() != nil {
		return fmt.Errorf("stopped: %w", ctx.Err())
	}
	return nil
}

// ceilingRatios adds the ratios of the paths to their ceilings, by rate
// and by CPU per operation.
func (b *bench) ceilingRatios(ceiling, lib, dup, web, corrSQL, corrWeb *phaseResult) {
	b.rep.Ratios = append(b.rep.Ratios,
		ratio{"library / copy ceiling", lib.Rate / ceiling.Rate, "target ≥ 0.50"},
		ratio{"HTTP / copy ceiling", web.Rate / ceiling.Rate, "target ≥ 0.45"},
		ratio{"all duplicates / copy ceiling", dup.Rate / ceiling.Rate, "target ≥ 1.0"},
		ratio{"correlation HTTP / bare SQL", corrWeb.Rate / corrSQL.Rate, fmt.Sprintf("target ≥ 0.6, p99 ≤ 50 ms (p99 %.0f ms)", corrWeb.P99Ms)})
	// The same ratios from CPU per operation (the ceiling's over the
	// path's): what the rates would be on an otherwise idle machine
	// whose cores the database and the Go process share.
	if cpu := func(p *phaseResult) float64 { return p.DBCPUMicros + p.GoCPUMicros }; cpu(ceiling) > 0 && cpu(lib) > 0 && cpu(web) > 0 && cpu(dup) > 0 && cpu(corrWeb) > 0 {
		b.rep.Ratios = append(b.rep.Ratios,
			ratio{"CPU: copy ceiling / library", cpu(ceiling) / cpu(lib), "CPU per event, db + go"},
			ratio{"CPU: copy ceiling / HTTP", cpu(ceiling) / cpu(web), "CPU per event, db + go"},
			ratio{"CPU: copy ceiling / all duplicates", cpu(ceiling) / cpu(dup), "CPU per event, db + go"},
			ratio{"CPU: bare SQL / correlation HTTP", cpu(corrSQL) / cpu(corrWeb), "CPU per create, db + go"})
	}
}

// partitionPhases runs the phases of partitioned events (PostgreSQL):
// the library path beside partition DDL, then on partitioned events
// against one table, each when its flag asks for runs, and adds their
// ratios.
func (b *bench) partitionPhases(ctx context.Context, add func(*phaseResult)) error {
	if b.opt.partRuns > 0 {
		without, with, err := b.phasePartitions(ctx, b.opt.partRuns)
		if err != nil {
			return fmt.Errorf("partitions: %w", err)
		}
		add(without)
		add(with)
		b.rep.Ratios = append(b.rep.Ratios, ratio{"library p99 with partition DDL / without", with.P99Ms / without.P99Ms, "target ≤ 2.0"})
	}
	if b.opt.partIngest > 0 {
		parted, plain, err := b.phasePartitionIngest(ctx, b.opt.partIngest)
		if err != nil {
			return fmt.Errorf("partitioned ingest: %w", err)
		}
		add(parted)
		add(plain)
		b.rep.Ratios = append(b.rep.Ratios, ratio{"library partitioned / one table (medians)", parted.Rate / plain.Rate, "target ≥ 0.95"})
		if cp, cu := parted.DBCPUMicros+parted.GoCPUMicros, plain.DBCPUMicros+plain.GoCPUMicros; cp > 0 && cu > 0 {
			b.rep.Ratios = append(b.rep.Ratios, ratio{"CPU: one table / partitioned", cu / cp, "CPU per event, db + go (medians)"})
		}
	}
	return nil
}
