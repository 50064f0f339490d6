package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/go-json-experiment/json"
)

// ingestResult is the body of a 200 answer to POST /api/v1/events
// (canonical-event.md, Delivery).
type ingestResult struct {
	Accepted   int         `json:"accepted"`
	Duplicates int         `json:"duplicates"`
	Rejected   []rejection `json:"rejected"`
}

// rejection is one refused item of a batch.
type rejection struct {
	Index   int    `json:"index"`
	EventID string `json:"event_id"`
	Reason  string `json:"reason"`
}

// statusError is an answer that must not be retried: a 4xx, or any status
// other than 200 and 5xx.
type statusError struct {
	Status int
	Body   string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("server answered %d %s: %s", e.Status, http.StatusText(e.Status), e.Body)
}

// sender posts batches to POST {server}/api/v1/events. It retries only
// transport failures and 5xx answers, with capped exponential backoff and
// jitter, at most maxAttempts times in all; a 4xx, or an item the server
// refused, is never retried (the spec: "must not retry a refused item";
// refused items come back in a 200). It is not safe for concurrent use.
type sender struct {
	client      *http.Client
	url         string
	token       string
	maxAttempts int
	baseDelay   time.Duration
	maxDelay    time.Duration
	userAgent   string
	// gzip compresses every body (Content-Encoding: gzip; tally decodes
	// it, counting its cap on the decoded bytes).
	gzip bool
	// sleep waits d or until ctx ends; tests replace it.
	sleep func(ctx context.Context, d time.Duration) error
	// attempts counts every request made, for the summary.
	attempts int
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// send posts one batch body (a JSON array) and returns the ingest result.
func (s *sender) send(ctx context.Context, body []byte) (ingestResult, error) {
	encoding := ""
	if s.gzip {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(body); err != nil {
			return ingestResult{}, err
		}
		if err := zw.Close(); err != nil {
			return ingestResult{}, err
		}
		body, encoding = buf.Bytes(), "gzip"
	}
	var lastErr error
	attempt := 1
	for ; ; attempt++ {
		res, retry, err := s.post(ctx, body, encoding)
		if err == nil {
			return res, nil
		}
		lastErr = err
		if !retry || attempt >= s.maxAttempts || ctx.Err() != nil {
			break
		}
		d := s.backoff(attempt)
		var ra retryAfter
		if errors.As(err, &ra) && ra.d > d {
			d = min(ra.d, s.maxDelay)
		}
		if err := s.sleep(ctx, d); err != nil {
			return ingestResult{}, fmt.Errorf("%w (while waiting to retry after: %v)", err, lastErr)
		}
	}
	var se *statusError
	if errors.As(lastErr, &se) && se.Status < 500 {
		return ingestResult{}, lastErr
	}
	return ingestResult{}, fmt.Errorf("giving up after %d attempts: %w", attempt, lastErr)
}

// backoff is baseDelay·2^(attempt-1), capped at maxDelay, with the upper
// half jittered so that many collectors do not retry in step.
func (s *sender) backoff(attempt int) time.Duration {
	d := s.maxDelay
	if attempt < 31 {
		d = min(s.baseDelay<<(attempt-1), s.maxDelay)
	}
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

// retryAfter carries a 5xx answer's Retry-After.
type retryAfter struct {
	err error
	d   time.Duration
}

func (r retryAfter) Error() string { return r.err.Error() }
func (r retryAfter) Unwrap() error { return r.err }

// post makes one attempt with body in the given Content-Encoding ("" for
// none). retry reports whether the failure may be retried.
func (s *sender) post(ctx context.Context, body []byte, encoding string) (res ingestResult, retry bool, err error) {
	s.attempts++
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return res, false, err
	}
	req.Header.Set("Content-Type", "application/json")
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.token)
	if s.userAgent != "" {
		req.Header.Set("User-Agent", s.userAgent)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return res, ctx.Err() == nil, fmt.Errorf("POST %s: %w", s.url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		// The batch may or may not have landed; a retry is safe because
		// ingestion is idempotent on (event_id, timestamp).
		return res, ctx.Err() == nil, fmt.Errorf("POST %s: reading the answer: %w", s.url, err)
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		if err := json.Unmarshal(b, &res); err != nil {
			return res, false, fmt.Errorf("POST %s: the answer is not an ingest result: %w", s.url, err)
		}
		return res, false, nil
	case resp.StatusCode >= 500:
		err := &statusError{Status: resp.StatusCode, Body: clip(b)}
		if secs, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && secs > 0 {
			return res, true, retryAfter{err: err, d: time.Duration(secs) * time.Second}
		}
		return res, true, err
	default:
		return res, false, &statusError{Status: resp.StatusCode, Body: clip(b)}
	}
}

func clip(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 512 {
		return string(b[:512]) + "…"
	}
	return string(b)
}
