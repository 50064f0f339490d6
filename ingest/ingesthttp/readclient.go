package ingesthttp

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

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/internal/retry"
)

// The reads of the Reporting API routes: one attempt each, with the
// client's token (role read or admin; admin for the dead letters and the
// audit log). A refusal is a [*StatusError] (400 naming every bad
// parameter, 403 for a credential without the role, 404 for an unknown
// resource); a transport error is returned as it is.

// eventValues are f's query parameters for GET /api/v1/events: zero and
// empty members are left out.
func eventValues(f ingest.EventFilter) url.Values {
	v := url.Values{}
	set := func(name, s string) {
		if s != "" {
			v.Set(name, s)
		}
	}
	set("cloud", f.Cloud)
	set("platform", f.Platform)
	set("project_id", f.ProjectID)
	set("resource_type", f.ResourceType)
	set("resource_id", f.ResourceID)
	set("event_type", f.EventType)
	set("source", string(f.Source))
	setPage(v, ingest.Page{From: f.From, To: f.To, Limit: f.Limit, Cursor: f.Cursor})
	return v
}

// setPage sets the window and paging parameters of p on v.
func setPage(v url.Values, p ingest.Page) {
	if !p.From.IsZero() {
		v.Set("from", p.From.UTC().Format(time.RFC3339Nano))
	}
	if !p.To.IsZero() {
		v.Set("to", p.To.UTC().Format(time.RFC3339Nano))
	}
	if p.Limit > 0 {
		v.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Cursor != "" {
		v.Set("cursor", p.Cursor)
	}
}

// Events reads one page of stored events (GET /api/v1/events): those f's
// filters select, ordered by (timestamp, event_id), f.Limit of them (0:
// the server's 100) from f.Cursor. Page on with NextCursor, or use
// [Client.AllEvents].
func (c *Client) Events(ctx context.Context, f ingest.EventFilter) (ingest.EventPage, error) {
	var p ingest.EventPage
	err := c.get(ctx, "/api/v1/events", eventValues(f), &p)
	return p, err
}

// AllEvents reads every event f selects from f.Cursor on, page after page
// of f.Limit, following each page's next_cursor: the listing's order is
// (timestamp, event_id) and a cursor continues strictly after the last
// item it was given, so no event is skipped or given twice. It stops at
// the first error, yielded with a zero event.
func (c *Client) AllEvents(ctx context.Context, f ingest.EventFilter) iter.Seq2[ingest.StoredEvent, error] {
	return pages(f.Cursor, func(cursor string) ([]ingest.StoredEvent, *string, error) {
		f.Cursor = cursor
		p, err := c.Events(ctx, f)
		return p.Items, p.NextCursor, err
	})
}

// Resources reads one page of current resources (GET /api/v1/resources):
// f's filters (Status "" is the server's default, active), f.Limit of them
// from f.Cursor, ordered by (cloud, resource_type, resource_id).
func (c *Client) Resources(ctx context.Context, f projection.Filter) (projection.Page, error) {
	v := url.Values{}
	set := func(name, s string) {
		if s != "" {
			v.Set(name, s)
		}
	}
	set("cloud", f.Cloud)
	set("platform", f.Platform)
	set("resource_type", f.ResourceType)
	set("project_id", f.ProjectID)
	set("state", f.State)
	set("status", string(f.Status))
	if !f.AliveAt.IsZero() {
		v.Set("alive_at", f.AliveAt.UTC().Format(time.RFC3339Nano))
	}
	setPage(v, ingest.Page{Limit: f.Limit, Cursor: f.Cursor})
	var p projection.Page
	err := c.get(ctx, "/api/v1/resources", v, &p)
	return p, err
}

// AllResources reads every resource f selects, page after page, as
// [Client.AllEvents] reads events.
func (c *Client) AllResources(ctx context.Context, f projection.Filter) iter.Seq2[projection.Resource, error] {
	return pages(f.Cursor, func(cursor string) ([]projection.Resource, *string, error) {
		f.Cursor = cursor
		p, err := c.Resources(ctx, f)
		return p.Items, p.NextCursor, err
	})
}

// resourcePath is the path of one resource's read.
func resourcePath(k projection.Key) string {
	return "/api/v1/resources/" + url.PathEscape(k.Cloud) + "/" + url.PathEscape(k.ResourceType) + "/" + url.PathEscape(k.ResourceID)
}

// Resource reads one resource with the start of its history (GET
// /api/v1/resources/{cloud}/{resource_type}/{resource_id}); when
// EventsNextCursor is set, [Client.AllEvents] with it (and the resource's
// cloud, resource_type and resource_id) reads the rest.
func (c *Client) Resource(ctx context.Context, k projection.Key) (projection.Detail, error) {
	var d projection.Detail
	err := c.get(ctx, resourcePath(k), nil, &d)
	return d, err
}

// RejectedEvents reads one page of dead letters (GET
// /api/v1/rejected-events; role admin): received in [p.From, p.To), p.Limit
// of them from p.Cursor, oldest first.
func (c *Client) RejectedEvents(ctx context.Context, p ingest.Page) (RejectedPage, error) {
	v := url.Values{}
	setPage(v, p)
	var out RejectedPage
	err := c.get(ctx, "/api/v1/rejected-events", v, &out)
	return out, err
}

// AllRejectedEvents reads every dead letter of [p.From, p.To) from
// p.Cursor on, page after page, as [Client.AllEvents] reads events.
func (c *Client) AllRejectedEvents(ctx context.Context, p ingest.Page) iter.Seq2[RejectedEvent, error] {
	return pages(p.Cursor, func(cursor string) ([]RejectedEvent, *string, error) {
		p.Cursor = cursor
		page, err := c.RejectedEvents(ctx, p)
		return page.Items, page.NextCursor, err
	})
}

// Audit reads one page of the audit log (GET /api/v1/audit; role admin):
// the rows of action ("" every action) written in [p.From, p.To), p.Limit
// of them from p.Cursor, oldest first.
func (c *Client) Audit(ctx context.Context, action string, p ingest.Page) (ingest.AuditPage, error) {
	v := url.Values{}
	if action != "" {
		v.Set("action", action)
	}
	setPage(v, p)
	var out ingest.AuditPage
	err := c.get(ctx, "/api/v1/audit", v, &out)
	return out, err
}

// AllAudit reads every audit row of action in [p.From, p.To) from
// p.Cursor on, page after page, as [Client.AllEvents] reads events.
func (c *Client) AllAudit(ctx context.Context, action string, p ingest.Page) iter.Seq2[ingest.AuditEntry, error] {
	return pages(p.Cursor, func(cursor string) ([]ingest.AuditEntry, *string, error) {
		p.Cursor = cursor
		page, err := c.Audit(ctx, action, p)
		return page.Items, page.NextCursor, err
	})
}

// pages yields every item of a cursor-paged listing from cursor on: read
// is called with "" (the first page) or the last page's next_cursor until
// a page has none. An error is yielded once, with a zero item, and ends
// the listing; so does a consumer that stops.
func pages[T any](cursor string, read func(cursor string) ([]T, *string, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for {
			items, next, err := read(cursor)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
			if next == nil || *next == "" {
				return
			}
			cursor = *next
		}
	}
}

// get makes one GET of path with the query v and decodes the answer into
// out; errors name the route as "GET <path>".
func (c *Client) get(ctx context.Context, path string, v url.Values, out any) error {
	target := c.base + path
	if len(v) > 0 {
		target += "?" + v.Encode()
	}
	_, err := c.do(ctx, http.MethodGet, target, nil, "GET "+path, out)
	return err
}

// do makes one JSON request and decodes a 200 answer into out.
// retryAfter is negative when the error must not be retried, else the
// least wait the server asked for.
func (c *Client) do(ctx context.Context, method, target string, body []byte, request string, out any) (time.Duration, error) {
	status, answer, after, err := retry.Exchange(ctx, c.opts.HTTPClient, c.opts.Token, method, target, body, http.StatusOK,
		func(r io.Reader) error { return json.UnmarshalRead(io.LimitReader(r, maxAnswer), out) })
	switch {
	case err != nil && status == http.StatusOK:
		// A write that answered 200 is committed (a sync run): never
		// retried. A read may be asked again.
		after := time.Duration(0)
		if method != http.MethodGet {
			after = -1
		}
		return after, fmt.Errorf("ingesthttp: read the 200 answer of %s: %w", request, err)
	case err != nil:
		return after, fmt.Errorf("ingesthttp: %w", err)
	case status != http.StatusOK:
		return after, &StatusError{StatusCode: status, Body: answer, request: request}
	}
	return 0, nil
}
