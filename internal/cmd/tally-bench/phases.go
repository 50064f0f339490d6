package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"time"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/sizenames"
)

// bench is one run.
type bench struct {
	opt   options
	w     *workload
	cc    corrConfig
	creds creds
	pg    *pgServer // nil on the in-memory store
	srv   *server   // the server of the HTTP phases
	prog  *progress
	rep   *report
	// httpSchema is the schema tallyd serves (PostgreSQL).
	httpURL string
	// noCheckpoint: the server refused CHECKPOINT (see checkpoint).
	noCheckpoint bool
}

// checkpoint asks PostgreSQL for a checkpoint before a timed phase, so that
// the pages earlier phases dirtied are not flushed during this one: a
// checkpoint that landed in the correlation phase doubled its p99. Best
// effort: a user without the right (a superuser or pg_checkpoint) runs the
// phases without one, and the report's machine says which
// (checkpoint_before_phases).
func (b *bench) checkpoint(ctx context.Context) {
	if b.pg == nil || b.noCheckpoint {
		return
	}
	if b.rep.Machine.PostgreSQL == nil {
		b.rep.Machine.PostgreSQL = map[string]string{}
	}
	if _, err := b.pg.admin.Exec(ctx, "CHECKPOINT"); err != nil {
		b.noCheckpoint = true
		b.rep.Machine.PostgreSQL["checkpoint_before_phases"] = "no: " + err.Error()
		return
	}
	b.rep.Machine.PostgreSQL["checkpoint_before_phases"] = "yes"
}

// ingestReader reads back what an ingest phase stored; -1 means the count
// cannot be read that way.
type ingestReader interface {
	eventCount(ctx context.Context) (int, error)
	deadLetterCount(ctx context.Context) (int, error)
	resources(ctx context.Context) (map[resKey]row, error)
}

// storeReader reads through the product's Store interface (the in-memory
// library phases).
type storeReader struct {
	st     benchStore
	clouds []string
}

func (r storeReader) eventCount(ctx context.Context) (int, error) {
	// Every stored event is folded into its resource's row: count the
	// histories of the rows (ingest.Store lists no raw events).
	n := 0
	for _, c := range r.clouds {
		var after *projection.Key
		for {
			rs, err := r.st.Projection().List(ctx, projection.Query{Cloud: c, After: after, Limit: 1000})
			if err != nil {
				return 0, err
			}
			for _, x := range rs {
				h, err := r.st.Projection().History(ctx, x.Key)
				if err != nil {
					return 0, err
				}
				n += len(h)
			}
			if len(rs) < 1000 {
				break
			}
			k := rs[len(rs)-1].Key
			after = &k
		}
	}
	return n, nil
}

func (r storeReader) deadLetterCount(ctx context.Context) (int, error) {
	dl, err := r.st.DeadLetters(ctx, ingest.DeadLetterQuery{})
	return len(dl), err
}

func (r storeReader) resources(ctx context.Context) (map[resKey]row, error) {
	out := map[resKey]row{}
	for _, c := range r.clouds {
		var after *projection.Key
		for {
			rs, err := r.st.Projection().List(ctx, projection.Query{Cloud: c, After: after, Limit: 1000})
			if err != nil {
				return nil, err
			}
			for _, x := range rs {
				out[resKey{x.Cloud, x.ResourceType, x.ResourceID}] = row{Platform: x.Platform, ProjectID: x.ProjectID, State: x.State,
					Size: x.Size, CreatedAt: x.CreatedAt, DeletedAt: x.DeletedAt, FirstEventAt: x.FirstEventAt, LastEventAt: x.LastEventAt,
					LastEventType: x.LastEventType, LastEventID: x.LastEventID}
			}
			if len(rs) < 1000 {
				break
			}
			k := rs[len(rs)-1].Key
			after = &k
		}
	}
	return out, nil
}

// httpIngestReader reads the projection through the read routes; event and
// dead-letter counts are not read that way (-1).
type httpIngestReader struct {
	httpReader
	clouds []string
}

func (httpIngestReader) eventCount(context.Context) (int, error)      { return -1, nil }
func (httpIngestReader) deadLetterCount(context.Context) (int, error) { return -1, nil }
func (r httpIngestReader) resources(ctx context.Context) (map[resKey]row, error) {
	return r.httpReader.resources(ctx, r.clouds)
}

