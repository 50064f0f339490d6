package feed

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// item is what the fake feed holds: a Current position, a key filters
// select on, and a payload for the ring's byte budget.
type item struct {
	Pos  Position
	Key  string
	Data string
}

// fakeSource is an in-memory feed: append commits an item at the next
// position. Its Read stops after scanning scanBound items its filter does
// not select, as a store may.
type fakeSource struct {
	scanBound int           // 0: no bound
	delay     time.Duration // how long each reader's Read takes

	mu    sync.Mutex
	items []item

	calls       atomic.Int64 // Read and Head calls
	inflight    atomic.Int64 // readers' Reads (not the tail reader's) under way
	maxInflight atomic.Int64
}

func (s *fakeSource) append(key, data string) item {
	s.mu.Lock()
	defer s.mu.Unlock()
	it := item{Pos: current(0, int64(len(s.items)+1)), Key: key, Data: data}
	s.items = append(s.items, it)
	return it
}

func (s *fakeSource) all() []item {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]item(nil), s.items...)
}

func matchKey(f string, it item) bool { return f == "" || f == it.Key }

func (s *fakeSource) read(ctx context.Context, after Position, f string, limit int) (Page[item], error) {
	s.calls.Add(1)
	if limit != tailPage {
		n := s.inflight.Add(1)
		defer s.inflight.Add(-1)
		for {
			m := s.maxInflight.Load()
			if n <= m || s.maxInflight.CompareAndSwap(m, n) {
				break
			}
		}
		if s.delay > 0 {
			select {
			case <-time.After(s.delay):
			case <-ctx.Done():
				return Page[item]{}, ctx.Err()
			}
		}
	}
	if limit < 1 {
		return Page[item]{}, fmt.Errorf("fake: limit %d", limit)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.items), func(i int) bool { return Compare(s.items[i].Pos, after) > 0 })
	p := Page[item]{Next: after, CaughtUp: true}
	skipped := 0
	for ; i < len(s.items); i++ {
		it := s.items[i]
		p.Next = it.Pos
		if !matchKey(f, it) {
			if skipped++; s.scanBound > 0 && skipped >= s.scanBound && i < len(s.items)-1 {
				p.CaughtUp = false
				return p, nil
			}
			continue
		}
		p.Items = append(p.Items, it)
		if len(p.Items) == limit {
			p.CaughtUp = i == len(s.items)-1
			return p, nil
		}
	}
	return p, nil
}

func (s *fakeSource) head(context.Context) (Position, error) {
	s.calls.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.items) == 0 {
		return Position{}, nil
	}
	return s.items[len(s.items)-1].Pos, nil
}

func (s *fakeSource) source() Source[item, string] {
	return Source[item, string]{
		Read:  s.read,
		Head:  s.head,
		Pos:   func(it item) Position { return it.Pos },
		Match: matchKey,
		Size:  func(it item) int { return len(it.Data) + 32 },
	}
}

// eventually fails t unless cond holds within 10 seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// synced reports whether h's tail reader has read everything src holds
// (its tail is src's head).
func synced(h *Hub[item, string], src *fakeSource) bool {
	head, _ := src.head(context.Background())
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.valid && Compare(h.tail, head) == 0
}

// primed returns a hub over an empty src whose tail reader runs, so that
// every item appended later is in its ring (while the ring's bounds allow).
func primed(t *testing.T, src *fakeSource, opts Options) *Hub[item, string] {
	t.Helper()
	h := NewHub(src.source(), opts)
	if _, err := h.Read(context.Background(), Position{}, "", 1, 0); err != nil {
		t.Fatal(err)
	}
	eventually(t, "tail reader started", func() bool { return synced(h, src) })
	return h
}

var keys = []string{"a", "b", "c"}

// fill appends n items with keys cycling through keys, notifies h and
// waits for its tail reader to read them.
func fill(t *testing.T, h *Hub[item, string], src *fakeSource, n int) []item {
	t.Helper()
	for i := range n {
		src.append(keys[i%len(keys)], fmt.Sprint("payload ", i))
	}
	h.Notify()
	eventually(t, "tail reader caught up", func() bool { return synced(h, src) })
	return src.all()
}

