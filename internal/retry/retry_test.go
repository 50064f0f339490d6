package retry

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

// "retries transport errors and 5xx (and 408/429)"; nothing else.
func TestStatus(t *testing.T) {
	for s, want := range map[int]bool{200: false, 400: false, 401: false, 408: true, 413: false, 429: true, 500: true, 502: true, 503: true, 504: true} {
		if got := Status(s); got != want {
			t.Errorf("Status(%d) = %v, want %v", s, got, want)
		}
	}
}

// RFC 9110, section 10.2.3: Retry-After is delay-seconds or an HTTP-date.
func TestAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		header string
		want   time.Duration
	}{
		{"", 0},
		{"3", 3 * time.Second},
		{"0", 0},
		{"-5", 0},
		{"3600", MaxWait},
		{"99999999999999999999", 0}, // not an int64: malformed
		{"Sun, 01 Mar 2026 12:00:10 GMT", 10 * time.Second},
		{"Sun, 01 Mar 2026 11:00:00 GMT", 0},
		{"Sun, 01 Mar 2026 13:00:00 GMT", MaxWait},
		{"soon", 0},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.header != "" {
			h.Set("Retry-After", tt.header)
		}
		if got := After(h, now); got != tt.want {
			t.Errorf("After(%q) = %v, want %v", tt.header, got, tt.want)
		}
	}
}

// Each wait lies between half and all of its step, the step doubling up to
// MaxWait; a longer Retry-After wins, capped at MaxWait.
func TestBackoff(t *testing.T) {
	for range 50 {
		b := NewBackoff(100 * time.Millisecond)
		for i, step := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond} {
			if d := b.Next(0); d < step/2 || d > step {
				t.Fatalf("wait %d = %v, want within [%v, %v]", i, d, step/2, step)
			}
		}
		if d := b.Next(5 * time.Second); d != 5*time.Second {
			t.Fatalf("wait with Retry-After 5s = %v", d)
		}
		for range 10 {
			b.Next(0)
		}
		if d := b.Next(0); d < MaxWait/2 || d > MaxWait {
			t.Fatalf("capped wait = %v, want within [%v, %v]", d, MaxWait/2, MaxWait)
		}
		if d := b.Next(time.Hour); d != MaxWait {
			t.Fatalf("wait with Retry-After 1h = %v, want %v", d, MaxWait)
		}
	}
}

// A page that brings nothing new (no item, the same cursor) is followed
// by a pause of the first wait before the next read: a server or proxy
// that answers at once without waiting (it ignores wait, or is hostile)
// is not polled in a tight loop. A page with items is read on at once.
func TestFollowPausesWhenNothingIsNew(t *testing.T) {
	var pauses []time.Duration
	defer func(p func(context.Context, time.Duration) error) { pause = p }(pause)
	pause = func(ctx context.Context, d time.Duration) error { pauses = append(pauses, d); return ctx.Err() }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reads := 0
	pages := []struct {
		items []int
		next  string
	}{{[]int{1}, "c1"}, {nil, "c1"}, {nil, "c1"}, {[]int{2}, "c2"}, {nil, "c3"}, {nil, "c3"}}
	var got []int
	err := Follow(ctx, 200*time.Millisecond, "c0", func(ctx context.Context, after string) ([]int, string, time.Duration, error) {
		if reads == len(pages) {
			cancel()
			return nil, "", 0, ctx.Err()
		}
		p := pages[reads]
		reads++
		return p.items, p.next, 0, nil
	}, func(i int) error { got = append(got, i); return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow: %v", err)
	}
	// Pauses after the two pages that repeat c1 and the one that repeats c3;
	// none after a page with items or one that moves the cursor.
	want := []time.Duration{200 * time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond}
	if len(got) != 2 || len(pauses) != len(want) || pauses[0] != want[0] || pauses[2] != want[2] {
		t.Errorf("items %v, pauses %v; want [1 2] and %v", got, pauses, want)
	}
}
