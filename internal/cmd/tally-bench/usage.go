package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/big"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/usage"
)

// The usage phase (PostgreSQL only; docs/performance.md, Usage): a month of
// usage by day, grouped by project and resource type, over resources with
// usageEventsPer events each, against the machine's own limit, PostgreSQL
// reading the same events once:
//
//	COPY (SELECT <the columns usage reads> FROM events WHERE timestamp < <the month's end>) TO STDOUT
//
// The events are stored through the product's store (ingest.Store.Commit,
// 2 goroutines, 1000-event batches: the events, the feed's columns and the
// projection); then the read and the query run alternately, runs times
// each. The check: every item of the answer equals the bench's own fold of
// what it stored (seconds, vCPU-seconds and resources per day, project and
// resource type).

const (
	usageEventsPer = 10
	usageProjects  = 10
	usageCloud     = "usage-c1"
)

var (
	usageTypes = []string{"instance", "volume", "floatingip"}
	usageFeb   = time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	usageMarch = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	usageApril = usageMarch.AddDate(0, 1, 0)
)

// usageCell is one (day, project, resource type) of the answer.
type usageCell struct {
	day              time.Time
	project, resType string
}

// usageSum is what the bench's fold expects of a cell: seconds alive and
// vCPU-seconds (exact: every timestamp is a whole second), and the
// resources that contributed.
type usageSum struct {
	seconds, quantity int64
	resources         map[int]bool
}

// usageWorkload makes the histories: resource i (of type usageTypes[i%3])
// is created in February or March with 1..8 vCPUs, then changes size every
// third event, state every third, project once for one resource in seven,
// and one resource in four is deleted at its tenth event; consecutive
// events are up to three days apart. It returns the events in 1000-event
// batches (whole histories, in resource order) and the expected cells.
func usageWorkload(resources int, seed uint64) ([][]event.Event, map[usageCell]*usageSum) {
	r := rand.New(rand.NewPCG(seed, 26))
	want := map[usageCell]*usageSum{}
	var batches [][]event.Event
	var batch []event.Event
	for i := range resources {
		id, rt := fmt.Sprintf("u-%06d", i), usageTypes[i%len(usageTypes)]
		at := usageFeb.Add(time.Duration(r.Int64N(45*24*3600)) * time.Second)
		project := fmt.Sprintf("p%d", i%usageProjects)
		vcpus := 0
		deleted := false
		var from time.Time
		for j := range usageEventsPer {
			e := event.Event{EventID: fmt.Sprintf("%s-%d", id, j), Timestamp: at, EventType: rt + ".update", Platform: "openstack",
				Cloud: usageCloud, ResourceType: rt, ResourceID: id, Source: event.SourceCollector}
			if j > 0 {
				usageAdd(want, i, rt, project, vcpus, from, at)
			}
			switch {
			case j == 0:
				e.EventType, e.Payload.State = rt+".create.end", event.StateOf("active")
				vcpus = 1 + r.IntN(8)
				e.Payload.Size = jsontext.Value(fmt.Sprintf(`{"vcpus":%d,"flavor":"f%d"}`, vcpus, r.IntN(4)))
			case j == usageEventsPer-1 && i%4 == 0:
				e.EventType, deleted = rt+".delete.end", true
			case j%3 == 0:
				vcpus = 1 + r.IntN(8)
				e.Payload.Size = jsontext.Value(fmt.Sprintf(`{"vcpus":%d,"flavor":"f%d"}`, vcpus, r.IntN(4)))
			case j%3 == 1:
				e.Payload.State = event.StateOf([]string{"active", "stopped"}[r.IntN(2)])
			case j == 8 && i%7 == 0:
				project = fmt.Sprintf("p%d", r.IntN(usageProjects))
			}
			e.ProjectID = project
			batch = append(batch, e)
			from = at
			at = at.Add(time.Duration(1+r.Int64N(3*24*3600)) * time.Second)
		}
		if !deleted {
			usageAdd(want, i, rt, project, vcpus, from, usageApril)
		}
		if len(batch) >= 1000 {
			batches, batch = append(batches, batch), nil
		}
	}
	if len(batch) > 0 {
		batches = append(batches, batch)
	}
	return batches, want
}

// usageAdd adds the interval [from, to) of resource i at vcpus to the
// March days it overlaps.
func usageAdd(want map[usageCell]*usageSum, i int, rt, project string, vcpus int, from, to time.Time) {
	start := from
	if start.Before(usageMarch) {
		start = usageMarch
	}
	for day := start.Truncate(24 * time.Hour); day.Before(to) && day.Before(usageApril); day = day.AddDate(0, 0, 1) {
		s := int64(overlap(from, to, day, day.AddDate(0, 0, 1)) / time.Second)
		if s <= 0 {
			continue
		}
		c := usageCell{day, project, rt}
		if want[c] == nil {
			want[c] = &usageSum{resources: map[int]bool{}}
		}
		want[c].seconds += s
		want[c].quantity += s * int64(vcpus)
		want[c].resources[i] = true
	}
}