// want is what a read after after with filter f and limit must return,
// computed from all with Match.
func want(all []item, after Position, f string, limit int) []item {
	var out []item
	for _, it := range all {
		if Compare(it.Pos, after) > 0 && matchKey(f, it) && len(out) < limit {
			out = append(out, it)
		}
	}
	return out
}

// readAll reads h from after without waiting until caught up with no
// items, and returns every item read.
func readAll(t *testing.T, h *Hub[item, string], after Position, f string, limit int) []item {
	t.Helper()
	var out []item
	for range 10_000 {
		p, err := h.Read(context.Background(), after, f, limit, 0)
		if err != nil {
			t.Fatal(err)
		}
		if Compare(p.Next, after) < 0 {
			t.Fatalf("Read after %+v: Next %+v is before the start", after, p.Next)
		}
		if len(p.Items) > limit {
			t.Fatalf("Read with limit %d returned %d items", limit, len(p.Items))
		}
		out = append(out, p.Items...)
		after = p.Next
		if p.CaughtUp && len(p.Items) == 0 {
			return out
		}
	}
	t.Fatal("readAll: no end")
	return nil
}

func TestHubReadNoWait(t *testing.T) {
	for _, ring := range []struct {
		name string
		opts Options
	}{
		{"from the ring", Options{Poll: time.Hour}},
		{"behind the ring", Options{Poll: time.Hour, RingItems: 2}},
		{"behind a ring bounded by bytes", Options{Poll: time.Hour, RingBytes: 100}},
	} {
		t.Run(ring.name, func(t *testing.T) {
			src := &fakeSource{scanBound: 4}
			h := primed(t, src, ring.opts)
			all := fill(t, h, src, 30)
			mid, last := all[13].Pos, all[len(all)-1].Pos
			for _, tc := range []struct {
				name  string
				after Position
				f     string
				limit int
			}{
				{"start", Position{}, "", 100},
				{"start, limit", Position{}, "", 5},
				{"start, limit 1", Position{}, "", 1},
				{"middle", mid, "", 100},
				{"middle, limit", mid, "", 3},
				{"head", last, "", 100},
				{"past the head", current(0, 99), "", 100},
				{"start, filter", Position{}, "b", 100},
				{"start, filter, limit", Position{}, "c", 4},
				{"middle, filter", mid, "a", 100},
				{"head, filter", last, "a", 100},
				{"filter selecting nothing", Position{}, "none", 100},
			} {
				t.Run(tc.name, func(t *testing.T) {
					p, err := h.Read(context.Background(), tc.after, tc.f, tc.limit, 0)
					if err != nil {
						t.Fatal(err)
					}
					// A store may stop early for a filter; what it returns
					// is then a prefix, and reading on gives the rest.
					w := want(all, tc.after, tc.f, tc.limit)
					if len(p.Items) > len(w) || (len(p.Items) < len(w) && p.CaughtUp) {
						t.Errorf("Read = %d items (caught up %v), want %d", len(p.Items), p.CaughtUp, len(w))
					}
					if d := cmp.Diff(w[:min(len(w), len(p.Items))], p.Items); d != "" {
						t.Errorf("Read (-want +got):\n%s", d)
					}
					if Compare(p.Next, tc.after) < 0 {
						t.Errorf("Next %+v before the start %+v", p.Next, tc.after)
					}
					if d := cmp.Diff(want(all, tc.after, tc.f, len(all)), readAll(t, h, tc.after, tc.f, tc.limit)); d != "" {
						t.Errorf("reading on to the head (-want +got):\n%s", d)
					}
				})
			}
		})
	}
}

// TestHubRingAnswers checks that a hub whose ring covers a waiting read
// does not read the store for it, and that a read without wait does.
func TestHubRingAnswers(t *testing.T) {
	src := &fakeSource{}
	h := primed(t, src, Options{Poll: time.Hour})
	all := fill(t, h, src, 10)
	before := src.calls.Load()
	p, err := h.Read(context.Background(), all[2].Pos, "b", 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want(all, all[2].Pos, "b", 100), p.Items); d != "" {
		t.Errorf("Read (-want +got):\n%s", d)
	}
	if n := src.calls.Load() - before; n != 0 {
		t.Errorf("a waiting read the ring covers made %d store calls", n)
	}
	p, err = h.Read(context.Background(), all[2].Pos, "b", 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want(all, all[2].Pos, "b", 100), p.Items); d != "" {
		t.Errorf("Read without wait (-want +got):\n%s", d)
	}
	if n := src.calls.Load() - before; n != 1 {
		t.Errorf("a read without wait made %d store calls, want 1", n)
	}
}

