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
// as long as the request. A charge that does not fit waits up to the
// budget's wait, then fails with a 503 [*problem.Error] (busy, Retry-After: 1).
//
// Bodies cost more than their bytes while a request runs (the items split
// from them, the decoded events); the budget counts the body bytes only, so
// the memory it bounds is a small multiple of its size (README,
// Reliability, has the measured figure). Safe for concurrent use.
type Budget struct {
	sem   *semaphore.Weighted
	size  int64
	wait  time.Duration
	inUse atomic.Int64
}

// NewBudget returns a budget of size bytes whose charges wait at most
// wait. Errors: size < 1 or wait < 0.
func NewBudget(size int64, wait time.Duration) (*Budget, error) {
	var errs []error
	if size < 1 {
		errs = append(errs, fmt.Errorf("httpbody: a budget must be at least 1 byte, is %d", size))
	}
	if wait < 0 {
		errs = append(errs, fmt.Errorf("httpbody: a budget's wait must not be negative, is %s", wait))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Budget{sem: semaphore.NewWeighted(size), size: size, wait: wait}, nil
}

// Size is the budget in bytes.
func (b *Budget) Size() int64 { return b.size }

// InUse is the number of bytes charged now.
func (b *Budget) InUse() int64 { return b.inUse.Load() }

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

func (a *account) release() {
	if a.held > 0 {
		a.b.sem.Release(a.held)
		a.b.inUse.Add(-a.held)
		a.held = 0
	}
}
