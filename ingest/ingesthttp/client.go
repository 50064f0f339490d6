package ingesthttp

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
	"github.com/klauspost/compress/gzip"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/internal/retry"
	"github.com/tallyhq/tally/route"
)

// MaxBatch is the most items POST /api/v1/events takes in one request
// (canonical-event.md, Delivery); more is answered 413.
const MaxBatch = 1000

// ClientOptions configures a [Client].
type ClientOptions struct {
	// Token is the bearer token of the credential: an ingest one for
	// [Client.Send] and [Client.SendRaw], a reconcile one for
	// [Client.Sync], one with role read or admin for [Client.Feed],
	// [Client.Follow] and [Client.SyncRuns]. Required.
	Token string
	// HTTPClient sends the requests; nil means a client with a 30 s
	// timeout per attempt.
	HTTPClient *http.Client
	// MaxAttempts bounds the attempts of one request of a send, the first
	// included; 0 means 5. It must not be negative. [Client.Follow]
	// retries for ever.
	MaxAttempts int
	// Backoff is the wait before the first retry of a request; it doubles
	// after each, up to 30 s, each wait jittered to between half and all of
	// it. 0 means 200 ms. It must not be negative.
	Backoff time.Duration
	// BatchSize bounds the items of one request, 1 to [MaxBatch]; 0 means
	// MaxBatch.
	BatchSize int
	// MaxBatchBytes bounds the JSON body of one request before compression
	// (the server counts its cap on the decoded bytes); 0 means
	// [route.DefaultMaxBodyBytes], the server's default cap. An item larger
	// than it on its own is still sent alone. It must not be negative.
	MaxBatchBytes int
	// NoGzip sends bodies plain; by default each is compressed with gzip
	// (Content-Encoding: gzip), which the server decodes.
	NoGzip bool
}

// Client sends canonical events to a tally server's POST /api/v1/events
// (canonical-event.md, Delivery), and reads its lifecycle feed
// ([Client.Feed], [Client.Follow]). It is safe for concurrent use.
//
// [Client.Send] validates every item locally first; an invalid item is
// never sent (see [StatusInvalid]). The valid ones go in requests of at most
// BatchSize items and MaxBatchBytes bytes, gzip-compressed. Ingestion is
// idempotent on (event_id, timestamp), so a request is safe to repeat:
// transport errors and the answers 408, 429 and 5xx are retried with
// backoff and jitter (a Retry-After, in seconds or as a date, is honoured,
// at most 30 s), and an item the first attempt stored comes back a
// duplicate. An item the server refused in a 200 answer is never sent again
// (the spec: a client "must not retry a refused item"; the server keeps it
// as a dead letter). A request answered 413 is halved, down to one item
// ([StatusTooLarge]); the requests after it grow back by doubling, staying
// smaller than the smallest one refused until an item is found too large
// alone.
type Client struct {
	url  string // POST /api/v1/events
	base string // the server's base URL, without a trailing slash
	opts ClientOptions
}