func TestHubWaitWakesOnNotify(t *testing.T) {
	src := &fakeSource{}
	// No polling: only Notify can wake the reader.
	h := primed(t, src, Options{Poll: time.Hour})
	type result struct {
		p   Page[item]
		err error
	}
	done := make(chan result, 1)
	go func() {
		p, err := h.Read(context.Background(), Position{}, "", 10, time.Minute)
		done <- result{p, err}
	}()
	time.Sleep(50 * time.Millisecond) // let the reader wait
	it := src.append("a", "x")
	h.Notify()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		if d := cmp.Diff([]item{it}, r.p.Items); d != "" {
			t.Errorf("Read (-want +got):\n%s", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting Read did not return within 10s of an item and Notify (wait was a minute)")
	}
}

func TestHubWaitWakesOnPoll(t *testing.T) {
	src := &fakeSource{}
	h := primed(t, src, Options{Poll: 10 * time.Millisecond})
	done := make(chan Page[item], 1)
	go func() {
		p, _ := h.Read(context.Background(), Position{}, "", 10, time.Minute)
		done <- p
	}()
	time.Sleep(50 * time.Millisecond)
	it := src.append("a", "committed elsewhere") // no Notify
	select {
	case p := <-done:
		if d := cmp.Diff([]item{it}, p.Items); d != "" {
			t.Errorf("Read (-want +got):\n%s", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting Read did not see an item without Notify within 10s (Poll 10ms)")
	}
}

// TestHubWaitFilter checks that a waiting reader is not answered by items
// its filter does not select, and is by the first one it does.
func TestHubWaitFilter(t *testing.T) {
	src := &fakeSource{scanBound: 2}
	h := primed(t, src, Options{Poll: time.Hour})
	done := make(chan Page[item], 1)
	go func() {
		p, _ := h.Read(context.Background(), Position{}, "b", 10, time.Minute)
		done <- p
	}()
	for range 5 {
		src.append("a", "")
		h.Notify()
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case p := <-done:
		t.Fatalf("Read returned %+v before an item it selects", p)
	default:
	}
	it := src.append("b", "")
	h.Notify()
	select {
	case p := <-done:
		if d := cmp.Diff([]item{it}, p.Items); d != "" {
			t.Errorf("Read (-want +got):\n%s", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10s")
	}
}

func TestHubWaitTimesOut(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after int // index of the item read after; -1: Start
	}{
		{"at the head", 4},
		{"behind the head, filter selects nothing", 1},
		{"from start, filter selects nothing", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &fakeSource{scanBound: 2}
			h := primed(t, src, Options{Poll: 5 * time.Millisecond})
			all := fill(t, h, src, 5)
			after := Position{}
			if tc.after >= 0 {
				after = all[tc.after].Pos
			}
			f := "none"
			if tc.after == len(all)-1 {
				f = ""
			}
			const wait = 100 * time.Millisecond
			t0 := time.Now()
			p, err := h.Read(context.Background(), after, f, 10, wait)
			if err != nil {
				t.Fatal(err)
			}
			if el := time.Since(t0); el < wait {
				t.Errorf("Read returned after %v, before its wait %v", el, wait)
			}
			if len(p.Items) != 0 {
				t.Errorf("Read = %+v, want no items", p.Items)
			}
			if d := cmp.Diff(all[len(all)-1].Pos, p.Next); d != "" {
				t.Errorf("Next (-want +got):\n%s", d)
			}
		})
	}
	t.Run("empty feed, Next unchanged", func(t *testing.T) {
		src := &fakeSource{}
		h := primed(t, src, Options{Poll: 5 * time.Millisecond})
		for _, after := range []Position{{}, current(0, 7)} {
			p, err := h.Read(context.Background(), after, "", 10, 50*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Items) != 0 || Compare(p.Next, after) != 0 {
				t.Errorf("Read after %+v = %+v, want no items and Next unchanged", after, p)
			}
		}
	})
}

func TestHubWaitCancelled(t *testing.T) {
	src := &fakeSource{}
	h := primed(t, src, Options{Poll: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := h.Read(ctx, Position{}, "", 10, time.Minute)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Read = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled Read did not return within 10s (wait was a minute)")
	}
}

// TestHubBehindRing checks that a reader whose position the ring no
// longer covers reads the store and gets every item exactly once.
func TestHubBehindRing(t *testing.T) {
	src := &fakeSource{}
	h := primed(t, src, Options{Poll: time.Hour, RingItems: 4})
	all := fill(t, h, src, 50)
	h.mu.Lock()
	ringLen, start := len(h.ring), h.start
	h.mu.Unlock()
	if ringLen > 4 || Compare(start, all[0].Pos) <= 0 {
		t.Fatalf("ring of %d items from %+v: not bounded by RingItems", ringLen, start)
	}
	for _, limit := range []int{1, 3, 100} {
		if d := cmp.Diff(all, readAll(t, h, Position{}, "", limit)); d != "" {
			t.Errorf("limit %d (-want +got):\n%s", limit, d)
		}
	}
	// Following with wait while items keep coming.
	var got []item
	after := Position{}
	go func() {
		for range 50 {
			src.append("a", "more")
			h.Notify()
		}
	}()
	for len(got) < 100 {
		p, err := h.Read(context.Background(), after, "", 3, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Items) == 0 {
			t.Fatalf("no item within 5s after %d", len(got))
		}
		got, after = append(got, p.Items...), p.Next
	}
	if d := cmp.Diff(src.all(), got); d != "" {
		t.Errorf("following (-want +got):\n%s", d)
	}
}

// TestHubFollowers runs writers and waiting readers together: every
// reader gets every item, in order, once, and readers behind the ring
// never read the store more than MaxReads at a time. Run with -race.
func TestHubFollowers(t *testing.T) {
	const writers, perWriter, readers, maxReads = 8, 150, 3, 2
	src := &fakeSource{delay: 200 * time.Microsecond}
	h := NewHub(src.source(), Options{Poll: 20 * time.Millisecond, RingItems: 64, MaxReads: maxReads})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var wg sync.WaitGroup
	got := make([][]item, readers)
	errs := make([]error, readers)
	for r := range readers {
		wg.Go(func() {
			after := Position{}
			limit := 3 + 4*r
			for len(got[r]) < writers*perWriter {
				p, err := h.Read(ctx, after, "", limit, time.Second)
				if err != nil {
					errs[r] = err
					return
				}
				if Compare(p.Next, after) < 0 {
					errs[r] = fmt.Errorf("Next %+v before %+v", p.Next, after)
					return
				}
				got[r], after = append(got[r], p.Items...), p.Next
				if r == 0 && len(got[r])%100 == 0 {
					time.Sleep(5 * time.Millisecond) // fall behind the ring now and then
				}
			}
		})
	}
	var wwg sync.WaitGroup
	for w := range writers {
		wwg.Go(func() {
			for i := range perWriter {
				src.append(keys[w%len(keys)], fmt.Sprint(w, "/", i))
				if i%3 != 0 { // some commits are found by polling only
					h.Notify()
				}
			}
		})
	}
	wwg.Wait()
	wg.Wait()
	all := src.all()
	if len(all) != writers*perWriter {
		t.Fatalf("source holds %d items, want %d", len(all), writers*perWriter)
	}
	for r := range readers {
		if errs[r] != nil {
			t.Errorf("reader %d: %v (after %d items)", r, errs[r], len(got[r]))
			continue
		}
		if d := cmp.Diff(all, got[r]); d != "" {
			t.Errorf("reader %d (-want +got):\n%s", r, d)
		}
	}
	if m := src.maxInflight.Load(); m > maxReads {
		t.Errorf("%d concurrent store reads by readers, MaxReads %d", m, maxReads)
	}
}

// TestHubMaxReads holds many readers behind the ring in the store at once
// and checks that at most MaxReads of them read it together.
func TestHubMaxReads(t *testing.T) {
	const maxReads = 3
	src := &fakeSource{delay: 20 * time.Millisecond}
	h := primed(t, src, Options{Poll: time.Hour, RingItems: 2, MaxReads: maxReads})
	all := fill(t, h, src, 20)
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			if d := cmp.Diff(all, readAll(t, h, Position{}, "", 5)); d != "" {
				t.Errorf("reader (-want +got):\n%s", d)
			}
		})
	}
	wg.Wait()
	if m := src.maxInflight.Load(); m > maxReads || m < 2 {
		t.Errorf("%d concurrent store reads by 12 readers, want 2..%d (MaxReads)", m, maxReads)
	}
}

// stableCalls waits until src's call count stays unchanged for quiet and
// returns it.
func stableCalls(t *testing.T, src *fakeSource, quiet time.Duration) int64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	n := src.calls.Load()
	for {
		time.Sleep(quiet)
		m := src.calls.Load()
		if m == n {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tail reader still reads the store after 10s without readers (Idle is short)")
		}
		n = m
	}
}

