package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/internal/feed"
)

// phaseFeed: "Writers are not slowed: ingest throughput with the feed on
// and 100 subscribers attached is ≥ 0.95 × without." The HTTP ingest path
// (2 clients, 1000-item bodies, on the server of the HTTP phase) runs
// 2×runs times, alternating: without subscribers, then with subs
// Server-Sent Events subscribers on GET /api/v1/events/feed (after=now,
// every event), and so on. Each run sends a workload of its own (a seed of
// its own, the run's clouds), so every run stores new events. It returns
// the two medians; each run's answers are checked, and every subscriber
// must have received every event stored while it was attached, never a
// reset.
func (b *bench) phaseFeed(ctx context.Context, runs, subs, events int) (without, with *phaseResult, err error) {
	without = &phaseResult{Name: "HTTP, no feed subscriber (median)", Unit: "events/s"}
	with = &phaseResult{Name: fmt.Sprintf("HTTP, %d SSE subscribers (median)", subs), Unit: "events/s"}
	var rates [2][]float64
	var lats [2][]time.Duration
	var dbCPU, goCPU, benchCPU [2]time.Duration // summed over the runs
	var delivery []time.Duration                // a batch's last event at a subscriber, after the batch's answer
	for i := range 2 * runs {
		p := without
		if i%2 == 1 {
			p = with
		}
		w := generate(genConfig{Seed: b.opt.seed + 1000 + uint64(i), Prefix: fmt.Sprintf("bench%d", b.opt.seed),
			Clouds: len(b.w.Clouds), Events: events, BatchSize: b.opt.batch,
			LateShare: b.opt.lateShare, DupShare: b.opt.dupShare, InvalidShare: b.opt.invalidShare})
		bodies := bodiesOf(w.Batches)
		var fs *feedSubscribers
		var acked []atomic.Int64 // when each batch's answer came (Unix ns)
		if p == with {
			ids := make(map[string]int32, len(w.Events))
			for bi, bt := range w.Batches {
				for _, it := range bt.Items {
					if it.Kind == itemValid {
						ids[it.Ev.EventID] = int32(bi)
					}
				}
			}
			acked = make([]atomic.Int64, len(w.Batches))
			if fs, err = b.subscribe(ctx, subs, ids, len(w.Batches)); err != nil {
				return nil, nil, err
			}
		}
		b.prog.begin(fmt.Sprintf("%s, run %d", p.Name, i/2+1), itemCount(w.Batches))
		var t tally
		from, self := b.snapshot(ctx, false), selfCPU()
		start := time.Now()
		b.postBodies(ctx, w.Batches, bodies, &t, func(i int) {
			if acked != nil {
				acked[i].Store(time.Now().UnixNano())
			}
		})
		secs := time.Since(start).Seconds()
		// The CPU of the writes: what delivery after the last write costs
		// is not the writers'.
		to, selfTo := b.snapshot(ctx, false), selfCPU()
		b.prog.end()
		var run phaseResult
		t.finish(&run, w.Valid, w.Dups)
		p.Problems = append(p.Problems, run.Problems...)
		k := i % 2
		for pid, c := range to.backends {
			dbCPU[k] += c - from.backends[pid]
		}
		goCPU[k] += to.goCPU - from.goCPU
		benchCPU[k] += selfTo - self
		rates[k] = append(rates[k], float64(w.Valid)/secs)
		lats[k] = append(lats[k], t.lat...)
		p.Count += w.Valid
		p.Seconds += secs
		if fs != nil {
			p.Problems = append(p.Problems, fs.finish(ctx, t.accepted)...)
			delivery = append(delivery, fs.delays(acked)...)
		}
	}
	for k, p := range []*phaseResult{without, with} {
		p.Rate = median(rates[k])
		p.P50Ms, p.P99Ms = percentiles(lats[k])
		p.Checks = append(p.Checks, fmt.Sprintf("%d runs (events/s %s), every answer as sent", runs, rateList(rates[k])))
		if p.Count > 0 {
			p.DBCPUMicros = float64(dbCPU[k].Microseconds()) / float64(p.Count)
			p.GoCPUMicros = float64(goCPU[k].Microseconds()) / float64(p.Count)
			p.Checks = append(p.Checks, fmt.Sprintf("CPU µs per event while writing: database %.0f, tallyd %.0f, the bench (writers and subscribers) %.0f",
				p.DBCPUMicros, p.GoCPUMicros, float64(benchCPU[k].Microseconds())/float64(p.Count)))
		}
	}
	if len(with.Problems) == 0 {
		with.Checks = append(with.Checks, fmt.Sprintf("each of %d subscribers received every event stored while attached, no reset", subs))
	}
	with.DeliveryP50Ms, with.DeliveryP99Ms = percentiles(delivery)
	with.Checks = append(with.Checks, fmt.Sprintf("delivery after the write's answer (a batch's last event at each subscriber, %d measures): p50 %.1f ms, p99 %.1f ms",
		len(delivery), with.DeliveryP50Ms, with.DeliveryP99Ms))
	return without, with, nil
}

