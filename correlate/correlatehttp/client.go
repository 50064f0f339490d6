package correlatehttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/google/uuid"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/internal/retry"
)

// ClientOptions configures a [Client].
type ClientOptions struct {
	// Token is the bearer token of an events credential. Required.
	Token string
	// HTTPClient sends the requests; nil means a client with a 30 s
	// timeout per attempt.
	HTTPClient *http.Client
	// MaxAttempts bounds the attempts of one create, the first included; 0
	// means 5. It must not be negative.
	MaxAttempts int
	// Backoff is the wait before the first retry; it doubles after each, up
	// to 30 s, each wait jittered to between half and all of it. 0 means
	// 200 ms. It must not be negative.
	Backoff time.Duration
}

// Client creates correlated events on a tally server's createEvent route
// (POST /api/events; event-correlation.md, createEvent semantics), reads
// them ([Client.List], [Client.AllEvents], [Client.Summary],
// [Client.Aggregate], [Client.Types]), marks them read or unread, deletes
// them, and follows their change feed ([Client.Feed], [Client.Follow]). It
// is safe for concurrent use.
//
// Every create is safe to retry: a payload without an idempotencyKey is
// sent with a fresh random Idempotency-Key header (a UUID), and every
// attempt of that create carries the same key, so a create whose answer was
// lost is replayed, never counted twice (step 1). Transport errors and the
// answers 408, 429 and 5xx are retried with backoff and jitter (a
// Retry-After in seconds or as a date is honoured, at most 30 s); any other answer ends
// the create.
type Client struct {
	url     string
	opts    ClientOptions
	backoff time.Duration
}

// NewClient returns a Client of the server at baseURL (for example
// "http://127.0.0.1:8080"). Errors (joined): an empty baseURL or token, a
// negative MaxAttempts or Backoff.
func NewClient(baseURL string, opts ClientOptions) (*Client, error) {
	var errs []error
	if baseURL == "" {
		errs = append(errs, errors.New("correlatehttp: a base URL is required"))
	}
	if opts.Token == "" {
		errs = append(errs, errors.New("correlatehttp: a token is required"))
	}
	errs = append(errs, retry.CheckOptions("correlatehttp", opts.MaxAttempts, opts.Backoff)...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	opts.HTTPClient, opts.MaxAttempts, opts.Backoff = retry.Defaults(opts.HTTPClient, opts.MaxAttempts, opts.Backoff)
	return &Client{url: strings.TrimRight(baseURL, "/") + "/api/events", opts: opts, backoff: opts.Backoff}, nil
}

// StatusError is a request the server refused or kept failing: its status
// code and the answer's body (RFC 9457 problem details for tally's own
// answers), at most 64 KiB of it.
type StatusError struct {
	StatusCode int
	Body       []byte
	// request names the request in the message; "" is createEvent.
	request string
}

func (e *StatusError) Error() string {
	r := e.request
	if r == "" {
		r = "createEvent"
	}
	return fmt.Sprintf("correlatehttp: %s answered %d %s: %s", r, e.StatusCode, http.StatusText(e.StatusCode), bytes.TrimSpace(e.Body))
}

// Create sends one create of p and returns the event and its
// [correlate.Disposition], read from the Event-Disposition header; from a
// server that predates correlation (no header) 201 means created and 200
// replayed, as event-correlation.md (`Event-Disposition`) says.
//
// p is validated first ([correlate.Payload.Validate]); an invalid payload is
// returned as that [*event.ValidationError] without a request. A refusal is
// a [*StatusError]; so is the last answer of a create that kept failing
// (wrapped with the number of attempts), else the last transport error.
// ctx bounds the whole create, waits included.
func (c *Client) Create(ctx context.Context, p correlate.Payload) (correlate.Event, correlate.Disposition, error) {
	if err := p.Validate(); err != nil {
		return correlate.Event{}, "", err
	}
	body, err := json.Marshal(p)
	if err != nil {
		return correlate.Event{}, "", fmt.Errorf("correlatehttp: encode payload: %w", err)
	}
	key := ""
	if p.IdempotencyKey == "" {
		key = uuid.NewString()
	}
	b := retry.NewBackoff(c.backoff)
	var last error
	for attempt := 1; ; attempt++ {
		e, d, retryAfter, err := c.send(ctx, body, key)
		if err == nil {
			return e, d, nil
		}
		if retryAfter < 0 || attempt == c.opts.MaxAttempts {
			if retryAfter >= 0 {
				err = fmt.Errorf("correlatehttp: giving up after %d attempts: %w", attempt, err)
			}
			return correlate.Event{}, "", err
		}
		last = err
		if err := retry.Sleep(ctx, b.Next(retryAfter)); err != nil {
			return correlate.Event{}, "", fmt.Errorf("correlatehttp: %w (last attempt: %w)", err, last)
		}
	}
}

// send makes one attempt. retryAfter is negative when the error must not be
// retried, else the least wait the server asked for (0 when it named none).
func (c *Client) send(ctx context.Context, body []byte, key string) (correlate.Event, correlate.Disposition, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return correlate.Event{}, "", -1, fmt.Errorf("correlatehttp: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.opts.Token)
	if key != "" {
		req.Header.Set(IdempotencyKeyHeader, key)
	}
	res, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return correlate.Event{}, "", -1, fmt.Errorf("correlatehttp: %w", err)
		}
		return correlate.Event{}, "", 0, fmt.Errorf("correlatehttp: %w", err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 64<<10+1))
	if err != nil {
		return correlate.Event{}, "", 0, fmt.Errorf("correlatehttp: read answer: %w", err)
	}
	switch s := res.StatusCode; {
	case retry.Status(s):
		return correlate.Event{}, "", retry.After(res.Header, time.Now()), &StatusError{StatusCode: s, Body: b[:min(len(b), 64<<10)]}
	case s != http.StatusOK && s != http.StatusCreated:
		return correlate.Event{}, "", -1, &StatusError{StatusCode: s, Body: b[:min(len(b), 64<<10)]}
	}
	var e correlate.Event
	if err := json.Unmarshal(b, &e); err != nil {
		return correlate.Event{}, "", -1, fmt.Errorf("correlatehttp: decode the created event: %w", err)
	}
	d := correlate.Disposition(res.Header.Get(DispositionHeader))
	switch {
	case d != "":
	case res.StatusCode == http.StatusCreated:
		d = correlate.Created
	default:
		d = correlate.Replayed
	}
	return e, d, 0, nil
}

