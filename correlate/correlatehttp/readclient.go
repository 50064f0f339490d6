package correlatehttp

import (
	"context"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/internal/retry"
)

// The reads and changes of the events API besides createEvent: one attempt
// each, with the client's token (an events credential reads and changes
// its own (organization, user) events; a read credential reads, never
// changes, its whole organization's). A refusal is a [*StatusError] (400
// naming every bad parameter, 403 for a credential without the role, 404
// for an event out of scope); a transport error is returned as it is.

// queryValues are q's query parameters for getEvents (and, but sort,
// getEventSummaryByUser): zero and empty members are left out.
func queryValues(q correlate.Query) url.Values {
	v := filterValues(q.Category, q.Action, q.Severity, q.Status, q.Resolved, q.CorrelationKey, q.Search)
	if q.Page > 0 {
		v.Set("page", strconv.Itoa(q.Page))
	}
	if q.PageSize > 0 {
		v.Set("pageSize", strconv.Itoa(q.PageSize))
	}
	if q.Sort != "" {
		v.Set("sort", string(q.Sort))
	}
	if q.Order != "" {
		v.Set("order", string(q.Order))
	}
	return v
}

// filterValues are getEvents' filters as query parameters, as both the
// listings and the feed take them.
func filterValues(category, action []string, severity []correlate.Severity, status []correlate.Status,
	resolved *bool, correlationKey, search string) url.Values {
	v := url.Values{}
	list := func(name string, vs []string) {
		for _, s := range vs {
			v.Add(name, s)
		}
	}
	list("category", category)
	list("action", action)
	list("severity", stringsOf(severity))
	list("status", stringsOf(status))
	if resolved != nil {
		v.Set("resolved", strconv.FormatBool(*resolved))
	}
	if correlationKey != "" {
		v.Set("correlationKey", correlationKey)
	}
	if search != "" {
		v.Set("search", search)
	}
	return v
}

// List reads one page of getEvents (GET /api/events/list): q's filters,
// sort and order, page q.Page of q.PageSize (0: the server's 25). A page
// holds at most 8 MiB of events, so it may hold fewer than PageSize while
// TotalCount says more follow; [Client.AllEvents] reads on past such a
// page.
func (c *Client) List(ctx context.Context, q correlate.Query) (correlate.Page, error) {
	var p correlate.Page
	err := c.get(ctx, "/list", queryValues(q), &p)
	return p, err
}

// AllEvents reads every event q selects from page q.Page on, in q's sort
// and order, page after page of q.PageSize: each page starts where the
// last one ended (a page cut short by bytes is followed by a page size that
// divides the events read so far), so over a listing that does not change
// meanwhile no event is skipped or given twice. The listing is by offset:
// an event created or deleted before the reader's place while it reads
// shifts the rest by one. Read with [correlate.OrderAsc] to see new
// events at the end, and follow [Client.Follow] to learn of every change.
// It stops at the first error, yielded with a zero event.
func (c *Client) AllEvents(ctx context.Context, q correlate.Query) iter.Seq2[correlate.Event, error] {
	return func(yield func(correlate.Event, error) bool) {
		size := q.PageSize
		if size == 0 {
			size = correlate.DefaultPageSize
		}
		offset := int64(q.Page) * int64(size)
		for {
			s := size
			for offset%int64(s) != 0 {
				s--
			}
			page := q
			page.Page, page.PageSize = int(offset/int64(s)), s
			p, err := c.List(ctx, page)
			if err != nil {
				yield(correlate.Event{}, err)
				return
			}
			for _, e := range p.Data {
				if !yield(e, nil) {
					return
				}
			}
			offset += int64(len(p.Data))
			if len(p.Data) == 0 || offset >= p.TotalCount {
				return
			}
		}
	}
}

// Summary reads one page of getEventSummaryByUser (GET
// /api/events/summary): one row per user whose events q selects (q.Sort
// must be empty), by user id in q.Order (default ascending).
func (c *Client) Summary(ctx context.Context, q correlate.Query) (correlate.SummaryPage, error) {
	var p correlate.SummaryPage
	err := c.get(ctx, "/summary", queryValues(q), &p)
	return p, err
}

// Aggregate reads getEventsAggregate (GET /api/events): the events counted
// by category; with cumulative every event, else only the unread ones.
func (c *Client) Aggregate(ctx context.Context, cumulative bool) (correlate.Aggregate, error) {
	v := url.Values{}
	v.Set("cumulative", strconv.FormatBool(cumulative))
	var a correlate.Aggregate
	err := c.get(ctx, "", v, &a)
	return a, err
}

