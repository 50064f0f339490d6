package server

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/time/rate"

	"github.com/tallyhq/tally/internal/problem"
)

// RateLimit is a credential's optional limit (the credentials file's
// "rate_limit": {"requests_per_second": …, "items_per_second": …}; docs/
// operations.md, Rate limits): token buckets refilled at these rates, each
// holding at most one second of them (and at least one request, and at
// least one full batch of items). Zero is no limit. A request past a limit
// is answered 429 rate_limited with Retry-After, the seconds until the
// bucket holds enough, and changes nothing; it counts in
// tally_rate_limited_total{credential,limit}.
type RateLimit struct {
	// RequestsPerSecond bounds the requests of every authenticated route.
	RequestsPerSecond float64
	// ItemsPerSecond bounds the items of ingestion batches (POST
	// /api/v1/events), counted once the body is split into them.
	ItemsPerSecond float64
}

// MaxRate is the largest rate a credentials file may give.
const MaxRate = 1e6

// limiters holds the token buckets of the credentials that have a limit,
// by name; it is made anew with each credential set (a reload refills
// every bucket).
type limiters struct {
	requests, items map[string]*rate.Limiter
}

func newLimiters(creds []Credential, itemBurst int) *limiters {
	l := &limiters{requests: map[string]*rate.Limiter{}, items: map[string]*rate.Limiter{}}
	for _, c := range creds {
		if r := c.RateLimit.RequestsPerSecond; r > 0 {
			l.requests[c.Name] = rate.NewLimiter(rate.Limit(r), max(1, int(math.Ceil(r))))
		}
		if r := c.RateLimit.ItemsPerSecond; r > 0 {
			l.items[c.Name] = rate.NewLimiter(rate.Limit(r), max(itemBurst, int(math.Ceil(r))))
		}
	}
	return l
}

// take takes n tokens of lim now, or reports how long until it could.
func take(lim *rate.Limiter, n int) (time.Duration, bool) {
	now := time.Now()
	res := lim.ReserveN(now, n)
	if !res.OK() {
		return time.Duration(math.MaxInt64), false
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return d, false
	}
	return 0, true
}

// rateLimited writes the 429 of a request past limit ("requests" or
// "items"), counted for the credential.
func rateLimited(w http.ResponseWriter, m *Metrics, name, limit string, wait time.Duration) {
	secs := int64(math.Ceil(wait.Seconds()))
	if secs < 1 || wait == time.Duration(math.MaxInt64) {
		secs = 1
	}
	if m != nil {
		m.rateLimited.WithLabelValues(name, limit).Inc()
	}
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	problem.Write(w, problem.New(problem.CodeRateLimited,
		fmt.Sprintf("Credential %q sends more %s per second than its rate_limit allows; send it again after Retry-After seconds.", name, limit)))
}

// admitItems is ingesthttp's Options.Admit: the items of one batch against
// the caller's items bucket.
func (a *Authenticator) admitItems(m *Metrics) func(w http.ResponseWriter, r *http.Request, n int) bool {
	return func(w http.ResponseWriter, r *http.Request, n int) bool {
		c, ok := CredentialFrom(r.Context())
		if !ok {
			return true
		}
		lim := a.limiters.Load().items[c.Name]
		if lim == nil {
			return true
		}
		if wait, ok := take(lim, n); !ok {
			rateLimited(w, m, c.Name, "items", wait)
			return false
		}
		return true
	}
}

// admitRequest takes one request of c's requests bucket, or answers 429.
func (a *Authenticator) admitRequest(w http.ResponseWriter, m *Metrics, c Credential) bool {
	lim := a.limiters.Load().requests[c.Name]
	if lim == nil {
		return true
	}
	if wait, ok := take(lim, 1); !ok {
		rateLimited(w, m, c.Name, "requests", wait)
		return false
	}
	return true
}
