package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/internal/page"
	"github.com/tallyhq/tally/store"
)

// projectionData holds the projection of current resources. Guarded by
// state.mu.
type projectionData struct {
	rows map[ingest.ResourceKey]ingest.Resource
}

func (d *projectionData) init() {
	d.rows = make(map[ingest.ResourceKey]ingest.Resource)
}

func (d *projectionData) current(k ingest.ResourceKey) (ingest.Resource, bool) {
	r, ok := d.rows[k]
	return r, ok
}

// install writes rows computed by ingest.FoldBatch; the caller calls it only
// once the rest of its unit of work has succeeded.
func (d *projectionData) install(rows map[ingest.ResourceKey]ingest.Resource) {
	for k, r := range rows {
		d.rows[k] = r
	}
}

// Resources lists projection rows (ingest.ProjectionStore).
func (s *Ingest) Resources(ctx context.Context, q ingest.ResourceQuery) ([]ingest.Resource, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ingest.Resource
	for _, r := range s.projection.rows {
		if matches(&r, &q) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b ingest.Resource) int { return a.ResourceKey.Compare(b.ResourceKey) })
	if limit := max(q.Limit, 1); len(out) > limit {
		out = out[:limit]
	}
	budget := page.NewByteBudget(q.MaxBytes)
	for i, r := range out {
		if budget.Add(ingest.ResourceBytes(r)) {
			return out[:i+1], nil
		}
	}
	return out, nil
}

// CountResources counts projection rows by (platform, cloud,
// resource_type, state), in that order (ingest.ProjectionStore).
func (s *Ingest) CountResources(ctx context.Context) ([]ingest.ResourceCount, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type group struct{ platform, cloud, resourceType, state string }
	s.mu.Lock()
	counts := map[group]int64{}
	for _, r := range s.projection.rows {
		counts[group{r.Platform, r.Cloud, r.ResourceType, r.State}]++
	}
	s.mu.Unlock()
	out := make([]ingest.ResourceCount, 0, len(counts))
	for g, n := range counts {
		out = append(out, ingest.ResourceCount{Platform: g.platform, Cloud: g.cloud, ResourceType: g.resourceType, State: g.state, Count: n})
	}
	slices.SortFunc(out, func(a, b ingest.ResourceCount) int {
		return cmp.Or(strings.Compare(a.Platform, b.Platform), strings.Compare(a.Cloud, b.Cloud),
			strings.Compare(a.ResourceType, b.ResourceType), strings.Compare(a.State, b.State))
	})
	return out, nil
}

func matches(r *ingest.Resource, q *ingest.ResourceQuery) bool {
	switch {
	case q.Cloud != "" && r.Cloud != q.Cloud,
		q.Platform != "" && r.Platform != q.Platform,
		q.ResourceType != "" && r.ResourceType != q.ResourceType,
		q.ProjectID != "" && r.ProjectID != q.ProjectID,
		q.State != "" && r.State != q.State,
		!q.Status.Match(r.State),
		q.After != nil && r.ResourceKey.Compare(*q.After) <= 0:
		return false
	}
	if !q.AliveAt.IsZero() {
		start := r.FirstEventAt
		if r.CreatedAt != nil {
			start = *r.CreatedAt
		}
		if start.After(q.AliveAt) || (r.DeletedAt != nil && !r.DeletedAt.After(q.AliveAt)) {
			return false
		}
	}
	return true
}

// Resource returns one projection row (ingest.ProjectionStore); the error
// wraps store.ErrNotFound when there is none.
func (s *Ingest) Resource(ctx context.Context, k ingest.ResourceKey) (ingest.Resource, error) {
	if err := ctx.Err(); err != nil {
		return ingest.Resource{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.projection.rows[k]
	if !ok {
		return ingest.Resource{}, fmt.Errorf("memstore: resource %s/%s/%s: %w", k.Cloud, k.ResourceType, k.ResourceID, store.ErrNotFound)
	}
	return r, nil
}

// History returns the stored events of one resource in fold order
// (ingest.ProjectionStore).
func (s *Ingest) History(ctx context.Context, k ingest.ResourceKey) ([]event.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	h := s.history(k)
	s.mu.Unlock()
	for i := range h {
		h[i] = cloneEvent(h[i])
	}
	slices.SortFunc(h, func(a, b event.Event) int { return ingest.Compare(&a, &b) })
	return h, nil
}

// RebuildResources recomputes projection rows from the stored events
// (ingest.ProjectionStore), q.BatchSize resources per locked step, so
// ingestion interleaves with a long rebuild.
func (s *Ingest) RebuildResources(ctx context.Context, q ingest.RebuildQuery, progress func(done int)) (int, error) {
	size := q.BatchSize
	if size <= 0 {
		size = 500
	}
	s.mu.Lock()
	var keys []ingest.ResourceKey
	for k := range s.ingest.byResource {
		if (q.Cloud == "" || k.Cloud == q.Cloud) && (q.ResourceType == "" || k.ResourceType == q.ResourceType) {
			keys = append(keys, k)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(keys, ingest.ResourceKey.Compare)
	done := 0
	for len(keys) > 0 {
		if err := ctx.Err(); err != nil {
			return done, err
		}
		n := min(size, len(keys))
		s.mu.Lock()
		for _, k := range keys[:n] {
			s.projection.rows[k] = ingest.Fold(s.history(k))
		}
		s.mu.Unlock()
		done += n
		keys = keys[n:]
		if progress != nil {
			progress(done)
		}
	}
	return done, nil
}

var _ ingest.ProjectionStore = (*Ingest)(nil)