// NewClient returns a Client of the server at baseURL (for example
// "http://127.0.0.1:8080"). Errors (joined): an empty baseURL or token, a
// negative MaxAttempts, Backoff or MaxBatchBytes, a BatchSize outside 0 to
// [MaxBatch].
func NewClient(baseURL string, opts ClientOptions) (*Client, error) {
	var errs []error
	if baseURL == "" {
		errs = append(errs, errors.New("ingesthttp: a base URL is required"))
	}
	if opts.Token == "" {
		errs = append(errs, errors.New("ingesthttp: a token is required"))
	}
	errs = append(errs, retry.CheckOptions("ingesthttp", opts.MaxAttempts, opts.Backoff)...)
	if opts.BatchSize < 0 || opts.BatchSize > MaxBatch {
		errs = append(errs, fmt.Errorf("ingesthttp: BatchSize must be 0 to %d, is %d", MaxBatch, opts.BatchSize))
	}
	if opts.MaxBatchBytes < 0 {
		errs = append(errs, fmt.Errorf("ingesthttp: MaxBatchBytes must not be negative, is %d", opts.MaxBatchBytes))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	opts.HTTPClient, opts.MaxAttempts, opts.Backoff = retry.Defaults(opts.HTTPClient, opts.MaxAttempts, opts.Backoff)
	if opts.BatchSize == 0 {
		opts.BatchSize = MaxBatch
	}
	if opts.MaxBatchBytes == 0 {
		opts.MaxBatchBytes = route.DefaultMaxBodyBytes
	}
	base := strings.TrimRight(baseURL, "/")
	return &Client{url: base + "/api/v1/events", base: base, opts: opts}, nil
}

// ItemStatus is what became of one item of a [Client.Send].
type ItemStatus string

// The item statuses. Only StatusRejected is kept by the server as a dead
// letter; an item whose status is StatusInvalid or StatusTooLarge exists
// only in the caller's hands.
const (
	// StatusAccepted: newly stored.
	StatusAccepted ItemStatus = "accepted"
	// StatusDuplicate: its (event_id, timestamp) was stored already, or
	// came earlier in the same request (an earlier attempt that stored it
	// included).
	StatusDuplicate ItemStatus = "duplicate"
	// StatusStored: accepted or duplicate. The server's answer counts a
	// request's accepted and duplicate items only in total; when a request
	// held both, the items that are not duplicates of an earlier item of
	// the same request cannot be told apart.
	StatusStored ItemStatus = "stored"
	// StatusRejected: the server refused it in a 200 answer, with Reason
	// "<kind>: <member>: <rule>: <message>" (ingest.Rejection), and keeps
	// it as a dead letter. Final: it is never sent again.
	StatusRejected ItemStatus = "rejected"
	// StatusInvalid: refused by local validation ([event.Validate],
	// [event.DecodeValidate]), with Reason "schema: …" as the server would
	// give it; never sent, so the server holds no dead letter of it.
	StatusInvalid ItemStatus = "invalid"
	// StatusTooLarge: the server answered 413 to a request of this item
	// alone; nothing of it is stored.
	StatusTooLarge ItemStatus = "too_large"
	// StatusUnsent: its request got no final answer (the error of Send says
	// why); sending it again is safe.
	StatusUnsent ItemStatus = "unsent"
)

// ItemResult is what became of one item.
type ItemResult struct {
	Status ItemStatus `json:"status"`
	// EventID is the item's event_id ("" when it has none that can be
	// read).
	EventID string `json:"event_id,omitempty"`
	// Reason says why the item was refused (StatusRejected, StatusInvalid,
	// StatusTooLarge), else "".
	Reason string `json:"reason,omitempty"`
}

// Result is the outcome of a [Client.Send]: one ItemResult per item given,
// at the item's index.
type Result struct {
	Items []ItemResult `json:"items"`
	// Requests counts the HTTP requests made, retries and halvings
	// included.
	Requests int `json:"requests"`
}

// Count returns how many items have status s.
func (r Result) Count(s ItemStatus) int {
	n := 0
	for _, it := range r.Items {
		if it.Status == s {
			n++
		}
	}
	return n
}

// StatusError is a request the server refused as a whole or kept failing
// (of a send or a read of the feed): its status code and the answer's body
// (RFC 9457 problem details for tally's own answers), at most 64 KiB of it.
type StatusError struct {
	StatusCode int
	Body       []byte
	// request names the request in the message; "" is POST /api/v1/events.
	request string
}

func (e *StatusError) Error() string {
	r := e.request
	if r == "" {
		r = "POST /api/v1/events"
	}
	return fmt.Sprintf("ingesthttp: %s answered %d %s: %s", r, e.StatusCode, http.StatusText(e.StatusCode), bytes.TrimSpace(e.Body))
}

// Send validates each event with [event.Validate] and sends the valid ones
// with their [event.Event.MarshalJSON] encoding; see [Client.SendRaw].
func (c *Client) Send(ctx context.Context, events []event.Event) (Result, error) {
	items := make([]item, len(events))
	for i := range events {
		e := &events[i]
		items[i].id = e.EventID
		if err := event.Validate(e); err != nil {
			items[i].invalid = invalidReason(err)
			continue
		}
		b, err := e.MarshalJSON()
		if err != nil {
			items[i].invalid = invalidReason(err)
			continue
		}
		items[i].raw, items[i].key = b, dedupKey(*e)
	}
	return c.send(ctx, items)
}

// SendRaw validates each item with [event.DecodeValidate] and sends the
// valid ones exactly as given, in requests of at most BatchSize items. It
// returns one [ItemResult] per item, at its index, whatever happened; the
// error, when not nil, is the [*StatusError], transport error or ctx error
// that stopped the sending, and every item not yet answered is
// [StatusUnsent]. A 200 answer that refuses items is no error. ctx bounds
// the whole Send, waits included.
func (c *Client) SendRaw(ctx context.Context, raw [][]byte) (Result, error) {
	items := make([]item, len(raw))
	for i, b := range raw {
		e, err := event.DecodeValidate(b)
		if err != nil {
			items[i].id, items[i].invalid = ingest.BestEffortEventID(b), invalidReason(err)
			continue
		}
		items[i].id, items[i].raw, items[i].key = e.EventID, b, dedupKey(e)
	}
	return c.send(ctx, items)
}

// item is one item of a Send, prepared.
type item struct {
	id      string
	raw     []byte // nil when invalid
	key     string // event_id and timestamp: the server's duplicate key
	invalid string // the local refusal's reason
}

// invalidReason writes a local refusal as the server writes its own,
// "schema: <member>: <rule>: <message>", one per problem joined by "; "
// (docs/decisions.md, Refusal reasons).
func invalidReason(err error) string {
	var ve *event.ValidationError
	if errors.As(err, &ve) {
		return string(ingest.KindSchema) + ": " + ve.Error()
	}
	return string(ingest.KindSchema) + ": : " + event.RuleSyntax + ": " + err.Error()
}

// dedupKey is the server's duplicate key, (event_id, timestamp), with the
// timestamp normalized as Decode does.
func dedupKey(e event.Event) string {
	return e.EventID + "\x00" + event.Normalize(e.Timestamp).Format(time.RFC3339Nano)
}

func (c *Client) send(ctx context.Context, items []item) (Result, error) {
	res := Result{Items: make([]ItemResult, len(items))}
	var pending []int // indices of the valid items, in order
	for i, it := range items {
		res.Items[i].EventID = it.id
		if it.raw == nil {
			res.Items[i].Status, res.Items[i].Reason = StatusInvalid, it.invalid
			continue
		}
		res.Items[i].Status = StatusUnsent
		pending = append(pending, i)
	}
	// limit bounds the next request's items. A 413 halves it; each request
	// answered 200 doubles it back, up to below the smallest request
	// refused (ceiling), as Tally's collector sender does. An item refused
	// alone lifts the ceiling: it may have been why the larger requests
	// were refused.
	limit, ceiling := c.opts.BatchSize, c.opts.BatchSize
	for len(pending) > 0 {
		n, size := 0, 2
		for n < len(pending) && n < limit && (n == 0 || size+len(items[pending[n]].raw)+1 <= c.opts.MaxBatchBytes) {
			size += len(items[pending[n]].raw) + 1
			n++
		}
		batch := pending[:n]
		body := make([]byte, 0, size)
		body = append(body, '[')
		for j, i := range batch {
			if j > 0 {
				body = append(body, ',')
			}
			body = append(body, items[i].raw...)
		}
		body = append(body, ']')
		ans, err := c.post(ctx, body, &res.Requests)
		var se *StatusError
		if errors.As(err, &se) && se.StatusCode == http.StatusRequestEntityTooLarge {
			if n == 1 {
				res.Items[batch[0]].Status = StatusTooLarge
				res.Items[batch[0]].Reason = fmt.Sprintf("too_large: : %s: the item alone, %d bytes, is over the server's body cap (answered 413)",
					event.RuleMaxLength, len(items[batch[0]].raw))
				pending, ceiling = pending[1:], c.opts.BatchSize
				continue
			}
			limit, ceiling = n/2, n-1
			continue
		}
		if err != nil {
			return res, err
		}
		if err := settle(res.Items, items, batch, ans); err != nil {
			return res, err
		}
		pending = pending[n:]
		limit = min(ceiling, 2*limit)
	}
	return res, nil
}

// settle maps the answer to one request back to the caller's indices
// (the caller's index of the request's item j is batch at j).
func settle(out []ItemResult, items []item, batch []int, ans ingest.Result) error {
	n := len(batch)
	rejected := make(map[int]bool, len(ans.Rejected))
	for _, r := range ans.Rejected {
		if r.Index < 0 || r.Index >= n || rejected[r.Index] {
			return fmt.Errorf("ingesthttp: the answer refuses item %d of a request of %d items", r.Index, n)
		}
		rejected[r.Index] = true
	}
	if ans.Accepted < 0 || ans.Duplicates < 0 || ans.Accepted+ans.Duplicates+len(ans.Rejected) != n {
		return fmt.Errorf("ingesthttp: the answer accounts for %d accepted, %d duplicates and %d rejected of a request of %d items",
			ans.Accepted, ans.Duplicates, len(ans.Rejected), n)
	}
	for _, r := range ans.Rejected {
		out[batch[r.Index]] = ItemResult{Status: StatusRejected, EventID: out[batch[r.Index]].EventID, Reason: r.Reason}
	}
	// An item repeating an earlier stored item of the request is a
	// duplicate; the others are all accepted, all duplicates, or, when
	// the counts leave both possible, stored.
	seen := make(map[string]bool, n)
	repeats := make([]bool, n)
	nRepeats := 0
	for j, i := range batch {
		if rejected[j] {
			continue
		}
		if seen[items[i].key] {
			repeats[j] = true
			nRepeats++
		}
		seen[items[i].key] = true
	}
	rest := StatusStored
	switch {
	case nRepeats > ans.Duplicates: // the server keyed otherwise: claim nothing
		clear(repeats)
	case ans.Duplicates == nRepeats:
		rest = StatusAccepted
	case ans.Accepted == 0:
		rest = StatusDuplicate
	}
	for j, i := range batch {
		switch {
		case rejected[j]:
		case repeats[j]:
			out[i].Status = StatusDuplicate
		default:
			out[i].Status = rest
		}
	}
	return nil
}

// post sends one request body, retrying as the Client documents, and
// returns the decoded 200 answer. requests counts the attempts.
func (c *Client) post(ctx context.Context, body []byte, requests *int) (ingest.Result, error) {
	encoding := ""
	if !c.opts.NoGzip {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(body); err != nil {
			return ingest.Result{}, fmt.Errorf("ingesthttp: gzip: %w", err)
		}
		if err := zw.Close(); err != nil {
			return ingest.Result{}, fmt.Errorf("ingesthttp: gzip: %w", err)
		}
		body, encoding = buf.Bytes(), "gzip"
	}
	b := retry.NewBackoff(c.opts.Backoff)
	var last error
	for attempt := 1; ; attempt++ {
		*requests++
		ans, retryAfter, err := c.attempt(ctx, body, encoding)
		if err == nil {
			return ans, nil
		}
		if retryAfter < 0 || attempt == c.opts.MaxAttempts {
			if retryAfter >= 0 {
				err = fmt.Errorf("ingesthttp: giving up after %d attempts: %w", attempt, err)
			}
			return ingest.Result{}, err
		}
		last = err
		if err := retry.Sleep(ctx, b.Next(retryAfter)); err != nil {
			return ingest.Result{}, fmt.Errorf("ingesthttp: %w (last attempt: %w)", err, last)
		}
	}
}

// maxAnswer bounds a 200 answer read: 1000 rejections of a reason of at
// most ingest.MaxReasonBytes and a long event_id fit.
const maxAnswer = 16 << 20

// attempt makes one request. retryAfter is negative when the error must not
// be retried, else the least wait the server asked for (0 when it named
// none).
func (c *Client) attempt(ctx context.Context, body []byte, encoding string) (ingest.Result, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return ingest.Result{}, -1, fmt.Errorf("ingesthttp: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	req.Header.Set("Authorization", "Bearer "+c.opts.Token)
	res, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ingest.Result{}, -1, fmt.Errorf("ingesthttp: %w", err)
		}
		return ingest.Result{}, 0, fmt.Errorf("ingesthttp: %w", err)
	}
	defer res.Body.Close()
	limit := int64(64 << 10)
	if res.StatusCode == http.StatusOK {
		limit = maxAnswer
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, limit+1))
	if err != nil {
		// The request may have been stored; a retry is answered duplicate.
		return ingest.Result{}, 0, fmt.Errorf("ingesthttp: read answer: %w", err)
	}
	switch s := res.StatusCode; {
	case retry.Status(s):
		return ingest.Result{}, retry.After(res.Header, time.Now()), &StatusError{StatusCode: s, Body: b[:min(len(b), 64<<10)]}
	case s != http.StatusOK:
		return ingest.Result{}, -1, &StatusError{StatusCode: s, Body: b[:min(len(b), 64<<10)]}
	case int64(len(b)) > limit:
		return ingest.Result{}, -1, fmt.Errorf("ingesthttp: the answer is over %d bytes", limit)
	}
	var ans ingest.Result
	if err := json.Unmarshal(b, &ans); err != nil {
		return ingest.Result{}, -1, fmt.Errorf("ingesthttp: decode the answer: %w", err)
	}
	return ans, 0, nil
}