// postBodies posts bodies (those of bs) with 2 clients and sums the
// answers in t; answered (nil: nothing) is called with each batch's index
// when its answer has come.
func (b *bench) postBodies(ctx context.Context, bs []batch, bodies [][]byte, t *tally, answered func(i int)) {
	c := newClient(2)
	work := make(chan int)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for i := range work {
				bt := bs[i]
				s := time.Now()
				a, err := postBatch(ctx, c, b.srv.URL, b.creds.Ingest[bt.Cloud], bodies[i])
				d := time.Since(s)
				if answered != nil {
					answered(i)
				}
				var rej []int
				for _, r := range a.Rejected {
					rej = append(rej, r.Index)
				}
				t.add(bt, a.Accepted, a.Duplicates, rej, d, err)
				b.prog.add(len(bt.Items))
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

// bodiesOf renders bs as the bodies of POST /api/v1/events, JSON arrays.
func bodiesOf(bs []batch) [][]byte {
	bodies := make([][]byte, len(bs))
	for i, r := range renderBatches(bs) {
		bodies[i] = append(append([]byte{'['}, bytes.Join(r.Items, []byte{','})...), ']')
	}
	return bodies
}

// feedSubscribers are SSE subscribers of the lifecycle feed, each counting
// the run's events it received. They are as cheap as a consumer that
// needs only ids: a subscriber keeps its last position, not the ids it
// saw. Each item's position must come after the previous one (the feed's
// one order: an item twice or out of order breaks it), and each counts
// when its event_id is one of the run's (ids, read-only, each event's
// batch), so that count = the run's distinct events means every one
// arrived, once. Each also notes when the last event of each batch came
// (arrived: Unix ns by batch), for the delivery latency.
type feedSubscribers struct {
	ctx     context.Context
	cancel  context.CancelFunc
	ids     map[string]int32
	arrived [][]int64 // by subscriber, by batch; each subscriber writes only its own
	wg      sync.WaitGroup
	counts  []atomic.Int64 // the run's events received
	dups    atomic.Int64   // items not after the subscriber's previous one
	ended   []atomic.Bool  // reset, an error frame, or the stream broke
	resets  atomic.Int64
	mu      sync.Mutex
	errs    []string
}

// subscribe attaches n subscribers to GET /api/v1/events/feed?after=now,
// counting the events whose ids are in ids, and returns once every one has
// its stream open.
func (b *bench) subscribe(ctx context.Context, n int, ids map[string]int32, batches int) (*feedSubscribers, error) {
	ctx, cancel := context.WithCancel(ctx)
	fs := &feedSubscribers{ctx: ctx, cancel: cancel, ids: ids, counts: make([]atomic.Int64, n), ended: make([]atomic.Bool, n),
		arrived: make([][]int64, n)}
	for i := range fs.arrived {
		fs.arrived[i] = make([]int64, batches)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost, tr.Proxy = n, nil
	c := &http.Client{Transport: tr} // a stream lasts the run: no timeout
	open := make(chan error, n)
	// At most 8 connect at once: 100 at once each read the store's head
	// for after=now, and on PostgreSQL took tallyd's pool past its acquire
	// timeout (503); this phase measures the writers beside attached
	// subscribers, not a connection storm.
	connecting := make(chan struct{}, 8)
	for i := range n {
		fs.wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, "GET", b.srv.URL+"/api/v1/events/feed?after=now", nil)
			if err != nil {
				open <- err
				return
			}
			connecting <- struct{}{}
			req.Header.Set("Authorization", "Bearer "+b.creds.Read)
			req.Header.Set("Accept", "text/event-stream")
			resp, err := c.Do(req)
			<-connecting
			if err != nil {
				open <- err
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				open <- fmt.Errorf("GET /api/v1/events/feed: %d", resp.StatusCode)
				return
			}
			open <- nil
			defer fs.ended[i].Store(true)
			fs.follow(i, resp.Body)
		})
	}
	for range n {
		if err := <-open; err != nil {
			cancel()
			fs.wg.Wait()
			return nil, fmt.Errorf("feed subscriber: %w", err)
		}
	}
	return fs, nil
}