// feedValues are q's query parameters for GET /api/events/feed.
func feedValues(q correlate.FeedQuery) url.Values {
	v := filterValues(q.Category, q.Action, q.Severity, q.Status, q.Resolved, q.CorrelationKey, q.Search)
	if q.After != "" {
		v.Set("after", q.After)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Wait > 0 {
		// Whole seconds, rounded up: a wait under a second must still
		// long-poll, not read with wait=0 in a loop.
		v.Set("wait", strconv.Itoa(int((q.Wait+time.Second-1)/time.Second)))
	}
	return v
}

func stringsOf[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, s := range vs {
		out[i] = string(s)
	}
	return out
}

// Feed reads one page of the correlated-event feed (GET /api/events/feed)
// with the client's token: the changes after q.After ("" the beginning,
// "now" the head) that q's filters select, waiting up to q.Wait (whole
// seconds, a fraction rounded up; at most 30) for one. Keep q.Wait below the HTTP client's
// timeout. A refusal is a [*StatusError] (a bad cursor is 400 naming
// /after); a transport error is returned as it is. Feed makes one attempt;
// [Client.Follow] retries.
func (c *Client) Feed(ctx context.Context, q correlate.FeedQuery) (correlate.FeedPage, error) {
	p, _, err := c.feed(ctx, q)
	return p, err
}

// feed makes one read; retryAfter is negative when the error must not be
// retried, else the least wait the server asked for.
func (c *Client) feed(ctx context.Context, q correlate.FeedQuery) (correlate.FeedPage, time.Duration, error) {
	var p correlate.FeedPage
	after, err := c.do(ctx, http.MethodGet, c.url+"/feed?"+feedValues(q).Encode(), nil, "GET /api/events/feed", &p)
	return p, after, err
}

// DefaultFollowWait is the wait of each read of [Client.Follow] when its
// query names none.
const DefaultFollowWait = 20 * time.Second

// Follow reads the feed from the cursor q.After ("" the beginning, "now"
// the head) until ctx ends or fn returns an error, calling fn with every item in
// order: each read long-polls (q.Wait, default [DefaultFollowWait]) and
// resumes from the last cursor it got, so no item is given twice or
// skipped. Transport errors and the answers 408, 429 and 5xx are retried
// for ever, with the client's backoff (doubling up to 30 s, jittered;
// Retry-After honoured), reset by each answer read. It returns fn's error,
// ctx's error, or a [*StatusError] for any other answer (a 4xx: a bad
// cursor, a refused credential).
func (c *Client) Follow(ctx context.Context, q correlate.FeedQuery, fn func(correlate.FeedItem) error) error {
	if q.Wait == 0 {
		q.Wait = DefaultFollowWait
	}
	return retry.Follow(ctx, c.backoff, q.After, func(ctx context.Context, after string) ([]correlate.FeedItem, string, time.Duration, error) {
		q.After = after
		p, retryAfter, err := c.feed(ctx, q)
		return p.Items, p.NextCursor, retryAfter, err
	}, fn)
}
