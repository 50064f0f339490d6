// Package retry holds the retry policy the Go clients of tally share
// (correlatehttp.Client and ingesthttp.Client; the existing-clients rules, Go clients beside
// the handlers): which answers are retried, how long to wait between
// attempts, how a server's Retry-After is read, and the one exchange of a
// request and its answer ([Exchange]) both clients make.
package retry

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// MaxWait caps every wait between two attempts, a Retry-After included.
const MaxWait = 30 * time.Second

// CheckOptions lists what is wrong with a client's retry options (a
// negative maxAttempts or backoff), each error prefixed with pkg, the
// client's package name.
func CheckOptions(pkg string, maxAttempts int, backoff time.Duration) []error {
	var errs []error
	if maxAttempts < 0 {
		errs = append(errs, fmt.Errorf("%s: MaxAttempts must not be negative, is %d", pkg, maxAttempts))
	}
	if backoff < 0 {
		errs = append(errs, fmt.Errorf("%s: Backoff must not be negative, is %s", pkg, backoff))
	}
	return errs
}

// Defaults fills a client's zero retry options: an http.Client with a 30 s
// timeout, 5 attempts, a first wait of 200 ms.
func Defaults(c *http.Client, maxAttempts int, backoff time.Duration) (*http.Client, int, time.Duration) {
	if c == nil {
		c = &http.Client{Timeout: 30 * time.Second}
	}
	if maxAttempts == 0 {
		maxAttempts = 5
	}
	if backoff == 0 {
		backoff = 200 * time.Millisecond
	}
	return c, maxAttempts, backoff
}

// Status reports whether an answer with status code s is retried: 408
// Request Timeout, 429 Too Many Requests and every 5xx. Any other answer is
// final.
func Status(s int) bool {
	return s == http.StatusRequestTimeout || s == http.StatusTooManyRequests || s >= 500
}

// After reads a Retry-After header (RFC 9110, section 10.2.3): delay-seconds
// or an HTTP-date, measured from now. It returns 0 when the header is absent,
// malformed or in the past, and at most [MaxWait].
func After(h http.Header, now time.Time) time.Duration {
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		d = time.Duration(min(n, int64(MaxWait/time.Second))) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return max(0, min(d, MaxWait))
}

// Backoff is the doubling, jittered wait between the attempts of one
// request. The zero value is not usable; use [NewBackoff].
type Backoff struct {
	next time.Duration
}

// NewBackoff returns a Backoff whose first wait is first (jittered), which
// must be positive.
func NewBackoff(first time.Duration) *Backoff { return &Backoff{next: first} }

// Next returns the wait before the next attempt: the current step jittered
// to between half and all of it, or the server's Retry-After when that is
// longer, at most [MaxWait]; the step then doubles, up to MaxWait.
func (b *Backoff) Next(retryAfter time.Duration) time.Duration {
	w := b.next/2 + rand.N(b.next/2+1)
	b.next = min(2*b.next, MaxWait)
	return min(max(w, retryAfter), MaxWait)
}

// Sleep waits d, or until ctx ends, then returning ctx.Err().
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Follow is the loop of a change feed's Follow, as both Go clients run it:
// read the page after the cursor after, call fn with each item in order,
// and continue from the page's next cursor, until ctx ends or fn returns
// an error. A read whose retryAfter is negative ends it with that error (a
// refusal); any other failed read is retried after the backoff (first
// wait first, doubling, Retry-After honoured), which each answer resets.
// After a page with no item that leaves the cursor where it was, Follow
// waits first before the next read.
func Follow[I any](ctx context.Context, first time.Duration, after string,
	read func(ctx context.Context, after string) (items []I, next string, retryAfter time.Duration, err error),
	fn func(I) error) error {
	b := NewBackoff(first)
	for {
		items, next, retryAfter, err := read(ctx, after)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if retryAfter < 0 {
				return err
			}
			if err := Sleep(ctx, b.Next(retryAfter)); err != nil {
				return err
			}
			continue
		}
		b = NewBackoff(first)
		for _, it := range items {
			if err := fn(it); err != nil {
				return err
			}
		}
		if len(items) == 0 && next == after {
			// Nothing new: a server that answers at once without waiting
			// (a proxy that drops wait, or a hostile one) is not polled in
			// a tight loop.
			if err := pause(ctx, first); err != nil {
				return err
			}
		}
		after = next
	}
}

// pause is Follow's wait after a page that brought nothing new ([Sleep];
// a test sees the waits through it).
var pause = Sleep

// Exchange makes one request of a client: method on target with the
// bearer token, body (nil: none) sent as application/json. An answer of
// status want is handed to read. Any other status is returned with up to
// 64 KiB of its body and the least wait before a retry (negative: never
// retried, [Status]), err nil. A request that cannot be made, or a
// transport error, is err with a wait of 0 (negative when ctx is done);
// read's error is returned as it is, with status want.
func Exchange(ctx context.Context, c *http.Client, token, method, target string, body []byte, want int, read func(io.Reader) error) (status int, answer []byte, after time.Duration, err error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return 0, nil, -1, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := c.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil, -1, err
		}
		return 0, nil, 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != want {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		after := time.Duration(-1)
		if Status(res.StatusCode) {
			after = After(res.Header, time.Now())
		}
		return res.StatusCode, b, after, nil
	}
	return want, nil, 0, read(res.Body)
}