// follow reads subscriber i's stream until it ends.
func (fs *feedSubscribers) follow(i int, body io.Reader) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var last ingest.FeedPosition
	var id []byte // the cursor of the frame being read
	var n int64
	for sc.Scan() {
		line := sc.Bytes()
		if c, ok := bytes.CutPrefix(line, []byte("id: ")); ok {
			id = append(id[:0], c...)
			continue
		}
		if ev, ok := eventIDOf(line); ok {
			p, ok := ingest.DecodeFeedCursor(string(id))
			if !ok || feed.Compare(p, last) <= 0 {
				fs.dups.Add(1)
			}
			last = p
			if bi, in := fs.ids[string(ev)]; in {
				n++
				fs.counts[i].Store(n)
				fs.arrived[i][bi] = time.Now().UnixNano()
			}
			continue
		}
		switch string(line) {
		case "event: reset", "event: error":
			fs.resets.Add(1)
			return
		}
	}
	if err := sc.Err(); err != nil && fs.ctx.Err() == nil {
		fs.mu.Lock()
		fs.errs = append(fs.errs, err.Error())
		fs.mu.Unlock()
	}
}

// finish waits (up to 30 s) until every subscriber has received want
// events or its stream ended, detaches them and returns the problems.
func (fs *feedSubscribers) finish(ctx context.Context, want int) []string {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		done := true
		for i := range fs.counts {
			if fs.counts[i].Load() < int64(want) && !fs.ended[i].Load() {
				done = false
				break
			}
		}
		if done {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	fs.cancel()
	fs.wg.Wait()
	var out []string
	if r := fs.resets.Load(); r > 0 {
		out = append(out, fmt.Sprintf("%d feed subscribers were reset or got an error", r))
	}
	// A subscriber from after=now may also get events of the previous run
	// that were committed but not yet readable when it attached (the head
	// is the readable one): they are not counted.
	if d := fs.dups.Load(); d > 0 {
		out = append(out, fmt.Sprintf("feed subscribers received %d items twice or out of order", d))
	}
	short, lo, hi := 0, int64(want), int64(want)
	for i := range fs.counts {
		n := fs.counts[i].Load()
		if n != int64(want) {
			short++
		}
		lo, hi = min(lo, n), max(hi, n)
	}
	if short > 0 {
		out = append(out, fmt.Sprintf("%d of %d feed subscribers did not receive the %d events stored (from %d to %d)", short, len(fs.counts), want, lo, hi))
	}
	return append(out, fs.errs...)
}

// delays are, for each subscriber and batch, how long after the batch's
// answer (acked, Unix ns) its last event reached the subscriber (0 when
// before: the commit precedes the answer). Call after finish.
func (fs *feedSubscribers) delays(acked []atomic.Int64) []time.Duration {
	var out []time.Duration
	for _, arr := range fs.arrived {
		for bi, at := range arr {
			ack := acked[bi].Load()
			if at == 0 || ack == 0 {
				continue // a batch with no new event, or one never answered
			}
			out = append(out, time.Duration(max(at-ack, 0)))
		}
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func rateList(v []float64) string {
	var parts []string
	for _, r := range v {
		parts = append(parts, thousands(r))
	}
	return strings.Join(parts, ", ")
}

// eventIDOf is the event_id of a stream's data line ("data: {…}").
func eventIDOf(line []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(line, []byte(`data: {"event_id":"`))
	if !ok {
		return nil, false
	}
	id, _, ok := bytes.Cut(rest, []byte(`"`))
	return id, ok
}
