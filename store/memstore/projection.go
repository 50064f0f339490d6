package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/internal/page"
	"github.com/tallyhq/tally/store"
)

// projectionData holds the projection of current resources. Guarded by
// state.mu.
type projectionData struct {
	rows map[projection.Key]projection.Resource
}

func (d *projectionData) init() {
	d.rows = make(map[projection.Key]projection.Resource)
}

func (d *projectionData) current(k projection.Key) (projection.Resource, bool) {
	r, ok := d.rows[k]
	return r, ok
}

// install writes rows computed by projection.FoldBatch; the caller calls it only
// once the rest of its unit of work has succeeded.
func (d *projectionData) install(rows map[projection.Key]projection.Resource) {
	for k, r := range rows {
		d.rows[k] = r
	}
}

// List implements [projection.Store].
func (s *Projection) List(ctx context.Context, q projection.Query) ([]projection.Resource, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []projection.Resource
	for _, r := range s.projection.rows {
		if matches(&r, &q) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b projection.Resource) int { return a.Key.Compare(b.Key) })
	if limit := max(q.Limit, 1); len(out) > limit {
		out = out[:limit]
	}
	budget := page.NewByteBudget(q.MaxBytes)
	for i, r := range out {
		if budget.Add(r.Bytes()) {
			return out[:i+1], nil
		}
	}
	return out, nil
}

// Count implements [projection.Store]: the rows by (platform, cloud,
// resource_type, state), in that order.
func (s *Projection) Count(ctx context.Context) ([]projection.Count, error) {
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
	out := make([]projection.Count, 0, len(counts))
	for g, n := range counts {
		out = append(out, projection.Count{Platform: g.platform, Cloud: g.cloud, ResourceType: g.resourceType, State: g.state, N: n})
	}
	slices.SortFunc(out, func(a, b projection.Count) int {
		return cmp.Or(strings.Compare(a.Platform, b.Platform), strings.Compare(a.Cloud, b.Cloud),
			strings.Compare(a.ResourceType, b.ResourceType), strings.Compare(a.State, b.State))
	})
	return out, nil
}

func matches(r *projection.Resource, q *projection.Query) bool {
	switch {
	case q.Cloud != "" && r.Cloud != q.Cloud,
		q.Platform != "" && r.Platform != q.Platform,
		q.ResourceType != "" && r.ResourceType != q.ResourceType,
		q.ProjectID != "" && r.ProjectID != q.ProjectID,
		q.State != "" && r.State != q.State,
		!q.Status.Match(r.State),
		q.After != nil && r.Key.Compare(*q.After) <= 0:
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

// Get implements [projection.Store]; the error wraps store.ErrNotFound
// when there is no such row.
func (s *Projection) Get(ctx context.Context, k projection.Key) (projection.Resource, error) {
	if err := ctx.Err(); err != nil {
		return projection.Resource{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.projection.rows[k]
	if !ok {
		return projection.Resource{}, fmt.Errorf("memstore: resource %s/%s/%s: %w", k.Cloud, k.ResourceType, k.ResourceID, store.ErrNotFound)
	}
	return r, nil
}

// History implements [projection.Store]: the stored events of one resource
// in fold order.
func (s *Projection) History(ctx context.Context, k projection.Key) ([]event.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	h := s.history(k)
	s.mu.Unlock()
	for i := range h {
		h[i] = cloneEvent(h[i])
	}
	slices.SortFunc(h, func(a, b event.Event) int { return projection.Compare(&a, &b) })
	return h, nil
}

// Rebuild implements [projection.Store], q.BatchSize resources per locked
// step, so ingestion interleaves with a long rebuild.
func (s *Projection) Rebuild(ctx context.Context, q projection.RebuildQuery, progress func(done int)) (int, error) {
	size := q.BatchSize
	if size <= 0 {
		size = 500
	}
	s.mu.Lock()
	var keys []projection.Key
	for k := range s.ingest.byResource {
		if (q.Cloud == "" || k.Cloud == q.Cloud) && (q.ResourceType == "" || k.ResourceType == q.ResourceType) {
			keys = append(keys, k)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(keys, projection.Key.Compare)
	done := 0
	for len(keys) > 0 {
		if err := ctx.Err(); err != nil {
			return done, err
		}
		n := min(size, len(keys))
		s.mu.Lock()
		for _, k := range keys[:n] {
			s.projection.rows[k] = projection.Fold(s.history(k))
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

var _ projection.Store = (*Projection)(nil)
