package sse

import (
	"sync"
	"unsafe"
	"weak"
)

// Cache holds the encoded frames of a feed's recent items, so that the
// subscribers of one feed share one encoding of each item instead of each
// marshalling and writing its own copy: a commit read by a thousand
// subscribers is encoded once, and every subscriber writes the same bytes.
// A frame is keyed by its id (the item's cursor), which must name one item
// whose data never changes (true of a feed position). The cache keeps the
// most recently added frames within its bounds and drops the oldest first;
// a dropped frame is still found, without being kept, while a stream
// still holds it or the garbage collector has not reclaimed it (a weak
// reference), so that subscribers a little behind share it too while the
// memory of the frames every subscriber has sent is returned. Safe for
// concurrent use; a nil *Cache encodes every frame anew.
type Cache struct {
	maxItems, maxBytes int

	mu    sync.Mutex
	byID  map[string]*cached
	order []*cached // insertion order, oldest first
	bytes int
	// Frames dropped from order, held weakly: at most 2×maxItems, oldest
	// first in fadedIDs.
	faded    map[string]fadedFrame
	fadedIDs []string
}

// fadedFrame is a weak reference to a dropped frame's bytes.
type fadedFrame struct {
	first weak.Pointer[byte] // the first byte of the encoding
	n     int                // its length
}

type cached struct {
	id   string
	done chan struct{} // closed when wire and err are set
	wire []byte
	err  error
}

// NewCache returns a Cache that keeps at most maxItems frames and maxBytes
// bytes of encoded frames, and refers weakly to at most 2×maxItems more (≤
// 0: 32,768 frames, as many as a feed hub's ring holds, and 2 MiB); a frame
// larger than maxBytes is encoded for its caller and referred to weakly.
func NewCache(maxItems, maxBytes int) *Cache {
	if maxItems <= 0 {
		maxItems = 32 << 10
	}
	if maxBytes <= 0 {
		maxBytes = 2 << 20
	}
	return &Cache{maxItems: maxItems, maxBytes: maxBytes, byID: make(map[string]*cached), faded: make(map[string]fadedFrame)}
}

// Frame returns the frame of the item with cursor id and kind event,
// encoded once per cache: the first caller for id calls data for the
// item's JSON (compact: one line), and callers for the same id meanwhile
// wait for it and share its bytes. An error from data is returned to the
// callers that waited for it and not kept.
func (c *Cache) Frame(id, event string, data func() ([]byte, error)) (Frame, error) {
	if c == nil {
		b, err := data()
		return Frame{ID: id, Event: event, Data: b}, err
	}
	c.mu.Lock()
	e, ok := c.byID[id]
	if !ok {
		if f, in := c.faded[id]; in {
			if p := f.first.Value(); p != nil {
				c.mu.Unlock()
				return Frame{ID: id, Event: event, wire: unsafe.Slice(p, f.n)}, nil
			}
			delete(c.faded, id)
		}
		e = &cached{id: id, done: make(chan struct{})}
		c.byID[id] = e
	}
	c.mu.Unlock()
	if ok {
		<-e.done
		return Frame{ID: id, Event: event, wire: e.wire}, e.err
	}
	b, err := data()
	if err == nil {
		e.wire = encodeFrame(Frame{ID: id, Event: event, Data: b})
	}
	e.err = err
	close(e.done)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil || len(e.wire) > c.maxBytes {
		delete(c.byID, id)
		if err == nil {
			c.fade(e)
		}
		return Frame{ID: id, Event: event, wire: e.wire}, err
	}
	c.order = append(c.order, e)
	c.bytes += len(e.wire)
	drop := 0
	for len(c.order)-drop > c.maxItems || c.bytes > c.maxBytes {
		old := c.order[drop]
		c.bytes -= len(old.wire)
		if c.byID[old.id] == old {
			delete(c.byID, old.id)
			c.fade(old)
		}
		c.order[drop] = nil // the backing array no longer keeps it
		drop++
	}
	c.order = c.order[drop:]
	return Frame{ID: id, Event: event, wire: e.wire}, nil
}

// fade refers weakly to e's frame, dropping the oldest weak references
// past maxItems (in halves, so that a drop costs O(1) amortized). Called
// with mu held.
func (c *Cache) fade(e *cached) {
	if len(e.wire) == 0 {
		return
	}
	if _, in := c.faded[e.id]; !in {
		c.fadedIDs = append(c.fadedIDs, e.id)
	}
	c.faded[e.id] = fadedFrame{first: weak.Make(&e.wire[0]), n: len(e.wire)}
	if len(c.fadedIDs) >= 2*c.maxItems {
		drop := len(c.fadedIDs) - c.maxItems
		for _, id := range c.fadedIDs[:drop] {
			delete(c.faded, id)
		}
		c.fadedIDs = append(c.fadedIDs[:0:0], c.fadedIDs[drop:]...)
	}
}
