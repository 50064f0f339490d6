package memstore

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/internal/feed"
	"github.com/tallyhq/tally/internal/page"
	"github.com/tallyhq/tally/internal/seed"
	"github.com/tallyhq/tally/sizenames"
	"github.com/tallyhq/tally/store"
)

var (
	_ ingest.Store    = (*Ingest)(nil)
	_ sizenames.Store = (*SizeNames)(nil)
)

type eventKey struct {
	id string
	ts int64 // UnixMicro
}

type rtKey struct{ platform, resourceType string }

// ingestData holds this area's tables. Guarded by state.mu.
type ingestData struct {
	events        map[eventKey]event.Event
	receivedAt    map[eventKey]time.Time
	byResource    map[projection.Key][]eventKey // the events of each resource
	resourceTypes map[rtKey]ingest.ResourceType
	sizeNames     map[string][]sizenames.Row // by cloud
	deadLetters   []ingest.DeadLetter        // in ID order
	audit         []ingest.AuditEntry        // in ID order
	nextDL        int64
	nextAudit     int64
	// feed is the lifecycle feed: every stored event in commit order; the
	// event at index i has position (Current, 0, i+1), which seq holds.
	feed []feedEntry
	seq  map[eventKey]int64
}

type feedEntry struct {
	key  eventKey
	late bool
}

func (d *ingestData) init() {
	d.events = make(map[eventKey]event.Event)
	d.receivedAt = make(map[eventKey]time.Time)
	d.seq = make(map[eventKey]int64)
	d.byResource = make(map[projection.Key][]eventKey)
	d.resourceTypes = make(map[rtKey]ingest.ResourceType)
	d.sizeNames = make(map[string][]sizenames.Row)
}

// seed loads the seeded size schemas, stamped at now.
func (d *ingestData) seed(now time.Time) {
	for _, rt := range seed.ResourceTypes() {
		rt.UpdatedAt = now
		d.resourceTypes[rtKey{rt.Platform, rt.ResourceType}] = rt
	}
}

func (s *state) stamp() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// SizeNames implements [ingest.Store]: the rows of one (cloud,
// resourceType), ordered by member then value; none is nil.
func (s *Ingest) SizeNames(ctx context.Context, cloud, resourceType string) ([]sizenames.Row, error) {
	return s.sizeNames(ctx, cloud, resourceType)
}

// SizeNames implements [sizenames.Store]: the rows of one (cloud,
// resourceType), ordered by member then value; none is nil.
func (s *SizeNames) SizeNames(ctx context.Context, cloud, resourceType string) ([]sizenames.Row, error) {
	return s.sizeNames(ctx, cloud, resourceType)
}

func (s *state) sizeNames(ctx context.Context, cloud, resourceType string) ([]sizenames.Row, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sizenames.Row
	for _, r := range s.ingest.sizeNames[cloud] {
		if r.ResourceType == resourceType {
			out = append(out, r)
		}
	}
	return out, nil
}

// ReplaceSizeNames implements [sizenames.Store]: afterwards cloud has
// exactly rows (copied). A cancelled context changes nothing.
func (s *SizeNames) ReplaceSizeNames(ctx context.Context, cloud string, rows []sizenames.Row) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cp, err := sortedSizeNames(cloud, rows)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ingest.putSizeNames(cloud, cp)
	return nil
}

// sortedSizeNames checks rows as the rows of cloud and returns a sorted
// copy: every row names cloud, no two share a key.
func sortedSizeNames(cloud string, rows []sizenames.Row) ([]sizenames.Row, error) {
	for i, r := range rows {
		if r.Cloud != cloud {
			return nil, fmt.Errorf("memstore: replace size names of cloud %q: row %d names cloud %q", cloud, i, r.Cloud)
		}
	}
	cp := slices.Clone(rows)
	slices.SortFunc(cp, func(a, b sizenames.Row) int {
		return cmp.Or(cmp.Compare(a.ResourceType, b.ResourceType), cmp.Compare(a.Member, b.Member), cmp.Compare(a.Value, b.Value))
	})
	for i := 1; i < len(cp); i++ {
		if cp[i].ResourceType == cp[i-1].ResourceType && cp[i].Member == cp[i-1].Member && cp[i].Value == cp[i-1].Value {
			return nil, fmt.Errorf("memstore: size names of cloud %q: duplicate row (%s, %s, %s)", cloud, cp[i].ResourceType, cp[i].Member, cp[i].Value)
		}
	}
	return cp, nil
}

// putSizeNames makes rows (checked and sorted) the rows of cloud.
func (d *ingestData) putSizeNames(cloud string, rows []sizenames.Row) {
	if len(rows) == 0 {
		delete(d.sizeNames, cloud)
	} else {
		d.sizeNames[cloud] = rows
	}
}