// checkStored is the check after an ingest phase: every event stored once,
// every invalid item kept once as a dead letter, the projection equal to the
// bench's own fold.
func (b *bench) checkStored(ctx context.Context, p *phaseResult, rd ingestReader, wantEvents, wantDead int, names bool) {
	n, err := rd.eventCount(ctx)
	switch {
	case err != nil:
		p.Problems = append(p.Problems, fmt.Sprintf("count events: %v", err))
	case n >= 0 && n != wantEvents:
		p.Problems = append(p.Problems, fmt.Sprintf("every event once: the store holds %d events, %d distinct valid ones were sent", n, wantEvents))
	case n >= 0:
		p.Checks = append(p.Checks, fmt.Sprintf("every event once (%d stored)", n))
	}
	if wantDead >= 0 {
		n, err = rd.deadLetterCount(ctx)
		switch {
		case err != nil:
			p.Problems = append(p.Problems, fmt.Sprintf("count dead letters: %v", err))
		case n >= 0 && n != wantDead:
			p.Problems = append(p.Problems, fmt.Sprintf("dead letters: %d stored, %d invalid items sent", n, wantDead))
		case n >= 0:
			p.Checks = append(p.Checks, fmt.Sprintf("one dead letter per invalid item (%d)", n))
		}
	}
	got, err := rd.resources(ctx)
	if err != nil {
		p.Problems = append(p.Problems, fmt.Sprintf("read projection: %v", err))
		return
	}
	evs := b.w.Events
	if !names {
		evs = withoutNames(evs)
	}
	want := foldModel(evs)
	if pr := compareProjection(want, got, 10); len(pr) > 0 {
		p.Problems = append(p.Problems, pr...)
	} else {
		p.Checks = append(p.Checks, fmt.Sprintf("projection = the bench's own fold (%d resources)", len(want)))
	}
}

// withoutNames is evs as a store without size names keeps them.
func withoutNames(evs []*genEvent) []*genEvent {
	out := make([]*genEvent, len(evs))
	for i, e := range evs {
		c := *e
		c.SizeWant = c.SizeSent
		out[i] = &c
	}
	return out
}

// checkAnswers compares one batch's answer with what it held: every
// invalid item refused, at its index, and nothing else.
func checkAnswer(b batch, accepted, dups int, rejected []int) (acc, dup int, problem string) {
	var want []int
	for i, it := range b.Items {
		if it.Kind == itemInvalidSchema || it.Kind == itemInvalidSize {
			want = append(want, i)
		}
	}
	if !slices.Equal(want, rejected) {
		return accepted, dups, fmt.Sprintf("batch of %s: refused items %v, the invalid ones are %v", b.Cloud, rejected, want)
	}
	if accepted+dups+len(rejected) != len(b.Items) {
		return accepted, dups, fmt.Sprintf("batch of %s: %d accepted + %d duplicates + %d refused is not its %d items", b.Cloud, accepted, dups, len(rejected), len(b.Items))
	}
	return accepted, dups, ""
}

// tally sums the answers of an ingest phase and checks them.
type tally struct {
	mu       sync.Mutex
	accepted int
	dups     int
	problems []string
	lat      []time.Duration
}

func (t *tally) add(b batch, accepted, dups int, rejected []int, d time.Duration, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lat = append(t.lat, d)
	if err != nil {
		if len(t.problems) < 10 {
			t.problems = append(t.problems, err.Error())
		}
		return
	}
	a, du, pr := checkAnswer(b, accepted, dups, rejected)
	t.accepted += a
	t.dups += du
	if pr != "" && len(t.problems) < 10 {
		t.problems = append(t.problems, pr)
	}
}

func (t *tally) finish(p *phaseResult, wantAccepted, wantDups int) {
	p.Problems = append(p.Problems, t.problems...)
	if t.accepted != wantAccepted || t.dups != wantDups {
		p.Problems = append(p.Problems, fmt.Sprintf("answers: %d accepted, %d duplicates; sent %d distinct valid events and %d duplicates", t.accepted, t.dups, wantAccepted, wantDups))
	} else {
		p.Checks = append(p.Checks, fmt.Sprintf("answers: %d accepted, %d duplicates, every invalid item refused at its index", t.accepted, t.dups))
	}
	p.P50Ms, p.P99Ms = percentiles(t.lat)
}

func timed(p *phaseResult, count int, start time.Time) {
	p.Count = count
	p.Seconds = time.Since(start).Seconds()
	if p.Seconds > 0 {
		p.Rate = float64(count) / p.Seconds
	}
}

