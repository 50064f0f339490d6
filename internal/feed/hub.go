package feed

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Page is one read of a feed.
type Page[T any] struct {
	// Items are in feed order, each after the read's start.
	Items []T
	// Next is where the next read starts: the last item's position, or
	// further when the read passed items its filter does not select; never
	// before the read's start.
	Next Position
	// CaughtUp is true when nothing readable lay after Next when read.
	CaughtUp bool
}

// Source is what a [Hub] reads: one store's feed. The zero F selects every
// item.
type Source[T, F any] struct {
	// Read returns at most limit (≥ 1) items after after that f selects,
	// in feed order. A store may stop early after scanning a bounded
	// number of items f does not select; Next then says how far it read.
	Read func(ctx context.Context, after Position, f F, limit int) (Page[T], error)
	// Head returns the position of the last readable item ([Start] when
	// none is).
	Head func(ctx context.Context) (Position, error)
	// Pos returns an item's position.
	Pos func(T) Position
	// Match reports whether f selects an item, as Read decides.
	Match func(F, T) bool
	// Size estimates an item's size in bytes, for the ring's budget.
	Size func(T) int
}

// Options tune a [Hub]. Zero fields take the defaults named.
type Options struct {
	// Poll is how often the tail reader looks for items committed by
	// other replicas (default 500ms).
	Poll time.Duration
	// RingItems and RingBytes bound the recent items a Hub keeps in memory
	// (defaults 32,768 and 16 MiB): a waiting reader further behind reads
	// the store itself, decoding again what the ring decoded once, so the
	// ring holds as many items as its bytes allow.
	RingItems, RingBytes int
	// Idle is how long the tail reader keeps reading with no reader
	// (default 30s).
	Idle time.Duration
	// MaxReads bounds the concurrent store reads of readers behind the
	// ring, so followers never take every database connection (default 4).
	MaxReads int
}

const tailPage = 1000

// Hub serves one feed to every reader of a process. A tail reader (one
// goroutine, started by the first reader and stopped when no reader came
// or waited for Options.Idle) reads the store from its head on each
// [Hub.Notify] and every Options.Poll, keeps the most recent items in a
// ring and wakes the waiting readers. A waiting reader whose position the
// ring covers is answered from memory; one further behind, and every read
// that does not wait, reads the store itself, at most Options.MaxReads at
// a time. Safe for concurrent use.
type Hub[T, F any] struct {
	src  Source[T, F]
	opts Options
	sem  chan struct{}
	kick chan struct{}

	mu        sync.Mutex
	running   bool     // a tail reader runs
	valid     bool     // ring, start and tail hold
	ring      []T      // items after start, up to tail, in order
	ringBytes int      //
	start     Position // the position before ring[0]
	tail      Position // the position the tail reader has read up to
	changed   chan struct{}
	lastRead  time.Time // when a reader last came or stopped waiting
	waiting   int       // readers in a Read with wait
}

// NewHub returns a Hub over src.
func NewHub[T, F any](src Source[T, F], opts Options) *Hub[T, F] {
	if opts.Poll <= 0 {
		opts.Poll = 500 * time.Millisecond
	}
	if opts.RingItems <= 0 {
		opts.RingItems = 32 << 10
	}
	if opts.RingBytes <= 0 {
		opts.RingBytes = 16 << 20
	}
	if opts.Idle <= 0 {
		opts.Idle = 30 * time.Second
	}
	if opts.MaxReads <= 0 {
		opts.MaxReads = 4
	}
	return &Hub[T, F]{
		src: src, opts: opts,
		sem:     make(chan struct{}, opts.MaxReads),
		kick:    make(chan struct{}, 1),
		changed: make(chan struct{}),
	}
}

// Notify tells the hub that items were committed (on this replica, or on
// another when a wake-up says so): the tail reader reads at once and wakes
// the waiting readers.
func (h *Hub[T, F]) Notify() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// Head returns the position of the last readable item, read from the
// store within the bound on concurrent reads (Options.MaxReads), so that
// many subscribers starting at once from the head never take every
// database connection.
func (h *Hub[T, F]) Head(ctx context.Context) (Position, error) {
	select {
	case h.sem <- struct{}{}:
	case <-ctx.Done():
		return Position{}, ctx.Err()
	}
	defer func() { <-h.sem }()
	return h.src.Head(ctx)
}

// Read returns at most limit items after after that f selects (read-only:
// they may be shared with the hub's ring and other readers). With wait
// > 0 and nothing to return it waits until an item arrives or wait has
// passed, then answers with what there is (possibly no items, Next where
// the read stopped). A cancelled ctx ends the wait with ctx's error.
func (h *Hub[T, F]) Read(ctx context.Context, after Position, f F, limit int, wait time.Duration) (Page[T], error) {
	var timer <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timer = t.C
		h.mu.Lock()
		h.waiting++
		h.mu.Unlock()
		defer h.leave()
	}
	for {
		changed := h.arrive()
		p, ok := h.fromRing(after, f, limit, wait > 0)
		if !ok {
			var err error
			if p, err = h.readStore(ctx, after, f, limit); err != nil {
				return Page[T]{}, err
			}
		}
		if len(p.Items) > 0 || wait <= 0 {
			return p, nil
		}
		after = p.Next
		if !p.CaughtUp {
			select {
			case <-timer:
				return p, nil
			case <-ctx.Done():
				return Page[T]{}, ctx.Err()
			default:
				continue
			}
		}
		select {
		case <-changed:
		case <-timer:
			return p, nil
		case <-ctx.Done():
			return Page[T]{}, ctx.Err()
		}
	}
}

