package httpbody

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/tallyhq/tally/internal/problem"
)

// initialBuffer is the first buffer [Read] gives a body of unknown decoded
// size (chunked, or with a content coding); it doubles from there.
const initialBuffer = 16 << 10

// retryAfterSeconds is the Retry-After of a 503 for a spent [Budget].
const retryAfterSeconds = 1

// Budget bounds the request body bytes held in memory at once by all the
// requests it wraps (the hostile-input rules, Memory per request). [Read] charges the
// decoded bytes a body needs as it grows, as its bytes arrive: at most
// twice what the body has brought, 16 KiB to start, whatever length it
// declares, so uploads that declare the cap and then send nothing (or
// trickle) cannot hold the budget from the others; what a request was charged is given back when
// the handler [Budget.Handler] wraps returns, since the decoded items live
// as long as the request, or at once when Read fails. A charge that does not
// fit waits up to the budget's wait, then fails with a 503 [*problem.Error]
// (busy, Retry-After: 1).
//
// A body that sends its first bytes (or most of them) and then stops would
// still hold what it brought until the server's read timeout; so [Read]
// fails a body from which no byte arrives for the budget's stall timeout
// with a 408 [*problem.Error] (body_timeout) and gives its share back at once. A
// body that keeps arriving, however slowly, is never cut off by it; only
// the server's read timeout bounds its whole.
//
// Bodies cost more than their bytes while a request runs (the items split
// from them, the decoded events); the budget counts the body bytes only, so
// the memory it bounds is a small multiple of its size (README,
// Reliability, has the measured figure). Safe for concurrent use.
type Budget struct {
	sem     *semaphore.Weighted
	size    int64
	wait    time.Duration
	stall   time.Duration
	inUse   atomic.Int64
	stalled atomic.Int64
}

// NewBudget returns a budget of size bytes whose charges wait at most
// wait, and whose bodies fail when no byte of theirs arrives for stall
// (zero: never; the server's read timeout still bounds them). The stall
// timeout needs the connection's read deadline
// ([http.ResponseController.SetReadDeadline]); where the ResponseWriter
// does not offer it, it does not apply. Errors: size < 1, wait < 0 or
// stall < 0.
func NewBudget(size int64, wait, stall time.Duration) (*Budget, error) {
	var errs []error
	if size < 1 {
		errs = append(errs, fmt.Errorf("httpbody: a budget must be at least 1 byte, is %d", size))
	}
	if wait < 0 {
		errs = append(errs, fmt.Errorf("httpbody: a budget's wait must not be negative, is %s", wait))
	}
	if stall < 0 {
		errs = append(errs, fmt.Errorf("httpbody: a budget's stall timeout must not be negative, is %s", stall))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Budget{sem: semaphore.NewWeighted(size), size: size, wait: wait, stall: stall}, nil
}

// Size is the budget in bytes.
func (b *Budget) Size() int64 { return b.size }

// InUse is the number of bytes charged now.
func (b *Budget) InUse() int64 { return b.inUse.Load() }

// Stalled is the number of bodies failed so far because no byte of theirs
// arrived for the stall timeout.
func (b *Budget) Stalled() int64 { return b.stalled.Load() }

type accountKey struct{}

// account is one request's share of a budget. It is used by the request's
// handler goroutine only.
type account struct {
	b    *Budget
	held int64
}

// Handler runs next with an account on the budget in the request's
// context, which [Read] charges, and gives back what was charged when next
// returns.
func (b *Budget) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := &account{b: b}
		defer a.release()
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), accountKey{}, a)))
	})
}

func accountFrom(ctx context.Context) *account {
	a, _ := ctx.Value(accountKey{}).(*account)
	return a
}

// charge takes n more bytes of the budget for the request, waiting at most
// the budget's wait. A nil account (no budget) always succeeds. One request
// is never charged more than the whole budget.
func (a *account) charge(ctx context.Context, n int64) error {
	if a == nil || n <= 0 {
		return nil
	}
	n = min(n, a.b.size-a.held)
	if n <= 0 {
		return nil
	}
	if !a.b.sem.TryAcquire(n) {
		wctx, cancel := context.WithTimeout(ctx, a.b.wait)
		defer cancel()
		if err := a.b.sem.Acquire(wctx, n); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("httpbody: %w while waiting for the body budget: %w", problem.ErrClientGone, ctx.Err())
			}
			return &problem.Error{Details: problem.New(problem.CodeBusy,
				fmt.Sprintf("the server holds as many request bytes as it allows (%d); retry after %d s", a.b.size, retryAfterSeconds)),
				Header: http.Header{"Retry-After": {strconv.Itoa(retryAfterSeconds)}}}
		}
	}
	a.held += n
	a.b.inUse.Add(n)
	return nil
}

// release gives back everything the request was charged. A nil account
// (no budget) has nothing to give back.
func (a *account) release() {
	if a != nil && a.held > 0 {
		a.b.sem.Release(a.held)
		a.b.inUse.Add(-a.held)
		a.held = 0
	}
}
