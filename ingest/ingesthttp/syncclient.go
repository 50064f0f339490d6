package ingesthttp

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/go-json-experiment/json"

	"github.com/tallyhq/tally/ingest/reconcile"
	"github.com/tallyhq/tally/internal/retry"
)

// Sync posts one observation of cloud to POST /api/v1/clouds/{cloud}/sync
// (docs/reconciliation.md) with the client's token (role reconcile, scoped
// to the observation's platform and cloud) and returns the run's outcome.
// The observation is checked locally first ([reconcile.Observation.Check]:
// an invalid one is never sent; the error is an *event.ValidationError).
// A run is idempotent (the same observation again stores nothing new), so
// transport errors and the answers 408, 429 and 5xx are retried as
// [Client.Send] retries, up to MaxAttempts; a retry after a run that was
// committed but whose answer was lost records one more run, all unchanged.
// A 200 whose answer cannot be read is an error and is not retried: the
// run was committed.
// Any other answer is a [*StatusError] (400 naming the members, 403 for a
// scope the credential does not have).
func (c *Client) Sync(ctx context.Context, cloud string, obs reconcile.Observation) (reconcile.Outcome, error) {
	if err := obs.Check(); err != nil {
		return reconcile.Outcome{}, err
	}
	body, err := json.Marshal(obs)
	if err != nil {
		return reconcile.Outcome{}, fmt.Errorf("ingesthttp: encode the observation: %w", err)
	}
	target := c.base + "/api/v1/clouds/" + url.PathEscape(cloud) + "/sync"
	b := retry.NewBackoff(c.opts.Backoff)
	for attempt := 1; ; attempt++ {
		var out reconcile.Outcome
		retryAfter, err := c.do(ctx, http.MethodPost, target, body, "POST /api/v1/clouds/{cloud}/sync", &out)
		if err == nil {
			return out, nil
		}
		if retryAfter < 0 || attempt == c.opts.MaxAttempts {
			return reconcile.Outcome{}, err
		}
		if err := retry.Sleep(ctx, b.Next(retryAfter)); err != nil {
			return reconcile.Outcome{}, fmt.Errorf("ingesthttp: %w", err)
		}
	}
}

// SyncRuns reads one page of the recorded runs (GET /api/v1/sync-runs)
// with the client's token (role read or admin): f.Cloud's runs ("" every
// cloud's), newest first, f.Limit a page (0: the server's 100), from
// f.Cursor. It makes one attempt; a refusal is a [*StatusError].
func (c *Client) SyncRuns(ctx context.Context, f reconcile.RunFilter) (reconcile.RunPage, error) {
	v := url.Values{}
	if f.Cloud != "" {
		v.Set("cloud", f.Cloud)
	}
	if f.Limit > 0 {
		v.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.Cursor != "" {
		v.Set("cursor", f.Cursor)
	}
	target := c.base + "/api/v1/sync-runs"
	if len(v) > 0 {
		target += "?" + v.Encode()
	}
	var p reconcile.RunPage
	if _, err := c.do(ctx, http.MethodGet, target, nil, "GET /api/v1/sync-runs", &p); err != nil {
		return reconcile.RunPage{}, err
	}
	return p, nil
}