// phaseCeiling: pgx CopyFrom of the same rows into the product's events
// table, 2 connections, one COPY per batch; no checks, no projection.
func (b *bench) phaseCeiling(ctx context.Context) (*phaseResult, error) {
	p := &phaseResult{Name: "copy ceiling (pgx CopyFrom, 2 conns)", Unit: "events/s"}
	u, err := b.pg.newSchema(ctx, "ceiling")
	if err != nil {
		return nil, err
	}
	pl, err := pool(ctx, u, 2)
	if err != nil {
		return nil, err
	}
	defer pl.Close()
	rows := copyRows(b.w.Batches)
	b.prog.begin(p.Name, b.w.Valid)
	b.checkpoint(ctx)
	cpu0 := b.snapshot(ctx, true)
	start := time.Now()
	lat, err := runCopy(ctx, pl, rows, 2, b.prog)
	timed(p, b.w.Valid, start)
	cpuPer(p, cpu0, b.snapshot(ctx, true), b.w.Valid)
	p.P50Ms, p.P99Ms = percentiles(lat)
	if err != nil {
		p.Problems = append(p.Problems, fmt.Sprintf("copy: %v", err))
	}
	n, err := pgReader{pl}.eventCount(ctx)
	if err != nil || n != b.w.Valid {
		p.Problems = append(p.Problems, fmt.Sprintf("every event once: %d rows copied of %d (%v)", n, b.w.Valid, err))
	} else {
		p.Checks = append(p.Checks, fmt.Sprintf("every event once (%d rows)", n))
	}
	return p, nil
}

// seedNames writes each cloud's size names through the product's
// reconciliation entry point.
func (b *bench) seedNames(ctx context.Context, st sizenames.Store) error {
	for _, c := range b.w.Clouds {
		if err := sizenames.ReplaceCloud(ctx, st, c, b.w.SizeNames[c]); err != nil {
			return err
		}
	}
	return nil
}

