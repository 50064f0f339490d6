package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tallyhq/tally/ingest"
)

// phasePartitions is the library path beside partition DDL (PostgreSQL
// only; docs/performance.md, Partitioned events and their DDL): runs times
// without and as often with a session that makes a partition of events
// (create and ATTACH, pgstore.DB.MakePartitions), detaches it
// CONCURRENTLY and drops it, in a loop as fast as it can (far more DDL
// than the monthly upkeep and retention ever run), alternating, each run
// the whole workload into a new schema. The ratio of the two p99s (of one
// batch, over every run of each kind) is the acceptance figure: at most 2.
func (b *bench) phasePartitions(ctx context.Context, runs int) (without, with *phaseResult, err error) {
	without = &phaseResult{Name: "library, no partition DDL (median)", Unit: "events/s"}
	with = &phaseResult{Name: "library, partition DDL in a loop (median)", Unit: "events/s"}
	var rates [2][]float64
	var lats [2][]time.Duration
	cycles := 0
	for i := range 2 * runs {
		k := i % 2
		p := []*phaseResult{without, with}[k]
		u, err := b.pg.newSchema(ctx, fmt.Sprintf("partitions%d", i))
		if err != nil {
			return nil, nil, err
		}
		st, closeSt, err := openPG(ctx, u)
		if err != nil {
			return nil, nil, err
		}
		svc, err := ingest.New(st, ingest.Options{})
		if err == nil {
			err = b.seedNames(ctx, st)
		}
		if err != nil {
			closeSt()
			return nil, nil, err
		}
		var stop func() (int, error)
		if k == 1 {
			if stop, err = partitionChurn(ctx, u); err != nil {
				closeSt()
				return nil, nil, err
			}
		}
		rs := renderBatches(b.w.Batches)
		var t tally
		b.prog.begin(fmt.Sprintf("%s, run %d", p.Name, i/2+1), itemCount(b.w.Batches))
		start := time.Now()
		b.runIngest(ctx, svc, b.w.Batches, rs, &t)
		secs := time.Since(start).Seconds()
		b.prog.end()
		if stop != nil {
			n, err := stop()
			if err != nil {
				p.Problems = append(p.Problems, "partition DDL: "+err.Error())
			}
			cycles += n
		}
		closeSt()
		var run phaseResult
		t.finish(&run, b.w.Valid, b.w.Dups)
		if pl, err := pool(ctx, u, 1); err != nil {
			run.Problems = append(run.Problems, "read back: "+err.Error())
		} else {
			b.checkStored(ctx, &run, pgReader{pl}, b.w.Valid, b.w.Invalid, true)
			pl.Close()
		}
		p.Problems = append(p.Problems, run.Problems...)
		if i < 2 {
			p.Checks = append(p.Checks, run.Checks...)
		}
		rates[k] = append(rates[k], float64(b.w.Valid)/secs)
		lats[k] = append(lats[k], t.lat...)
		p.Count += b.w.Valid
		p.Seconds += secs
	}
	for k, p := range []*phaseResult{without, with} {
		p.Rate = median(rates[k])
		p.P50Ms, p.P99Ms = percentiles(lats[k])
		p.Checks = append(p.Checks, fmt.Sprintf("%d runs (events/s %s), every answer as sent", runs, rateList(rates[k])))
	}
	with.Checks = append(with.Checks, fmt.Sprintf("%d partitions made, attached, detached concurrently and dropped meanwhile", cycles))
	return without, with, nil
}

// partitionChurn starts the DDL loop of bench.phasePartitions on the
// schema url selects, each cycle a month from January 1900 on; stop ends
// it and returns how many cycles ran and the first error.
func partitionChurn(ctx context.Context, url string) (stop func() (int, error), err error) {
	cycle, closeDDL, err := partitionDDL(ctx, url)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var (
		wg    sync.WaitGroup
		n     int
		first error
	)
	wg.Go(func() {
		for m := time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC); ctx.Err() == nil; m = m.AddDate(0, 1, 0) {
			if err := cycle(ctx, m); err != nil {
				if ctx.Err() == nil && first == nil {
					first = err
				}
				return
			}
			n++
		}
	})
	return func() (int, error) {
		cancel()
		wg.Wait()
		closeDDL()
		return n, first
	}, nil
}
