package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/ingest"
)

// testStoredEvents: Store.Events lists stored events with the Reporting
// API's filters (the existing-clients rules: cloud, resource type and id, project, event type,
// time window), ordered by (timestamp, event_id) with event_id compared byte
// by byte, pages by position, and carries each event's received_at.
func testStoredEvents(t *testing.T, st ingestStore) {
	svc := newService(t, st, nil)
	ingestOne(t, svc,
		projEvent{"a", "volume.create.end", "v-1", "p1", "available", 0, 1},
		projEvent{"B", "volume.create.end", "v-2", "p2", "available", 0, 1}, // "B" < "a" byte by byte, not in most collations
		projEvent{"c", "volume.update.end", "v-1", "p1", "in-use", time.Minute, 0},
		projEvent{"d", "volume.delete.end", "v-1", "p1", "", 2 * time.Minute, 0},
	)
	ctx := context.Background()
	ids := func(q ingest.EventQuery) []string {
		t.Helper()
		evs, err := st.Events(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, e := range evs {
			if e.ReceivedAt.IsZero() || e.ReceivedAt.Location() != time.UTC {
				t.Errorf("event %s: received_at %v, want a UTC time", e.Event.EventID, e.ReceivedAt)
			}
			out = append(out, e.Event.EventID)
		}
		return out
	}
	for _, tt := range []struct {
		name string
		q    ingest.EventQuery
		want []string
	}{
		{"all, by (timestamp, event_id)", ingest.EventQuery{}, []string{"B", "a", "c", "d"}},
		{"by cloud", ingest.EventQuery{Cloud: "c1"}, []string{"B", "a", "c", "d"}},
		{"by another cloud", ingest.EventQuery{Cloud: "c2"}, []string{}},
		{"by resource", ingest.EventQuery{Cloud: "c1", ResourceType: "volume", ResourceID: "v-1"}, []string{"a", "c", "d"}},
		{"by project", ingest.EventQuery{ProjectID: "p2"}, []string{"B"}},
		{"by event type", ingest.EventQuery{EventType: "volume.update.end"}, []string{"c"}},
		{"by platform and source", ingest.EventQuery{Platform: "openstack", Source: "collector"}, []string{"B", "a", "c", "d"}},
		{"by source reconciliation", ingest.EventQuery{Source: "reconciliation"}, []string{}},
		{"window [from, to)", ingest.EventQuery{From: t0.Add(time.Minute), To: t0.Add(2 * time.Minute)}, []string{"c"}},
		{"after a position", ingest.EventQuery{After: &ingest.EventPosition{Timestamp: t0, EventID: "B"}}, []string{"a", "c", "d"}},
		{"limit", ingest.EventQuery{Limit: 2}, []string{"B", "a"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, ids(tt.q)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	t.Run("events as History returns them", func(t *testing.T) {
		h, err := st.Projection().History(ctx, volumeKey("v-1"))
		if err != nil {
			t.Fatal(err)
		}
		evs, err := st.Events(ctx, ingest.EventQuery{Cloud: "c1", ResourceType: "volume", ResourceID: "v-1"})
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != len(evs) {
			t.Fatalf("History holds %d events, Events %d", len(h), len(evs))
		}
		for i := range evs {
			want, err1 := h[i].MarshalJSON()
			got, err2 := evs[i].Event.MarshalJSON()
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("event %d (-History +Events):\n%s", i, diff)
			}
		}
	})
	t.Run("service pages by cursor", func(t *testing.T) {
		var got []string
		f := ingest.EventFilter{Limit: 1}
		for range 6 {
			p, err := svc.Events(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range p.Items {
				got = append(got, e.Event.EventID)
			}
			if p.NextCursor == nil {
				break
			}
			f.Cursor = *p.NextCursor
		}
		if diff := cmp.Diff([]string{"B", "a", "c", "d"}, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}
