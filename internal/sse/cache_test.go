package sse

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCacheEncodesOnceAndShares checks that subscribers of one item, at
// once, call data once and get the same bytes, equal to encodeFrame's.
func TestCacheEncodesOnceAndShares(t *testing.T) {
	c := NewCache(0, 0)
	var calls atomic.Int32
	data := func() ([]byte, error) {
		calls.Add(1)
		return []byte(`{"a":1}`), nil
	}
	const subscribers = 64
	got := make([]Frame, subscribers)
	var wg sync.WaitGroup
	for i := range subscribers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fr, err := c.Frame("p1", "event", data)
			if err != nil {
				t.Error(err)
			}
			got[i] = fr
		}()
	}
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Errorf("data called %d times, want 1", n)
	}
	want := string(encodeFrame(Frame{ID: "p1", Event: "event", Data: []byte(`{"a":1}`)}))
	for i, fr := range got {
		if d := cmp.Diff(want, string(fr.encoded())); d != "" {
			t.Fatalf("subscriber %d (-want +got):\n%s", i, d)
		}
		if &fr.encoded()[0] != &got[0].encoded()[0] {
			t.Fatalf("subscriber %d got its own copy of the frame", i)
		}
	}
}

// TestCacheBounds checks that the cache keeps at most its bounds, dropping
// the oldest first, and that a dropped frame is encoded again when asked
// once no stream holds it and the collector has run.
func TestCacheBounds(t *testing.T) {
	for _, tc := range []struct {
		name               string
		maxItems, maxBytes int
		add                int
		wantKept           []string
	}{
		{"item bound", 3, 1 << 20, 5, []string{"p2", "p3", "p4"}},
		// Each frame is len("id: pN\nevent: e\ndata: xxxxxxxxxx\n\n") = 35 bytes.
		{"byte bound", 100, 80, 5, []string{"p3", "p4"}},
		{"frame larger than the byte bound is not kept", 100, 10, 3, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCache(tc.maxItems, tc.maxBytes)
			for i := range tc.add {
				if _, err := c.Frame(fmt.Sprintf("p%d", i), "e", func() ([]byte, error) { return []byte("xxxxxxxxxx"), nil }); err != nil {
					t.Fatal(err)
				}
			}
			var kept []string
			for _, e := range c.order {
				kept = append(kept, e.id)
			}
			if d := cmp.Diff(tc.wantKept, kept); d != "" {
				t.Errorf("kept (-want +got):\n%s", d)
			}
			if len(c.byID) != len(kept) {
				t.Errorf("%d ids indexed, %d kept", len(c.byID), len(kept))
			}
			bytes := 0
			for _, e := range c.order {
				bytes += len(e.wire)
			}
			if bytes != c.bytes || bytes > tc.maxBytes {
				t.Errorf("bytes = %d (counted %d), bound %d", bytes, c.bytes, tc.maxBytes)
			}
			runtime.GC() // nothing holds the dropped frames: their weak references die
			calls := 0
			if _, err := c.Frame("p0", "e", func() ([]byte, error) { calls++; return []byte("xxxxxxxxxx"), nil }); err != nil {
				t.Fatal(err)
			}
			if calls != 1 {
				t.Errorf("a dropped frame: data called %d times, want 1", calls)
			}
		})
	}
}

// TestCacheSharesADroppedFrameStillHeld: a frame dropped from the cache's
// bounds while a stream still holds it (a subscriber a little behind) is
// shared, not encoded again, and not kept: once nothing holds it and the
// collector has run, it is encoded anew.
func TestCacheSharesADroppedFrameStillHeld(t *testing.T) {
	c := NewCache(1, 1<<20)
	calls := 0
	data := func() ([]byte, error) { calls++; return []byte(`{"a":1}`), nil }
	held, err := c.Frame("p0", "e", data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Frame("p1", "e", data); err != nil { // drops p0 from the bounds
		t.Fatal(err)
	}
	if len(c.byID) != 1 || c.byID["p0"] != nil {
		t.Fatalf("kept %v, want p1 alone", c.byID)
	}
	runtime.GC()
	again, err := c.Frame("p0", "e", data)
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 || &again.encoded()[0] != &held.encoded()[0] {
		t.Errorf("a dropped frame still held: data called %d times (want 2: p0 and p1 once each), shared %v",
			calls, &again.encoded()[0] == &held.encoded()[0])
	}
	if d := cmp.Diff(string(held.encoded()), string(again.encoded())); d != "" {
		t.Errorf("(-held +again):\n%s", d)
	}
	runtime.KeepAlive(held.wire)
	held, again = Frame{}, Frame{}
	runtime.GC()
	if _, err := c.Frame("p0", "e", data); err != nil {
		t.Fatal(err)
	}
	if calls != 3 {
		t.Errorf("a dropped frame nothing holds, after a collection: data called %d times in all, want 3", calls)
	}
}

// TestCacheErrorNotKept checks that an encoding error reaches its caller
// and that the next caller tries again.
func TestCacheErrorNotKept(t *testing.T) {
	c := NewCache(0, 0)
	boom := errors.New("boom")
	if _, err := c.Frame("p1", "e", func() ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	fr, err := c.Frame("p1", "e", func() ([]byte, error) { return []byte("{}"), nil })
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff("id: p1\nevent: e\ndata: {}\n\n", string(fr.encoded())); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// TestNilCache checks that a nil *Cache encodes each frame anew.
func TestNilCache(t *testing.T) {
	var c *Cache
	fr, err := c.Frame("p1", "e", func() ([]byte, error) { return []byte("{}"), nil })
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff("id: p1\nevent: e\ndata: {}\n\n", string(fr.encoded())); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