// feedValues are q's query parameters for GET /api/v1/events/feed.
func feedValues(q ingest.FeedQuery) url.Values {
	v := url.Values{}
	set := func(name, s string) {
		if s != "" {
			v.Set(name, s)
		}
	}
	set("after", q.After)
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Wait > 0 {
		v.Set("wait", strconv.Itoa(int((q.Wait+time.Second-1)/time.Second)))
	}
	set("cloud", q.Cloud)
	set("platform", q.Platform)
	set("resource_type", q.ResourceType)
	set("project_id", q.ProjectID)
	set("event_type", q.EventType)
	return v
}

// Feed reads one page of the lifecycle feed (GET /api/v1/events/feed;
// docs/http-api.md, Change feeds) with the client's token: the events after
// q.After ("" the beginning, "now" the head) that q's filters select,
// waiting up to q.Wait (whole seconds, at most 30) for one. Keep q.Wait
// below the HTTP client's timeout. A refusal is a [*StatusError] (a bad
// cursor is 400 naming /after); a transport error is returned as it is.
// Feed makes one attempt; [Client.Follow] retries.
func (c *Client) Feed(ctx context.Context, q ingest.FeedQuery) (ingest.FeedPage, error) {
	p, _, err := c.feed(ctx, q)
	return p, err
}

