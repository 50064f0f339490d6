package memstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/ingest/usage"
	"github.com/tallyhq/tally/internal/feed"
)

var _ usage.Store = (*Ingest)(nil)

// Snapshot implements [usage.Store]: positions are those of [Ingest.Feed].
func (s *Ingest) Snapshot(ctx context.Context, at *ingest.FeedPosition) (usage.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return usage.Snapshot{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	log := s.ingest.feed
	p := feed.Position{Kind: feed.Current, Seq: int64(len(log))}
	if at != nil {
		switch {
		case at.Kind == feed.Start:
			p = feed.Position{Kind: feed.Current}
		case at.Kind != feed.Current || at.TX != 0 || at.Seq > int64(len(log)):
			return usage.Snapshot{}, fmt.Errorf("memstore: feed position %+v of %d: %w", *at, len(log), ingest.ErrFeedPosition)
		default:
			p = *at
		}
	}
	out := usage.Snapshot{Position: p}
	if p.Seq > 0 {
		out.At = s.ingest.receivedAt[log[p.Seq-1].key]
	}
	return out, nil
}

// Histories implements [usage.Store]. Each history is copied under the
// store's lock and fn is called without it.
func (s *Ingest) Histories(ctx context.Context, q usage.HistoryQuery, fn func(usage.History) error) error {
	if q.AsOf.Kind != feed.Current || q.AsOf.TX != 0 {
		if q.AsOf.Kind != feed.Start {
			return fmt.Errorf("memstore: histories as of %+v: %w", q.AsOf, ingest.ErrFeedPosition)
		}
	}
	keys, err := s.selected(ctx, q)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.mu.Lock()
		h := usage.History{Key: k}
		for _, ek := range s.ingest.byResource[k] {
			e := s.ingest.events[ek]
			if s.ingest.seq[ek] <= q.AsOf.Seq && (q.Before.IsZero() || e.Timestamp.Before(q.Before)) {
				h.Events = append(h.Events, cloneEvent(e))
			}
		}
		s.mu.Unlock()
		slices.SortFunc(h.Events, func(a, b event.Event) int { return projection.Compare(&a, &b) })
		if err := fn(h); err != nil {
			return err
		}
	}
	return nil
}

// selected lists the keys q selects, in key order.
func (s *Ingest) selected(ctx context.Context, q usage.HistoryQuery) ([]projection.Key, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []projection.Key
	for k, eks := range s.ingest.byResource {
		if q.Cloud != "" && k.Cloud != q.Cloud || q.ResourceType != "" && k.ResourceType != q.ResourceType ||
			q.ResourceID != "" && k.ResourceID != q.ResourceID || q.After != nil && k.Compare(*q.After) <= 0 {
			continue
		}
		if slices.ContainsFunc(eks, func(ek eventKey) bool {
			e := s.ingest.events[ek]
			return s.ingest.seq[ek] <= q.AsOf.Seq && (q.Before.IsZero() || e.Timestamp.Before(q.Before)) &&
				(q.Platform == "" || e.Platform == q.Platform) && (q.ProjectID == "" || e.ProjectID == q.ProjectID)
		}) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, projection.Key.Compare)
	if q.Limit > 0 && len(keys) > q.Limit {
		keys = keys[:q.Limit]
	}
	return keys, nil
}

// Checkpoint implements [usage.Store]: the memory store drops no events,
// so it keeps no checkpoint.
func (s *Ingest) Checkpoint(ctx context.Context, _ projection.Key) (*projection.Resource, time.Time, error) {
	return nil, time.Time{}, ctx.Err()
}
