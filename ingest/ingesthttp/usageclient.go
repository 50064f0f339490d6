package ingesthttp

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/ingest/usage"
)

// UsageValues are q's query parameters for GET /api/v1/usage ([UsageQuery]
// reads them back): zero and empty members are left out.
func UsageValues(q usage.Query) url.Values {
	v := url.Values{}
	set := func(name, s string) {
		if s != "" {
			v.Set(name, s)
		}
	}
	if !q.From.IsZero() {
		v.Set("from", q.From.UTC().Format(time.RFC3339Nano))
	}
	if !q.To.IsZero() {
		v.Set("to", q.To.UTC().Format(time.RFC3339Nano))
	}
	set("window", string(q.Window))
	set("group_by", strings.Join(q.GroupBy, ","))
	set("quantity", q.Quantity)
	set("unit", string(q.Unit))
	set("cloud", q.Cloud)
	set("platform", q.Platform)
	set("project_id", q.ProjectID)
	set("resource_type", q.ResourceType)
	set("state", q.State)
	set("as_of", q.AsOf)
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	set("cursor", q.Cursor)
	return v
}

// Usage reads one page of usage (GET /api/v1/usage; docs/usage.md) with
// the client's token. A refusal is a [*StatusError] (400 naming every bad
// parameter, 422 result_too_large); a transport error is returned as it
// is. Usage makes one attempt.
func (c *Client) Usage(ctx context.Context, q usage.Query) (usage.Answer, error) {
	var a usage.Answer
	err := c.get(ctx, "/api/v1/usage", UsageValues(q), &a)
	return a, err
}

// Lifecycle reads one resource's timeline (GET
// /api/v1/resources/{cloud}/{resource_type}/{resource_id}/lifecycle) with
// the client's token; an unknown resource is a [*StatusError] of 404.
func (c *Client) Lifecycle(ctx context.Context, k projection.Key) (usage.Lifecycle, error) {
	var l usage.Lifecycle
	err := c.get(ctx, resourcePath(k)+"/lifecycle", nil, &l)
	return l, err
}

// ProjectSummary reads one project's activity over [q.From, q.To) (GET
// /api/v1/projects/{cloud}/{project_id}/summary) with the client's token.
func (c *Client) ProjectSummary(ctx context.Context, q usage.SummaryQuery) (usage.ProjectSummary, error) {
	v := url.Values{}
	v.Set("from", q.From.UTC().Format(time.RFC3339Nano))
	v.Set("to", q.To.UTC().Format(time.RFC3339Nano))
	var s usage.ProjectSummary
	err := c.get(ctx, "/api/v1/projects/"+url.PathEscape(q.Cloud)+"/"+url.PathEscape(q.ProjectID)+"/summary", v, &s)
	return s, err
}