// runIngest sends bs through the library, 2 goroutines, and sums the
// answers.
func (b *bench) runIngest(ctx context.Context, svc *ingest.Service, bs []batch, rs []rendered, t *tally) {
	work := make(chan int)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for i := range work {
				caller := ingest.Caller{Credential: "bench-" + bs[i].Cloud, Platform: "openstack", Cloud: bs[i].Cloud}
				s := time.Now()
				res, err := svc.Ingest(ctx, caller, rs[i].Items)
				d := time.Since(s)
				var rej []int
				for _, r := range res.Rejected {
					rej = append(rej, r.Index)
				}
				t.add(bs[i], res.Accepted, res.Duplicates, rej, d, err)
				b.prog.add(len(bs[i].Items))
			}
		})
	}
	for i := range bs {
		select {
		case work <- i:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
}

func itemCount(bs []batch) int {
	n := 0
	for _, x := range bs {
		n += len(x.Items)
	}
	return n
}

// phaseLibrary: ingest.Service.Ingest on the store, 2 goroutines, batches
// of BatchSize items with size names, the seeded schemas and the
// projection; then the all-duplicates phase on the same store.
func (b *bench) phaseLibrary(ctx context.Context) ([]*phaseResult, error) {
	var (
		st      benchStore
		rd      ingestReader
		closeSt = func() {}
	)
	if b.pg != nil {
		u, err := b.pg.newSchema(ctx, "library")
		if err != nil {
			return nil, err
		}
		st, closeSt, err = openPG(ctx, u)
		if err != nil {
			return nil, err
		}
		pl, err := pool(ctx, u, 1)
		if err != nil {
			return nil, err
		}
		defer pl.Close()
		rd = pgReader{pl}
	} else {
		st = newMemory()
		rd = storeReader{st, b.w.Clouds}
	}
	defer closeSt()
	if err := b.seedNames(ctx, st); err != nil {
		return nil, err
	}
	svc, err := ingest.New(st, ingest.Options{})
	if err != nil {
		return nil, err
	}

	lib := &phaseResult{Name: "library (ingest.Service, 2 goroutines)", Unit: "events/s"}
	rs := renderBatches(b.w.Batches)
	var t tally
	b.prog.begin(lib.Name, itemCount(b.w.Batches))
	stopProfile, err := startProfile(b.opt.cpuProfile)
	if err != nil {
		return nil, err
	}
	b.checkpoint(ctx)
	cpu0 := b.snapshot(ctx, true)
	start := time.Now()
	b.runIngest(ctx, svc, b.w.Batches, rs, &t)
	timed(lib, b.w.Valid, start)
	cpuPer(lib, cpu0, b.snapshot(ctx, true), b.w.Valid)
	stopProfile()
	t.finish(lib, b.w.Valid, b.w.Dups)
	b.checkStored(ctx, lib, rd, b.w.Valid, b.w.Invalid, true)
	rs = nil

	dup := &phaseResult{Name: "all duplicates (same events again)", Unit: "events/s"}
	vb := validBatches(b.w, b.opt.batch)
	rs = renderBatches(vb)
	var td tally
	b.prog.begin(dup.Name, b.w.Valid)
	b.checkpoint(ctx)
	cpu0 = b.snapshot(ctx, true)
	start = time.Now()
	b.runIngest(ctx, svc, vb, rs, &td)
	timed(dup, b.w.Valid, start)
	cpuPer(dup, cpu0, b.snapshot(ctx, true), b.w.Valid)
	td.finish(dup, 0, b.w.Valid)
	b.checkStored(ctx, dup, rd, b.w.Valid, b.w.Invalid, true)
	return []*phaseResult{lib, dup}, nil
}

// startServer starts tallyd (or takes --url) for the HTTP phases.
func (b *bench) startServer(ctx context.Context) error {
	if b.opt.url != "" {
		b.srv = &server{URL: b.opt.url}
		return nil
	}
	dbURL := ""
	if b.pg != nil {
		u, err := b.pg.newSchema(ctx, "http")
		if err != nil {
			return err
		}
		st, close, err := openPG(ctx, u)
		if err != nil {
			return err
		}
		err = b.seedNames(ctx, st)
		close()
		if err != nil {
			return err
		}
		dbURL, b.httpURL = u, u
		if b.opt.serverPool > 0 {
			dbURL += fmt.Sprintf("&pool_max_conns=%d", b.opt.serverPool)
		}
	}
	srv, err := startTallyd(ctx, b.opt.tallyd, dbURL, b.creds.file(b.w.Clouds, b.cc), b.opt.tallydArgs)
	if err != nil {
		return err
	}
	b.srv = srv
	return nil
}

// rssWatch samples the server's RSS until stop, noting it once a tenth of
// the phase is done.
func (b *bench) rssWatch(p *phaseResult, total int, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			cur, peak := b.srv.rss()
			p.ServerRSSEndMiB, p.ServerPeakRSSMiB = mib(cur), mib(peak)
			return
		case <-t.C:
			if p.ServerRSSEarlyMiB == 0 && b.prog.done.Load() >= int64(total/10) {
				cur, _ := b.srv.rss()
				p.ServerRSSEarlyMiB = mib(cur)
			}
		}
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// phaseHTTP: 2 clients posting the batches as JSON arrays to tallyd.
func (b *bench) phaseHTTP(ctx context.Context) (*phaseResult, error) {
	p := &phaseResult{Name: "HTTP (tallyd, 2 clients)", Unit: "events/s"}
	bodies := bodiesOf(b.w.Batches)
	var t tally
	total := itemCount(b.w.Batches)
	b.prog.begin(p.Name, total)
	stop, done := make(chan struct{}), make(chan struct{})
	go b.rssWatch(p, total, stop, done)
	b.checkpoint(ctx)
	cpu0 := b.snapshot(ctx, false)
	start := time.Now()
	b.postBodies(ctx, b.w.Batches, bodies, &t, nil)
	timed(p, b.w.Valid, start)
	cpuPer(p, cpu0, b.snapshot(ctx, false), b.w.Valid)
	close(stop)
	<-done
	t.finish(p, b.w.Valid, b.w.Dups)
	rd, closeRd, err := b.httpReaderFor(ctx)
	if err != nil {
		return nil, err
	}
	defer closeRd()
	b.checkStored(ctx, p, rd, b.w.Valid, b.deadWanted(), b.pg != nil)
	return p, nil
}

func (b *bench) deadWanted() int {
	if b.pg == nil {
		return -1
	}
	return b.w.Invalid
}

// httpReaderFor reads what the HTTP phases stored: with SQL when the bench
// made the server's database, else through the read routes.
func (b *bench) httpReaderFor(ctx context.Context) (interface {
	ingestReader
	correlation(context.Context, string) (map[corrPair]corrAgg, error)
}, func(), error) {
	if b.httpURL != "" {
		pl, err := pool(ctx, b.httpURL, 1)
		if err != nil {
			return nil, nil, err
		}
		return pgReader{pl}, pl.Close, nil
	}
	return httpAll{httpIngestReader{httpReader{newClient(4), b.srv.URL, b.creds}, b.w.Clouds}, b.cc}, func() {}, nil
}

type httpAll struct {
	httpIngestReader
	cc corrConfig
}

func (h httpAll) correlation(ctx context.Context, _ string) (map[corrPair]corrAgg, error) {
	return h.httpReader.correlation(ctx, h.cc)
}

// runCreates runs every producer's creates with do, the retry of a create
// with an idempotency key right after its first answer.
func (b *bench) runCreates(ctx context.Context, ops [][]corrOp, do func(op corrOp) (string, string, error)) ([]corrAnswer, []time.Duration, []string) {
	var (
		mu       sync.Mutex
		answers  []corrAnswer
		lat      []time.Duration
		problems []string
		wg       sync.WaitGroup
	)
	for _, mine := range ops {
		wg.Go(func() {
			var as []corrAnswer
			var ls []time.Duration
			var ps []string
			for _, op := range mine {
				if ctx.Err() != nil {
					break
				}
				sends := 1
				if op.IdemKey != "" {
					sends = 2
				}
				for s := range sends {
					t := time.Now()
					d, id, err := do(op)
					ls = append(ls, time.Since(t))
					b.prog.add(1)
					if err != nil {
						if len(ps) < 3 {
							ps = append(ps, err.Error())
						}
						continue
					}
					as = append(as, corrAnswer{Op: op, Retry: s == 1, Disposition: d, ID: id})
				}
			}
			mu.Lock()
			answers, lat, problems = append(answers, as...), append(lat, ls...), append(problems, ps...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return answers, lat, problems
}

func sends(ops [][]corrOp) int {
	n := 0
	for _, m := range ops {
		for _, op := range m {
			n++
			if op.IdemKey != "" {
				n++
			}
		}
	}
	return n
}

// phaseCorrSQL: the same creates as bare SQL through pgx, 64 connections.
func (b *bench) phaseCorrSQL(ctx context.Context, ops [][]corrOp) (*phaseResult, error) {
	p := &phaseResult{Name: fmt.Sprintf("correlation bare SQL (%d conns)", b.cc.Producers), Unit: "creates/s"}
	u, err := b.pg.newSchema(ctx, "corrsql")
	if err != nil {
		return nil, err
	}
	pl, err := pool(ctx, u, int32(b.cc.Producers))
	if err != nil {
		return nil, err
	}
	defer pl.Close()
	n := sends(ops)
	b.prog.begin(p.Name, n)
	b.checkpoint(ctx)
	cpu0 := b.snapshot(ctx, true)
	start := time.Now()
	answers, lat, problems := b.runCreates(ctx, ops, func(op corrOp) (string, string, error) { return sqlCreate(ctx, pl, b.cc, op) })
	timed(p, n, start)
	cpuPer(p, cpu0, b.snapshot(ctx, true), n)
	p.P50Ms, p.P99Ms = percentiles(lat)
	p.Problems = append(p.Problems, problems...)
	got, err := pgReader{pl}.correlation(ctx, b.cc.Org)
	if err != nil {
		return nil, err
	}
	b.corrChecks(p, answers, got)
	return p, nil
}

func (b *bench) corrChecks(p *phaseResult, answers []corrAnswer, got map[corrPair]corrAgg) {
	if pr := checkCorrelation(b.cc, answers, got); len(pr) > 0 {
		p.Problems = append(p.Problems, pr...)
		return
	}
	p.Checks = append(p.Checks, fmt.Sprintf("at most one open event per key, occurrence counts = occurrences sent, every retry replayed (%d pairs)", len(got)))
}

// phaseCorrHTTP: the creates over HTTP, one producer per goroutine.
func (b *bench) phaseCorrHTTP(ctx context.Context, ops [][]corrOp) (*phaseResult, error) {
	p := &phaseResult{Name: fmt.Sprintf("correlation HTTP (%d producers)", b.cc.Producers), Unit: "creates/s"}
	c := newClient(b.cc.Producers)
	n := sends(ops)
	b.prog.begin(p.Name, n)
	stop, done := make(chan struct{}), make(chan struct{})
	go b.rssWatch(p, n, stop, done)
	b.checkpoint(ctx)
	cpu0 := b.snapshot(ctx, false)
	start := time.Now()
	answers, lat, problems := b.runCreates(ctx, ops, func(op corrOp) (string, string, error) {
		return postCreate(ctx, c, b.srv.URL, b.creds.Events[op.User], b.cc.body(op, time.Now()))
	})
	timed(p, n, start)
	cpuPer(p, cpu0, b.snapshot(ctx, false), n)
	close(stop)
	<-done
	p.P50Ms, p.P99Ms = percentiles(lat)
	p.Problems = append(p.Problems, problems...)
	rd, closeRd, err := b.httpReaderFor(ctx)
	if err != nil {
		return nil, err
	}
	defer closeRd()
	got, err := rd.correlation(ctx, b.cc.Org)
	if err != nil {
		return nil, err
	}
	b.corrChecks(p, answers, got)
	return p, nil
}

// startProfile starts a CPU profile into path ("" for none) and returns
// what stops it.
func startProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
