package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"time"
)

// resKey is the key of one projection row.
type resKey struct{ Cloud, ResourceType, ResourceID string }

// row is one projection row, as the bench's own fold computes it and as a
// store reports it.
type row struct {
	Platform, ProjectID, State string
	// Size is exact JSON (nil when no event carried one); compared by value.
	Size                       []byte
	CreatedAt, DeletedAt       *time.Time
	FirstEventAt, LastEventAt  time.Time
	LastEventType, LastEventID string
}

func catRank(c category) int {
	switch c {
	case catCreate:
		return 0
	case catUpdate:
		return 1
	}
	return 2
}

// foldModel is the bench's own fold of the distinct valid events it sent,
// written from the README's rules and independent of projection.Fold: each
// resource's events in the order (timestamp; create < update < delete;
// event_id);
//   - every event sets platform, project_id and the last event;
//   - a create sets created_at, clears deleted_at, applies state and size;
//   - an update applies state and size (an absent size keeps the old one)
//     unless the resource is deleted;
//   - a delete sets deleted_at and state "deleted", keeping the size.
func foldModel(evs []*genEvent) map[resKey]row {
	by := map[resKey][]*genEvent{}
	for _, e := range evs {
		k := resKey{e.Cloud, e.ResourceType, e.ResourceID}
		by[k] = append(by[k], e)
	}
	out := make(map[resKey]row, len(by))
	for k, h := range by {
		slices.SortFunc(h, func(a, b *genEvent) int {
			return cmp.Or(a.Timestamp.Compare(b.Timestamp), cmp.Compare(catRank(a.Category), catRank(b.Category)), cmp.Compare(a.EventID, b.EventID))
		})
		r := row{FirstEventAt: h[0].Timestamp}
		for _, e := range h {
			r.Platform, r.ProjectID = "openstack", e.ProjectID
			ts := e.Timestamp
			switch e.Category {
			case catCreate:
				r.CreatedAt, r.DeletedAt = &ts, nil
				r.State = e.State
				if e.SizeWant != nil {
					r.Size = e.SizeWant
				}
			case catUpdate:
				if r.DeletedAt == nil {
					if e.State != "" {
						r.State = e.State
					}
					if e.SizeWant != nil {
						r.Size = e.SizeWant
					}
				}
			case catDelete:
				r.DeletedAt, r.State = &ts, "deleted"
			}
			r.LastEventAt, r.LastEventType, r.LastEventID = ts, e.EventType, e.EventID
		}
		out[k] = r
	}
	return out
}

// jsonEqual reports whether a and b hold the same JSON value (member order,
// whitespace and number spelling aside).
func jsonEqual(a, b []byte) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&x) != nil || db.Decode(&y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func timeEqual(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "null"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// diffRow names every member of got that differs from want.
func diffRow(want, got row) []string {
	var d []string
	add := func(member, w, g string) { d = append(d, fmt.Sprintf("%s: want %s, got %s", member, w, g)) }
	if want.Platform != got.Platform {
		add("platform", want.Platform, got.Platform)
	}
	if want.ProjectID != got.ProjectID {
		add("project_id", want.ProjectID, got.ProjectID)
	}
	if want.State != got.State {
		add("state", want.State, got.State)
	}
	if !jsonEqual(want.Size, got.Size) {
		add("size", string(want.Size), string(got.Size))
	}
	if !timeEqual(want.CreatedAt, got.CreatedAt) {
		add("created_at", fmtTime(want.CreatedAt), fmtTime(got.CreatedAt))
	}
	if !timeEqual(want.DeletedAt, got.DeletedAt) {
		add("deleted_at", fmtTime(want.DeletedAt), fmtTime(got.DeletedAt))
	}
	if !want.FirstEventAt.Equal(got.FirstEventAt) {
		add("first_event_at", fmtTime(&want.FirstEventAt), fmtTime(&got.FirstEventAt))
	}
	if !want.LastEventAt.Equal(got.LastEventAt) {
		add("last_event_at", fmtTime(&want.LastEventAt), fmtTime(&got.LastEventAt))
	}
	if want.LastEventType != got.LastEventType {
		add("last_event_type", want.LastEventType, got.LastEventType)
	}
	if want.LastEventID != got.LastEventID {
		add("last_event_id", want.LastEventID, got.LastEventID)
	}
	return d
}

// compareProjection returns one problem per row that is missing, extra or
// different (at most max problems, then a count of the rest).
func compareProjection(want, got map[resKey]row, max int) []string {
	var problems []string
	n := 0
	report := func(s string) {
		n++
		if len(problems) < max {
			problems = append(problems, s)
		}
	}
	keys := make([]resKey, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b resKey) int {
		return cmp.Or(cmp.Compare(a.Cloud, b.Cloud), cmp.Compare(a.ResourceType, b.ResourceType), cmp.Compare(a.ResourceID, b.ResourceID))
	})
	for _, k := range keys {
		g, ok := got[k]
		if !ok {
			report(fmt.Sprintf("projection: %s/%s/%s missing", k.Cloud, k.ResourceType, k.ResourceID))
			continue
		}
		if d := diffRow(want[k], g); len(d) > 0 {
			report(fmt.Sprintf("projection: %s/%s/%s differs from the fold: %v", k.Cloud, k.ResourceType, k.ResourceID, d))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			report(fmt.Sprintf("projection: %s/%s/%s is not in the fold", k.Cloud, k.ResourceType, k.ResourceID))
		}
	}
	if n > len(problems) {
		problems = append(problems, fmt.Sprintf("projection: %d more rows differ", n-len(problems)))
	}
	return problems
}
