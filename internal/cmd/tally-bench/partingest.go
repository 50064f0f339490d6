package main

import (
	"context"
	"fmt"
	"time"

	"github.com/tallyhq/tally/ingest"
)

// phasePartitionIngest is the library path on the two layouts of events
// (PostgreSQL only; docs/performance.md, Partitioned events and their
// DDL): the whole workload through ingest.Service on pgstore into a new
// schema each run, partitioned by month as the product's migrations make
// it, or with events one plain table (pgtest.Unpartition, the baseline
// BenchmarkStoreUnpartitioned uses), runs times each. The runs alternate
// in pairs whose order turns (partitioned then plain, plain then
// partitioned, …), so that a drift of the machine's speed favours
// neither. Each run is checked as the library phase is (every answer,
// every event once, every dead letter, the projection). The acceptance
// figure is the ratio of the median rates, partitioned over plain: at
// least 0.95 (issue's acceptance: "ingest throughput on a partitioned
// table is ≥ 0.95× unpartitioned"); each result's CPU per event is the
// median over its runs.
func (b *bench) phasePartitionIngest(ctx context.Context, runs int) (parted, plain *phaseResult, err error) {
	parted = &phaseResult{Name: "library, events partitioned (median)", Unit: "events/s"}
	plain = &phaseResult{Name: "library, events one table (median)", Unit: "events/s"}
	var rates, dbCPU, goCPU [2][]float64
	var lats [2][]time.Duration
	for i, k := range layoutOrder(runs) {
		p := []*phaseResult{parted, plain}[k]
		run, lat, secs, err := b.partitionIngestRun(ctx, fmt.Sprintf("partingest%d", i), k == 1, fmt.Sprintf("%s, run %d", p.Name, len(rates[k])+1))
		if err != nil {
			return nil, nil, err
		}
		p.Problems = append(p.Problems, run.Problems...)
		if len(rates[k]) == 0 {
			p.Checks = append(p.Checks, run.Checks...)
		}
		rates[k] = append(rates[k], float64(b.w.Valid)/secs)
		dbCPU[k], goCPU[k] = append(dbCPU[k], run.DBCPUMicros), append(goCPU[k], run.GoCPUMicros)
		p.Count += b.w.Valid
		p.Seconds += secs
		lats[k] = append(lats[k], lat...)
	}
	for k, p := range []*phaseResult{parted, plain} {
		p.Rate = median(rates[k])
		p.DBCPUMicros, p.GoCPUMicros = median(dbCPU[k]), median(goCPU[k])
		p.P50Ms, p.P99Ms = percentiles(lats[k])
		p.Checks = append(p.Checks, fmt.Sprintf("%d runs (events/s %s; CPU µs/event db+go %s), every answer as sent", runs, rateList(rates[k]), cpuList(dbCPU[k], goCPU[k])))
	}
	return parted, plain, nil
}

// partitionIngestRun is one run of phasePartitionIngest into a new schema
// named schema, its events one plain table when plain: the run's checks,
// CPU per event, its batches' latencies and its seconds.
func (b *bench) partitionIngestRun(ctx context.Context, schema string, plain bool, label string) (*phaseResult, []time.Duration, float64, error) {
	u, err := b.pg.newSchema(ctx, schema)
	if err == nil && plain {
		err = unpartition(ctx, u)
	}
	if err != nil {
		return nil, nil, 0, err
	}
	st, closeSt, err := openPG(ctx, u)
	if err != nil {
		return nil, nil, 0, err
	}
	defer closeSt()
	svc, err := ingest.New(st, ingest.Options{})
	if err == nil {
		err = b.seedNames(ctx, st)
	}
	if err != nil {
		return nil, nil, 0, err
	}
	pl, err := pool(ctx, u, 1)
	if err != nil {
		return nil, nil, 0, err
	}
	defer pl.Close()
	rs := renderBatches(b.w.Batches)
	var t tally
	run := &phaseResult{}
	b.prog.begin(label, itemCount(b.w.Batches))
	b.checkpoint(ctx)
	cpu0 := b.snapshot(ctx, true)
	start := time.Now()
	b.runIngest(ctx, svc, b.w.Batches, rs, &t)
	secs := time.Since(start).Seconds()
	cpuPer(run, cpu0, b.snapshot(ctx, true), b.w.Valid)
	b.prog.end()
	t.finish(run, b.w.Valid, b.w.Dups)
	b.checkStored(ctx, run, pgReader{pl}, b.w.Valid, b.w.Invalid, true)
	return run, t.lat, secs, nil
}

// cpuList is the CPU per event of each run, "db+go".
func cpuList(db, gocpu []float64) string {
	s := ""
	for i := range db {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%.0f+%.0f", db[i], gocpu[i])
	}
	return s
}

// layoutOrder is the order of phasePartitionIngest's 2×runs runs, 0 for
// partitioned and 1 for one table: pairs whose order turns (0 1, 1 0,
// 0 1, …).
func layoutOrder(runs int) []int {
	out := make([]int, 0, 2*runs)
	for i := range 2 * runs {
		k := i % 2
		if (i/2)%2 == 1 {
			k = 1 - k
		}
		out = append(out, k)
	}
	return out
}