// feed makes one read; retryAfter is negative when the error must not be
// retried, else the least wait the server asked for.
func (c *Client) feed(ctx context.Context, q ingest.FeedQuery) (ingest.FeedPage, time.Duration, error) {
	var p ingest.FeedPage
	after, err := c.do(ctx, http.MethodGet, c.url+"/feed?"+feedValues(q).Encode(), nil, "GET /api/v1/events/feed", &p)
	return p, after, err
}

// DefaultFollowWait is the wait of each read of [Client.Follow] when its
// query names none: below the 30 s timeout of the default HTTP client, so
// that an idle long poll is answered before the client gives up on it.
const DefaultFollowWait = 20 * time.Second

// Follow reads the lifecycle feed from q.After ("" the beginning, "now"
// the head) until ctx ends or fn returns an error, calling fn with every
// item in order: each read long-polls (q.Wait, default
// [DefaultFollowWait]) and resumes from the last cursor it got (the last
// item's Position, then the page's NextCursor), so no item is given twice
// or skipped. Transport errors and the answers 408, 429 and 5xx are
// retried for ever, with the client's backoff (doubling up to 30 s,
// jittered; Retry-After honoured), reset by each answer read. It returns
// fn's error, ctx's error, or a [*StatusError] for any other answer (a
// 4xx: a bad cursor, a refused credential).
func (c *Client) Follow(ctx context.Context, q ingest.FeedQuery, fn func(ingest.FeedItem) error) error {
	if q.Wait == 0 {
		q.Wait = DefaultFollowWait
	}
	return retry.Follow(ctx, c.opts.Backoff, q.After, func(ctx context.Context, after string) ([]ingest.FeedItem, string, time.Duration, error) {
		q.After = after
		p, retryAfter, err := c.feed(ctx, q)
		return p.Items, p.NextCursor, retryAfter, err
	}, fn)
}