func TestHubIdleStopsAndRestarts(t *testing.T) {
	src := &fakeSource{}
	h := NewHub(src.source(), Options{Poll: 2 * time.Millisecond, Idle: 30 * time.Millisecond})
	ctx := context.Background()
	if _, err := h.Read(ctx, Position{}, "", 10, 0); err != nil {
		t.Fatal(err)
	}
	n := stableCalls(t, src, 200*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	if m := src.calls.Load(); m != n {
		t.Fatalf("store calls went on from %d to %d after the tail reader looked stopped", n, m)
	}
	// The next Read restarts it: it reads again, and a waiting reader is
	// woken by polling alone.
	done := make(chan Page[item], 1)
	go func() {
		p, _ := h.Read(ctx, Position{}, "", 10, 10*time.Second)
		done <- p
	}()
	eventually(t, "the tail reader restarted", func() bool { return src.calls.Load() > n+2 })
	it := src.append("a", "")
	select {
	case p := <-done:
		if d := cmp.Diff([]item{it}, p.Items); d != "" {
			t.Errorf("Read (-want +got):\n%s", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a restarted tail reader did not wake the reader within 10s")
	}
	stableCalls(t, src, 200*time.Millisecond)
}

// TestHubWaitLongerThanIdle checks that the tail reader does not stop
// while a reader waits, however short Idle is.
func TestHubWaitLongerThanIdle(t *testing.T) {
	src := &fakeSource{}
	h := NewHub(src.source(), Options{Poll: time.Hour, Idle: 10 * time.Millisecond})
	done := make(chan Page[item], 1)
	go func() {
		p, _ := h.Read(context.Background(), Position{}, "", 10, 30*time.Second)
		done <- p
	}()
	time.Sleep(100 * time.Millisecond) // ten times Idle
	h.Notify()                         // a kick that lets an idle tail reader notice
	time.Sleep(50 * time.Millisecond)
	it := src.append("a", "")
	h.Notify()
	select {
	case p := <-done:
		if d := cmp.Diff([]item{it}, p.Items); d != "" {
			t.Errorf("Read (-want +got):\n%s", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a reader waiting longer than Idle was not woken by an item and Notify within 10s (wait was 30s)")
	}
}

// TestHubReadYourWrites checks that a read that does not wait, made right
// after Notify, sees the item committed before Notify, although the tail
// reader has not read it yet.
func TestHubReadYourWrites(t *testing.T) {
	src := &fakeSource{}
	h := primed(t, src, Options{Poll: time.Hour})
	after := Position{}
	for i := range 200 {
		it := src.append(keys[i%3], "")
		h.Notify()
		p, err := h.Read(context.Background(), after, "", 10, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Items) == 0 || p.Items[len(p.Items)-1] != it {
			t.Fatalf("write %d: Read right after Notify = %+v, want it to end with %+v", i, p.Items, it)
		}
		after = p.Next
	}
}