// overlap is the length of [a, b) ∩ [lo, hi), or 0.
func overlap(a, b, lo, hi time.Time) time.Duration {
	if a.Before(lo) {
		a = lo
	}
	if b.After(hi) {
		b = hi
	}
	return max(b.Sub(a), 0)
}

// usageQuery is the query the phase times: March, by day, by project and
// resource type, vCPU-seconds (unit second keeps the check exact; hours
// cost the same).
func usageQuery() usage.Query {
	return usage.Query{From: usageMarch, To: usageApril, Window: usage.WindowDay, GroupBy: []string{"project_id", "resource_type"},
		Quantity: "size.vcpus", Unit: usage.UnitSecond, Limit: 1000}
}

// usageCopySQL is the machine's limit: the events the query folds (every
// event of the cloud before the month's end), read once by PostgreSQL,
// the columns usage reads.
var usageCopySQL = fmt.Sprintf(`COPY (SELECT event_id, timestamp, event_type, platform, cloud, resource_type, resource_id, project_id, source, payload
FROM events WHERE cloud = '%s' AND timestamp < '%s') TO STDOUT`, usageCloud, usageApril.Format(time.RFC3339))

// phaseUsage stores the usage workload of resources resources in a schema
// of its own and times the read and the query, runs times each,
// alternating.
func (b *bench) phaseUsage(ctx context.Context, resources, runs int) (read, query *phaseResult, err error) {
	read = &phaseResult{Name: "usage ceiling (COPY the events out, median)", Unit: "events/s"}
	query = &phaseResult{Name: "usage (month by day, project × type, median)", Unit: "events/s"}
	batches, want := usageWorkload(resources, b.opt.seed)
	n, read1 := resources*usageEventsPer, 0
	for _, evs := range batches {
		for _, e := range evs {
			if e.Timestamp.Before(usageApril) {
				read1++
			}
		}
	}
	u, err := b.pg.newSchema(ctx, "usage")
	if err != nil {
		return nil, nil, err
	}
	st, svc, closeSt, err := openUsage(ctx, u)
	if err != nil {
		return nil, nil, err
	}
	defer closeSt()
	b.prog.begin("usage: storing the histories", n)
	stored, err := b.commitAll(ctx, st, batches)
	b.prog.end()
	if err != nil {
		return nil, nil, err
	}
	if stored != n {
		query.Problems = append(query.Problems, fmt.Sprintf("stored %d events of %d", stored, n))
	}
	pl, err := pool(ctx, u, 1)
	if err != nil {
		return nil, nil, err
	}
	defer pl.Close()
	// The feed's watermark (the server's oldest open transaction) decides
	// when a usage answer without as_of covers the last commit: wait for
	// it, at most a minute, with the check as the test.
	deadline := time.Now().Add(time.Minute)
	for {
		a, err := usageAll(ctx, svc)
		problem := ""
		if err != nil {
			problem = err.Error()
		} else {
			problem = usageCheck(a, want)
		}
		if problem == "" {
			query.Checks = append(query.Checks, fmt.Sprintf("every item = the bench's own fold (%d cells, %d resources, %d events)", len(want), resources, n))
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			query.Problems = append(query.Problems, "answer ≠ the bench's own fold: "+problem)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	var (
		times [2][]float64
		cpus  [2][2]time.Duration // db, go
	)
	for i := range 2 * runs {
		b.checkpoint(ctx)
		cpu0 := b.snapshot(ctx, true)
		start := time.Now()
		if i%2 == 0 {
			if err := copyOut(ctx, pl, read1); err != nil {
				read.Problems = append(read.Problems, "copy out: "+err.Error())
			}
		} else if _, err := usageAll(ctx, svc); err != nil {
			query.Problems = append(query.Problems, "usage: "+err.Error())
		}
		times[i%2] = append(times[i%2], time.Since(start).Seconds())
		db, goCPU := cpuDiff(cpu0, b.snapshot(ctx, true))
		cpus[i%2][0] += db
		cpus[i%2][1] += goCPU
	}
	for k, p := range []*phaseResult{read, query} {
		secs := median(times[k])
		p.Count, p.Seconds = read1, secs
		if secs > 0 {
			p.Rate = float64(read1) / secs
		}
		p.P50Ms = secs * 1000
		p.P99Ms = slicesMax(times[k]) * 1000
		p.DBCPUMicros = float64(cpus[k][0].Microseconds()) / float64(runs*read1)
		p.GoCPUMicros = float64(cpus[k][1].Microseconds()) / float64(runs*read1)
		p.Checks = append(p.Checks, fmt.Sprintf("%d runs (seconds %s)", runs, secondsList(times[k])))
	}
	return read, query, nil
}

// copyOut runs usageCopySQL on a connection of pl into io.Discard and
// checks that it read n rows.
func copyOut(ctx context.Context, pl *pgxpool.Pool, n int) error {
	c, err := pl.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	tag, err := c.Conn().PgConn().CopyTo(ctx, io.Discard, usageCopySQL)
	if err == nil && tag.RowsAffected() != int64(n) {
		err = fmt.Errorf("copied %d rows, want %d", tag.RowsAffected(), n)
	}
	return err
}

// usageAll runs the phase's query, every page.
func usageAll(ctx context.Context, svc *usage.Service) (usage.Answer, error) {
	q := usageQuery()
	var all usage.Answer
	for {
		a, err := svc.Usage(ctx, q)
		if err != nil {
			return all, err
		}
		all.Items = append(all.Items, a.Items...)
		all.Warnings = a.Warnings
		if a.NextCursor == nil {
			return all, nil
		}
		q.Cursor = *a.NextCursor
	}
}

// usageCheck compares an answer with the expected cells; "" when equal.
func usageCheck(a usage.Answer, want map[usageCell]*usageSum) string {
	if len(a.Warnings) > 0 {
		return fmt.Sprintf("%d warnings, the first %+v", len(a.Warnings), a.Warnings[0])
	}
	seen := map[usageCell]bool{}
	for _, it := range a.Items {
		var c usageCell
		c.day = it.WindowStart
		for _, g := range it.Group {
			var s string
			if err := jsontextString(g.Value, &s); err != nil {
				return fmt.Sprintf("group %s: %v", g.Key, err)
			}
			switch g.Key {
			case "project_id":
				c.project = s
			case "resource_type":
				c.resType = s
			}
		}
		w := want[c]
		if w == nil {
			return fmt.Sprintf("an item the fold has not: %v %s %s", c.day.Format(time.DateOnly), c.project, c.resType)
		}
		seen[c] = true
		if !decimalIs(it.Seconds, w.seconds) || !decimalIs(it.Quantity, w.quantity) || it.Resources != len(w.resources) || !it.Complete {
			return fmt.Sprintf("%v %s %s: seconds %s quantity %s resources %d complete %v, want %d %d %d true", c.day.Format(time.DateOnly),
				c.project, c.resType, it.Seconds, it.Quantity, it.Resources, it.Complete, w.seconds, w.quantity, len(w.resources))
		}
	}
	if len(seen) != len(want) {
		var missing []string
		for c := range want {
			if !seen[c] {
				missing = append(missing, fmt.Sprintf("%v %s %s", c.day.Format(time.DateOnly), c.project, c.resType))
			}
		}
		sort.Strings(missing)
		return fmt.Sprintf("%d items, want %d (missing %v)", len(seen), len(want), missing[:min(len(missing), 3)])
	}
	return ""
}

func jsontextString(v jsontext.Value, s *string) error {
	tok, err := jsontext.NewDecoder(bytes.NewReader(v)).ReadToken()
	if err != nil {
		return err
	}
	if tok.Kind() != '"' {
		return fmt.Errorf("%s is not a string", v)
	}
	*s = tok.String()
	return nil
}

// decimalIs reports whether the decimal text s equals n.
func decimalIs(s string, n int64) bool {
	r, ok := new(big.Rat).SetString(s)
	return ok && r.Cmp(new(big.Rat).SetInt64(n)) == 0
}

func slicesMax(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

func secondsList(v []float64) string {
	s := ""
	for i, x := range v {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%.2f", x)
	}
	return s
}

// commitAll commits the batches through st, 2 goroutines, and returns how
// many events were inserted.
func (b *bench) commitAll(ctx context.Context, st ingest.Store, batches [][]event.Event) (int, error) {
	work := make(chan []event.Event)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		n     int
		first error
	)
	for range 2 {
		wg.Go(func() {
			for evs := range work {
				res, err := st.Commit(ctx, ingest.Batch{Events: evs})
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				for _, ok := range res.Inserted {
					if ok {
						n++
					}
				}
				mu.Unlock()
				b.prog.add(len(evs))
			}
		})
	}
	for _, evs := range batches {
		select {
		case work <- evs:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return n, first
}
