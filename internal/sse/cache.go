package sse

import "sync"

// Cache holds the encoded frames of a feed's recent items, so that the
// subscribers of one feed share one encoding of each item instead of each
// marshalling and buffering its own copy: a commit read by a thousand
// subscribers is encoded once, and every subscriber's buffer refers to the
// same bytes. A frame is keyed by its id (the item's cursor), which must
// name one item whose data never changes (true of a feed position). The
// cache keeps the most recently added frames within its bounds and drops
// the oldest first. Safe for concurrent use; a nil *Cache encodes every
// frame anew.
type Cache struct {
	maxItems, maxBytes int

	mu    sync.Mutex
	byID  map[string]*cached
	order []*cached // insertion order, oldest first
	bytes int
}

type cached struct {
	id   string
	done chan struct{} // closed when wire and err are set
	wire []byte
	err  error
}

// NewCache returns a Cache of at most maxItems frames and maxBytes bytes
// of encoded frames (≤ 0: 4096 frames, 16 MiB, the bounds of a feed hub's
// ring, whose items it encodes); a frame larger than maxBytes is encoded
// for its caller and not kept.
func NewCache(maxItems, maxBytes int) *Cache {
	if maxItems <= 0 {
		maxItems = 4096
	}
	if maxBytes <= 0 {
		maxBytes = 16 << 20
	}
	return &Cache{maxItems: maxItems, maxBytes: maxBytes, byID: make(map[string]*cached)}
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
		}
		c.order[drop] = nil // the backing array no longer keeps it
		drop++
	}
	c.order = c.order[drop:]
	return Frame{ID: id, Event: event, wire: e.wire}, nil
}
