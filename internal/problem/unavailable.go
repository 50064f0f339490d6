package problem

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/tallyhq/tally/store"
)

// RetryAfterSeconds is the Retry-After, in seconds, of an answer written by
// [WriteUnavailable]: long enough for a PostgreSQL restart or failover to
// make progress, short enough that a collector's batch is not held up long.
const RetryAfterSeconds = 2

// Unavailable reports whether err means that the store could not be
// reached or did not answer in time (store.ErrUnavailable), or that the
// request's own deadline passed while it waited for the store
// (context.DeadlineExceeded); both are answered with [WriteUnavailable].
func Unavailable(err error) bool {
	return errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// WriteUnavailable answers 503, code store_unavailable, with Retry-After
// ([RetryAfterSeconds]): the store did not take the request, so the client
// should send it again later (the operations rules, Timeouts and Stale connections).
func WriteUnavailable(w http.ResponseWriter) {
	w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
	Write(w, New(CodeStoreUnavailable,
		"The store could not be reached or did not answer in time; send the request again after Retry-After seconds."))
}