// ResourceType implements [ingest.Store].
func (s *Ingest) ResourceType(ctx context.Context, platform, resourceType string) (ingest.ResourceType, error) {
	if err := ctx.Err(); err != nil {
		return ingest.ResourceType{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rt, ok := s.ingest.resourceTypes[rtKey{platform, resourceType}]
	if !ok {
		return ingest.ResourceType{}, fmt.Errorf("memstore: resource type (%s, %s): %w", platform, resourceType, store.ErrNotFound)
	}
	rt.SizeSchema = bytes.Clone(rt.SizeSchema)
	return rt, nil
}

// ResourceTypes implements [ingest.Store].
func (s *Ingest) ResourceTypes(ctx context.Context) ([]ingest.ResourceType, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ingest.ResourceType, 0, len(s.ingest.resourceTypes))
	for _, rt := range s.ingest.resourceTypes {
		rt.SizeSchema = bytes.Clone(rt.SizeSchema)
		out = append(out, rt)
	}
	slices.SortFunc(out, func(a, b ingest.ResourceType) int {
		return cmp.Or(cmp.Compare(a.Platform, b.Platform), cmp.Compare(a.ResourceType, b.ResourceType))
	})
	return out, nil
}

// PutResourceType implements [ingest.Store]: the row's Version becomes the
// stored one's plus one (1 for a new pair), UpdatedAt the store's clock.
func (s *Ingest) PutResourceType(ctx context.Context, rt ingest.ResourceType) (ingest.ResourceType, error) {
	if err := ctx.Err(); err != nil {
		return ingest.ResourceType{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := rtKey{rt.Platform, rt.ResourceType}
	rt.Version = s.ingest.resourceTypes[k].Version + 1
	rt.UpdatedAt = s.stamp()
	rt.SizeSchema = bytes.Clone(rt.SizeSchema)
	s.ingest.resourceTypes[k] = rt
	out := rt
	out.SizeSchema = bytes.Clone(rt.SizeSchema)
	return out, nil
}

// Commit implements [ingest.Store]. The whole batch is applied under the
// store's lock after every check, so it lands whole or not at all; a
// context cancelled before the lock is taken stores nothing.
func (s *Ingest) Commit(ctx context.Context, b ingest.Batch) (ingest.Committed, error) {
	if err := ctx.Err(); err != nil {
		return ingest.Committed{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return ingest.Committed{}, err
	}
	if b.Conflicts != nil && len(b.Conflicts) != len(b.Events) {
		return ingest.Committed{}, fmt.Errorf("memstore: commit: %d conflicts for %d events (nil or parallel)", len(b.Conflicts), len(b.Events))
	}
	var names []sizenames.Row
	if b.SizeNames != nil {
		var err error
		if names, err = sortedSizeNames(b.SizeNames.Cloud, b.SizeNames.Rows); err != nil {
			return ingest.Committed{}, fmt.Errorf("memstore: commit: %w", err)
		}
		// Checked before anything is written: from here on nothing fails.
		s.ingest.putSizeNames(b.SizeNames.Cloud, names)
	}
	now := s.stamp()
	inserted := make([]bool, len(b.Events))
	var conflicted []bool
	added := make(map[eventKey]int, len(b.Events))
	for i, ev := range b.Events {
		k := eventKey{ev.EventID, ev.Timestamp.UnixMicro()}
		held, ok := s.ingest.events[k]
		if j, in := added[k]; !ok && in {
			held, ok = b.Events[j], true
		}
		if ok {
			if event.Collides(&held, &ev) {
				if conflicted == nil {
					conflicted = make([]bool, len(b.Events))
				}
				conflicted[i] = true
			}
			continue
		}
		added[k] = i
		inserted[i] = true
	}
	if conflicted != nil && b.Conflicts != nil {
		// New slices: never append into the caller's arrays.
		b.DeadLetters, b.Audit = slices.Clone(b.DeadLetters), slices.Clone(b.Audit)
		for i, c := range conflicted {
			if c {
				b.DeadLetters = append(b.DeadLetters, b.Conflicts[i].DeadLetter)
				b.Audit = append(b.Audit, b.Conflicts[i].Audit)
			}
		}
	}
	var stored []event.Event
	latest := map[projection.Key]time.Time{} // the resource's last event so far, for Late
	for _, i := range feedOrder(b.Events, inserted) {
		ev := cloneEvent(b.Events[i])
		k := eventKey{ev.EventID, ev.Timestamp.UnixMicro()}
		s.ingest.events[k] = ev
		s.ingest.receivedAt[k] = now
		rk := projection.KeyOf(&ev)
		s.ingest.byResource[rk] = append(s.ingest.byResource[rk], k)
		stored = append(stored, ev)
		// Late only against an event stored before: the zero time (year 1)
		// is no such event, and an event of year 0000 is before it.
		last, seen := latest[rk]
		if !seen {
			if r, ok := s.projection.current(rk); ok {
				last, seen = r.LastEventAt, true
			}
		}
		s.ingest.feed = append(s.ingest.feed, feedEntry{key: k, late: seen && ev.Timestamp.Before(last)})
		s.ingest.seq[k] = int64(len(s.ingest.feed))
		if !seen || ev.Timestamp.After(last) {
			last = ev.Timestamp
		}
		latest[rk] = last
	}
	// The projection folds the newly stored events in the same unit of work
	// (nothing below can fail, so the commit stays all-or-nothing).
	rows, replays, _ := projection.FoldBatch(stored, s.projection.current, func(k projection.Key) ([]event.Event, error) {
		return s.history(k), nil
	})
	s.projection.install(rows)
	s.ingest.addRecords(b.DeadLetters, b.Audit, now)
	res := ingest.Committed{Inserted: inserted, Conflicted: conflicted, Replays: replays}
	if b.SyncRun != nil {
		if run := b.SyncRun(res); run != nil {
			res.SyncRunID = s.sync.record(*run, now)
		}
	}
	return res, nil
}

// feedOrder returns the indexes of the inserted events of evs in the order
// they enter the feed: (timestamp to the microsecond, event_id), as
// pgstore inserts them (ingest.FeedEvent), so that a batch carrying several
// events of one resource feeds them oldest first and marks none of them
// Late against another event of the same batch.
func feedOrder(evs []event.Event, inserted []bool) []int {
	var order []int
	for i, in := range inserted {
		if in {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(i, j int) int {
		return cmp.Or(cmp.Compare(evs[i].Timestamp.UnixMicro(), evs[j].Timestamp.UnixMicro()), strings.Compare(evs[i].EventID, evs[j].EventID))
	})
	return order
}

// addRecords appends the dead letters and audit rows of a batch, each with
// the next ID and, when its time is zero, now.
func (d *ingestData) addRecords(dls []ingest.DeadLetter, audit []ingest.AuditEntry, now time.Time) {
	for _, dl := range dls {
		d.nextDL++
		dl.ID, dl.UUID = d.nextDL, uuid.NewString()
		if dl.ReceivedAt.IsZero() {
			dl.ReceivedAt = now
		}
		dl.ReceivedAt = dl.ReceivedAt.UTC().Truncate(time.Microsecond)
		if dl.Raw != nil {
			dl.Raw = bytes.Clone(dl.Raw)
		}
		d.deadLetters = append(d.deadLetters, dl)
	}
	for _, a := range audit {
		d.nextAudit++
		a.ID = d.nextAudit
		if a.At.IsZero() {
			a.At = now
		}
		a.At = a.At.UTC().Truncate(time.Microsecond)
		d.audit = append(d.audit, a)
	}
}

func cloneEvent(ev event.Event) event.Event {
	// Kept to the microsecond, as pgstore keeps it and as the event is
	// keyed and ordered: a Go caller's nanoseconds would otherwise make
	// an event Late against one of its own microsecond.
	ev.Timestamp = event.Normalize(ev.Timestamp)
	ev.Payload.Size = bytes.Clone(ev.Payload.Size)
	ev.Payload.Provider = bytes.Clone(ev.Payload.Provider)
	ev.Payload.Unknown = bytes.Clone(ev.Payload.Unknown)
	return ev
}

// inWindow reports whether t is in [from, to) (a zero end is open) and
// strictly after the position.
func inWindow(t time.Time, id int64, from, to time.Time, after *ingest.Position) bool {
	if !from.IsZero() && t.Before(from) {
		return false
	}
	if !to.IsZero() && !t.Before(to) {
		return false
	}
	if after != nil {
		if c := t.Compare(after.At); c < 0 || c == 0 && id <= after.ID {
			return false
		}
	}
	return true
}

// DeadLetters implements [ingest.Store].
func (s *Ingest) DeadLetters(ctx context.Context, q ingest.DeadLetterQuery) ([]ingest.DeadLetter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ingest.DeadLetter
	for _, dl := range s.ingest.deadLetters {
		if inWindow(dl.ReceivedAt, dl.ID, q.From, q.To, q.After) {
			dl.Raw = bytes.Clone(dl.Raw)
			out = append(out, dl)
		}
	}
	slices.SortStableFunc(out, func(a, b ingest.DeadLetter) int {
		return cmp.Or(a.ReceivedAt.Compare(b.ReceivedAt), cmp.Compare(a.ID, b.ID))
	})
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// Audit implements [ingest.Store].
func (s *Ingest) Audit(ctx context.Context, q ingest.AuditQuery) ([]ingest.AuditEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ingest.AuditEntry
	for _, a := range s.ingest.audit {
		if (q.Action == "" || a.Action == q.Action) && inWindow(a.At, a.ID, q.From, q.To, q.After) {
			out = append(out, a)
		}
	}
	slices.SortStableFunc(out, func(a, b ingest.AuditEntry) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.ID, b.ID))
	})
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// history returns every stored event of one resource, in no order.
// Callers hold s.mu.
func (s *state) history(k projection.Key) []event.Event {
	keys := s.ingest.byResource[k]
	out := make([]event.Event, len(keys))
	for i, ek := range keys {
		out[i] = s.ingest.events[ek]
	}
	return out
}

// Events lists stored events (ingest.Store), ordered by (timestamp,
// event_id).
func (s *Ingest) Events(ctx context.Context, q ingest.EventQuery) ([]ingest.StoredEvent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []eventKey
	for k, e := range s.ingest.events {
		switch {
		case q.Cloud != "" && e.Cloud != q.Cloud,
			q.Platform != "" && e.Platform != q.Platform,
			q.ProjectID != "" && e.ProjectID != q.ProjectID,
			q.ResourceType != "" && e.ResourceType != q.ResourceType,
			q.ResourceID != "" && e.ResourceID != q.ResourceID,
			q.EventType != "" && e.EventType != q.EventType,
			q.Source != "" && e.Source != q.Source,
			!q.From.IsZero() && e.Timestamp.Before(q.From),
			!q.To.IsZero() && !e.Timestamp.Before(q.To),
			q.After != nil && compareEventPos(e.Timestamp, e.EventID, q.After.Timestamp, q.After.EventID) <= 0:
			continue
		}
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b eventKey) int {
		ea, eb := s.ingest.events[a], s.ingest.events[b]
		return compareEventPos(ea.Timestamp, ea.EventID, eb.Timestamp, eb.EventID)
	})
	if q.Limit > 0 && len(keys) > q.Limit {
		keys = keys[:q.Limit]
	}
	// Only the events returned are copied, up to the byte budget
	// (page.ByteBudget).
	var (
		out    []ingest.StoredEvent
		budget = page.NewByteBudget(q.MaxBytes)
	)
	for _, k := range keys {
		out = append(out, ingest.StoredEvent{Event: cloneEvent(s.ingest.events[k]), ReceivedAt: s.ingest.receivedAt[k]})
		if budget.Add(ingest.StoredEventBytes(out[len(out)-1])) {
			break
		}
	}
	return out, nil
}

func compareEventPos(at time.Time, aid string, bt time.Time, bid string) int {
	if c := at.Compare(bt); c != 0 {
		return c
	}
	return cmp.Compare(aid, bid)
}

// Feed implements [ingest.Store]: the events in the order Commit stored
// them, read under the store's lock (a commit is whole or not there). The
// items share their payloads with the store, which never changes a stored
// event: the feed's ring holds no second copy (callers must not modify
// them, as [ingest.Store] says).
func (s *Ingest) Feed(ctx context.Context, q ingest.FeedRead) (ingest.FeedBatch, error) {
	if err := ctx.Err(); err != nil {
		return ingest.FeedBatch{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	log := s.ingest.feed
	var from int // the index of the first event after q.After
	switch q.After.Kind {
	case feed.Start:
	case feed.Current:
		if q.After.TX != 0 || q.After.Seq > int64(len(log)) {
			return ingest.FeedBatch{}, fmt.Errorf("memstore: feed position %d of %d: %w", q.After.Seq, len(log), ingest.ErrFeedPosition)
		}
		from = int(q.After.Seq)
	default:
		return ingest.FeedBatch{}, fmt.Errorf("memstore: feed position of kind %d: %w", q.After.Kind, ingest.ErrFeedPosition)
	}
	pos := func(i int) feed.Position { return feed.Position{Kind: feed.Current, Seq: int64(i) + 1} }
	if q.Limit <= 0 {
		if len(log) == 0 {
			return ingest.FeedBatch{Next: feed.Position{Kind: feed.Current}, CaughtUp: true}, nil
		}
		return ingest.FeedBatch{Next: pos(len(log) - 1), CaughtUp: true}, nil
	}
	out := ingest.FeedBatch{Next: q.After}
	i := from
	for ; i < len(log) && i-from < ingest.MaxFeedScan && len(out.Items) < q.Limit; i++ {
		out.Next = pos(i)
		e := s.ingest.events[log[i].key]
		if !q.Match(&e) {
			continue
		}
		out.Items = append(out.Items, ingest.FeedEvent{
			StoredEvent: ingest.StoredEvent{Event: e, ReceivedAt: s.ingest.receivedAt[log[i].key]},
			Position:    pos(i), Late: log[i].late,
		})
	}
	out.CaughtUp = i == len(log)
	return out, nil
}