// arrive records a reader, starts the tail reader when none runs, and
// returns the channel closed at the tail's next advance.
func (h *Hub[T, F]) arrive() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastRead = time.Now()
	if !h.running {
		h.running = true
		go h.run()
	}
	return h.changed
}

// leave records the end of a Read with wait: the tail reader keeps running
// while a reader waits, and for Options.Idle after the last one left.
func (h *Hub[T, F]) leave() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.waiting--
	h.lastRead = time.Now()
}

func (h *Hub[T, F]) readStore(ctx context.Context, after Position, f F, limit int) (Page[T], error) {
	select {
	case h.sem <- struct{}{}:
	case <-ctx.Done():
		return Page[T]{}, ctx.Err()
	}
	defer func() { <-h.sem }()
	return h.src.Read(ctx, after, f, limit)
}

// fromRing answers a waiting read from the ring when the ring covers
// after. A read that does not wait always reads the store, so that it sees
// everything readable when it asks: the ring holds what the tail last
// found, and an item held back then (by an older transaction still open,
// on PostgreSQL) may have become readable since without any Notify.
func (h *Hub[T, F]) fromRing(after Position, f F, limit int, waiting bool) (Page[T], bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !waiting || !h.valid || Compare(after, h.start) < 0 || Compare(after, h.tail) > 0 {
		return Page[T]{}, false
	}
	i := sort.Search(len(h.ring), func(i int) bool { return Compare(h.src.Pos(h.ring[i]), after) > 0 })
	p := Page[T]{Next: h.tail, CaughtUp: true}
	j := i
	for j < len(h.ring) && j-i < limit && h.src.Match(f, h.ring[j]) {
		j++
	}
	if j == i && i == len(h.ring) {
		return p, true
	}
	if j-i == limit || j == len(h.ring) {
		// Every item read is selected: the reader shares the ring's, which
		// are never changed in place (append writes past every reader's
		// slice; eviction moves the ring to a new array).
		p.Items = h.ring[i:j:j]
		if j-i == limit {
			p.Next, p.CaughtUp = h.src.Pos(h.ring[j-1]), j == len(h.ring)
		}
		return p, true
	}
	// One allocation: a subscriber behind takes up to limit items.
	p.Items = make([]T, 0, min(limit, len(h.ring)-i))
	for ; i < len(h.ring); i++ {
		if !h.src.Match(f, h.ring[i]) {
			continue
		}
		p.Items = append(p.Items, h.ring[i])
		if len(p.Items) == limit {
			p.Next = h.src.Pos(h.ring[i])
			p.CaughtUp = i == len(h.ring)-1
			break
		}
	}
	return p, true
}

// run is the tail reader.
func (h *Hub[T, F]) run() {
	ctx := context.Background()
	poll := time.NewTicker(h.opts.Poll)
	defer poll.Stop()
	for {
		h.mu.Lock()
		if h.waiting == 0 && time.Since(h.lastRead) > h.opts.Idle {
			h.running, h.valid, h.ring, h.ringBytes = false, false, nil, 0
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		h.advance(ctx)
		select {
		case <-h.kick:
		case <-poll.C:
		}
	}
}

// advance reads the store from the tail until caught up, appending to the
// ring and waking the readers. A store error leaves the tail where it was
// (the next poll retries).
func (h *Hub[T, F]) advance(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, 10*h.opts.Poll+5*time.Second)
	defer cancel()
	h.mu.Lock()
	valid, tail := h.valid, h.tail
	h.mu.Unlock()
	if !valid {
		head, err := h.src.Head(rctx)
		if err != nil {
			return
		}
		h.mu.Lock()
		h.valid, h.start, h.tail, h.ring, h.ringBytes = true, head, head, nil, 0
		h.mu.Unlock()
		tail = head
	}
	var zero F
	for {
		p, err := h.src.Read(rctx, tail, zero, tailPage)
		if err != nil {
			return
		}
		h.mu.Lock()
		h.append(p)
		close(h.changed)
		h.changed = make(chan struct{})
		h.mu.Unlock()
		tail = p.Next
		if p.CaughtUp {
			return
		}
	}
}

// append adds a page read from the tail and evicts the oldest items past
// the ring's budget. Called with mu held.
func (h *Hub[T, F]) append(p Page[T]) {
	for _, it := range p.Items {
		h.ring = append(h.ring, it)
		h.ringBytes += h.src.Size(it)
	}
	h.tail = p.Next
	drop := 0
	for len(h.ring)-drop > h.opts.RingItems || (h.ringBytes > h.opts.RingBytes && len(h.ring)-drop > 0) {
		h.ringBytes -= h.src.Size(h.ring[drop])
		h.start = h.src.Pos(h.ring[drop])
		drop++
	}
	if drop > 0 {
		h.ring = append(h.ring[:0:0], h.ring[drop:]...)
	}
}