// Types reads one page of getEventTypes (GET /api/events/types): the
// distinct (category, action) pairs, page of pageSize (0: the server's
// 100).
func (c *Client) Types(ctx context.Context, page, pageSize int) ([]correlate.EventType, error) {
	v := url.Values{}
	if page > 0 {
		v.Set("page", strconv.Itoa(page))
	}
	if pageSize > 0 {
		v.Set("pageSize", strconv.Itoa(pageSize))
	}
	var ts []correlate.EventType
	err := c.get(ctx, "/types", v, &ts)
	return ts, err
}

// SetStatus marks the event with id read or unread (PUT
// /api/events/{id}/status).
func (c *Client) SetStatus(ctx context.Context, id string, status correlate.Status) error {
	body, err := json.Marshal(map[string]correlate.Status{"status": status})
	if err != nil {
		return fmt.Errorf("correlatehttp: %w", err)
	}
	_, err = c.do(ctx, http.MethodPut, c.url+"/"+url.PathEscape(id)+"/status", body, "PUT /api/events/{id}/status", &struct{}{})
	return err
}

// SetStatuses marks the events of ids (at most [correlate.MaxBulkIDs])
// read or unread (PUT /api/events/status) and returns the ids it changed,
// in the order given: an id of no event of the caller is left out.
func (c *Client) SetStatuses(ctx context.Context, ids []string, status correlate.Status) ([]string, error) {
	body, err := json.Marshal(struct {
		IDs    []string         `json:"ids"`
		Status correlate.Status `json:"status"`
	}{ids, status})
	if err != nil {
		return nil, fmt.Errorf("correlatehttp: %w", err)
	}
	var out struct {
		Updated []string `json:"updated"`
	}
	_, err = c.do(ctx, http.MethodPut, c.url+"/status", body, "PUT /api/events/status", &out)
	return out.Updated, err
}

// Delete soft-deletes the event with id (DELETE /api/events/{id}).
func (c *Client) Delete(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, c.url+"/"+url.PathEscape(id), nil, "DELETE /api/events/{id}", nil)
	return err
}

// DeleteMany soft-deletes the events of ids (at most
// [correlate.MaxBulkIDs]; POST /api/events/delete) and returns the ids it
// deleted, in the order given.
func (c *Client) DeleteMany(ctx context.Context, ids []string) ([]string, error) {
	body, err := json.Marshal(struct {
		IDs []string `json:"ids"`
	}{ids})
	if err != nil {
		return nil, fmt.Errorf("correlatehttp: %w", err)
	}
	var out struct {
		Deleted []string `json:"deleted"`
	}
	_, err = c.do(ctx, http.MethodPost, c.url+"/delete", body, "POST /api/events/delete", &out)
	return out.Deleted, err
}

// get makes one GET of the events API's path (after /api/events) with the
// query v and decodes the answer into out.
func (c *Client) get(ctx context.Context, path string, v url.Values, out any) error {
	target := c.url + path
	if len(v) > 0 {
		target += "?" + v.Encode()
	}
	_, err := c.do(ctx, http.MethodGet, target, nil, "GET /api/events"+path, out)
	return err
}

// do makes one request and decodes a 200 answer into out (nil: a 204 is
// expected, its body ignored). retryAfter is negative when the error must
// not be retried, else the least wait the server asked for.
func (c *Client) do(ctx context.Context, method, target string, body []byte, request string, out any) (time.Duration, error) {
	want, read := http.StatusOK, func(r io.Reader) error { return json.UnmarshalRead(io.LimitReader(r, maxAnswer), out) }
	if out == nil {
		want, read = http.StatusNoContent, func(io.Reader) error { return nil }
	}
	status, answer, after, err := retry.Exchange(ctx, c.opts.HTTPClient, c.opts.Token, method, target, body, want, read)
	switch {
	case err != nil && status == want:
		return 0, fmt.Errorf("correlatehttp: read the answer of %s: %w", request, err)
	case err != nil:
		return after, fmt.Errorf("correlatehttp: %w", err)
	case status != want:
		return after, &StatusError{StatusCode: status, Body: answer, request: request}
	}
	return 0, nil
}

// maxAnswer bounds an answer read: a page of getEvents holds at most
// correlate.MaxPageBytes of events, plus its members.
const maxAnswer = correlate.MaxPageBytes + 1<<20
