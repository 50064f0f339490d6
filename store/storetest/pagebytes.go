package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
)

// bigVolume is the create of volume id at t0+i minutes whose size carries a
// pad member of padBytes bytes (the seeded volume schema admits further
// members), so both the event and its projection row weigh about padBytes.
func bigVolume(i, padBytes int) []byte {
	return []byte(fmt.Sprintf(`{"event_id":"e%02d","timestamp":%q,"event_type":"volume.create.end","platform":"openstack",`+
		`"cloud":"c1","resource_type":"volume","resource_id":"v-%02d","project_id":"p1",`+
		`"payload":{"state":"available","size":{"size_gb":1,"type":"ssd","pad":%q}}}`,
		i, t0.Add(time.Duration(i)*time.Minute).Format(time.RFC3339), i, strings.Repeat("x", padBytes)))
}

// testPageBytes: every listing page stops at whichever comes first, its
// limit or ingest.MaxPageBytes of items, holds at least one item however
// large, and carries a next cursor whenever it stopped short, so paging
// reaches every item; a store given MaxBytes stops reading one item past
// the budget.
func testPageBytes(t *testing.T, st ingestStore) {
	svc := newService(t, st, nil)
	ctx := context.Background()
	const mib = 1 << 20
	// Sizes in MiB, in timestamp order: 3+3 fit 8 MiB, a third does not;
	// 9 is alone over the budget and still makes a page of its own.
	pads := []int{3, 3, 3, 9, 1, 1}
	var raw [][]byte
	for i, p := range pads {
		raw = append(raw, bigVolume(i, p*mib))
	}
	for _, item := range raw {
		res, err := svc.Ingest(ctx, ingest.Caller{Credential: "test"}, [][]byte{item})
		if err != nil || res.Accepted != 1 {
			t.Fatalf("Ingest: %+v, %v", res, err)
		}
	}
	wantPages := [][]string{{"00", "01"}, {"02"}, {"03"}, {"04", "05"}}

	for _, limit := range []int{0, 1000} {
		t.Run(fmt.Sprintf("events, limit %d", limit), func(t *testing.T) {
			var got [][]string
			f := ingest.EventFilter{Limit: limit}
			for range 10 {
				p, err := svc.Events(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				var ids []string
				for _, e := range p.Items {
					ids = append(ids, strings.TrimPrefix(e.Event.EventID, "e"))
				}
				got = append(got, ids)
				if p.NextCursor == nil {
					break
				}
				f.Cursor = *p.NextCursor
			}
			if diff := cmp.Diff(wantPages, got); diff != "" {
				t.Errorf("pages (-want +got):\n%s", diff)
			}
		})
		t.Run(fmt.Sprintf("resources, limit %d", limit), func(t *testing.T) {
			var got [][]string
			f := projection.Filter{Limit: limit, Status: projection.StatusAll}
			for range 10 {
				p, err := projService(t, st, svc).List(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				var ids []string
				for _, r := range p.Items {
					ids = append(ids, strings.TrimPrefix(r.ResourceID, "v-"))
				}
				got = append(got, ids)
				if p.NextCursor == nil {
					break
				}
				f.Cursor = *p.NextCursor
			}
			if diff := cmp.Diff(wantPages, got); diff != "" {
				t.Errorf("pages (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("limit still stops a page first", func(t *testing.T) {
		p, err := svc.Events(ctx, ingest.EventFilter{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Items) != 1 || p.NextCursor == nil {
			t.Errorf("limit 1: %d items, next cursor %v; want 1 and a cursor", len(p.Items), p.NextCursor)
		}
	})
	t.Run("a store stops reading one item past MaxBytes", func(t *testing.T) {
		for _, tt := range []struct {
			name     string
			maxBytes int
			want     int
		}{
			{"no budget", 0, 6},
			{"8 MiB", ingest.MaxPageBytes, 3},
			{"1 byte still holds two", 1, 2},
		} {
			evs, err := st.Events(ctx, ingest.EventQuery{Limit: 1001, MaxBytes: tt.maxBytes})
			if err != nil {
				t.Fatal(err)
			}
			rs, err := st.Projection().List(ctx, projection.Query{Limit: 1001, Status: projection.StatusAll, MaxBytes: tt.maxBytes})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]int{tt.want, tt.want}, []int{len(evs), len(rs)}); diff != "" {
				t.Errorf("%s: events, resources read (-want +got):\n%s", tt.name, diff)
			}
		}
	})
}

// "What was kept is read back through GET /api/v1/rejected-events", a page
// at a time: a page of dead letters stops at ingest.MaxPageBytes as well as
// at its limit (raw bytes counted 4/3, as an answer may carry them in
// base64), and its cursor reaches the rest.
func testDeadLetterPageBytes(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{MaxDeadLetterBytes: 4 << 20})
	ctx := context.Background()
	// Each refused item keeps 3 MiB raw, 4 MiB counted: two fit 8 MiB only
	// with the allowance, so a page holds one.
	for i := range 3 {
		item := fmt.Sprintf(`{"event_id":"d%d","pad":%q}`, i, strings.Repeat("x", 3<<20-64))
		e.ingest(collector, []byte(item))
	}
	var got [][]string
	page := ingest.Page{Limit: 1000}
	for range 10 {
		p, err := e.svc.DeadLetters(ctx, page)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, dl := range p.Items {
			ids = append(ids, dl.EventID)
		}
		got = append(got, ids)
		if p.NextCursor == nil {
			break
		}
		page.Cursor = *p.NextCursor
	}
	if diff := cmp.Diff([][]string{{"d0"}, {"d1"}, {"d2"}}, got); diff != "" {
		t.Errorf("pages (-want +got):\n%s", diff)
	}
}

// testResourceHistoryBytes: a resource read (projection.Service.Get) embeds its
// events up to ingest.MaxPageBytes and the per-resource read
// (Service.ResourceEvents) answers up to the same budget; both hand a
// cursor of Service.Events, filtered on the resource, for the rest.
func testResourceHistoryBytes(t *testing.T, st ingestStore) {
	svc := newService(t, st, nil)
	ctx := context.Background()
	pad := strings.Repeat("x", 3<<20)
	k := volumeKey("v-h")
	for i, typ := range []string{"volume.create.end", "volume.update.end", "volume.update.end", "volume.update.end"} {
		item := fmt.Sprintf(`{"event_id":"h%d","timestamp":%q,"event_type":%q,"platform":"openstack","cloud":"c1",`+
			`"resource_type":"volume","resource_id":"v-h","project_id":"p1","payload":{"state":"available","size":{"size_gb":1,"type":"ssd","pad":%q}}}`,
			i, t0.Add(time.Duration(i)*time.Minute).Format(time.RFC3339), typ, pad)
		if res, err := svc.Ingest(ctx, ingest.Caller{Credential: "test"}, [][]byte{[]byte(item)}); err != nil || res.Accepted != 1 {
			t.Fatalf("Ingest: %+v, %v", res, err)
		}
	}
	rest := func(t *testing.T, cursor *string) []string {
		t.Helper()
		if cursor == nil {
			t.Fatal("no cursor for the rest of the history")
		}
		var ids []string
		f := ingest.EventFilter{Cloud: k.Cloud, ResourceType: k.ResourceType, ResourceID: k.ResourceID, Cursor: *cursor}
		for range 10 {
			p, err := svc.Events(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range p.Items {
				ids = append(ids, e.Event.EventID)
			}
			if p.NextCursor == nil {
				return ids
			}
			f.Cursor = *p.NextCursor
		}
		return ids
	}
	t.Run("resource read embeds events up to the budget", func(t *testing.T) {
		d, err := projService(t, st, svc).Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range d.Events {
			ids = append(ids, e.EventID)
		}
		if diff := cmp.Diff([]string{"h0", "h1"}, ids); diff != "" {
			t.Errorf("embedded (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"h2", "h3"}, rest(t, d.EventsNextCursor)); diff != "" {
			t.Errorf("rest (-want +got):\n%s", diff)
		}
	})
	t.Run("resource events answer up to the budget", func(t *testing.T) {
		p, err := svc.ResourceEvents(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range p.Items {
			ids = append(ids, e.Event.EventID)
		}
		if diff := cmp.Diff([]string{"h0", "h1"}, ids); diff != "" {
			t.Errorf("answered (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"h2", "h3"}, rest(t, p.NextCursor)); diff != "" {
			t.Errorf("rest (-want +got):\n%s", diff)
		}
	})
	t.Run("a short history is whole, without a cursor", func(t *testing.T) {
		ingestOne(t, svc, projEvent{"s0", "volume.create.end", "v-s", "p1", "available", 0, 1})
		d, err := projService(t, st, svc).Get(ctx, volumeKey("v-s"))
		if err != nil {
			t.Fatal(err)
		}
		p, err := svc.ResourceEvents(ctx, volumeKey("v-s"))
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Events) != 1 || d.EventsNextCursor != nil || len(p.Items) != 1 || p.NextCursor != nil {
			t.Errorf("detail %d events, cursor %v; events %d, cursor %v; want 1 and nil twice", len(d.Events), d.EventsNextCursor, len(p.Items), p.NextCursor)
		}
	})
}

// testCorrelateListBytes: a getEvents page holds at most
// correlate.MaxPageBytes of events (at least one) as well as at most
// pageSize; totalCount still counts the whole listing, and a smaller
// pageSize reaches the events past the cut. A store given MaxBytes stops
// reading after the event that passes it.
func testCorrelateListBytes(t *testing.T, newStore func(t *testing.T) correlate.Store) {
	f := newCorrFixture(t, newStore, correlate.Options{})
	pad := strings.Repeat("x", 3<<20)
	for i := range 4 {
		f.create(corrAlice, fmt.Sprintf(`{"category":"c","action":"a","description":"d%d","metadata":{"pad":%q}}`, i, pad))
		f.clock.Advance(time.Second)
	}
	p := f.list(corrAlice, correlate.Query{PageSize: correlate.MaxPageSize})
	if diff := cmp.Diff([]int64{2, 4}, []int64{int64(len(p.Data)), p.TotalCount}); diff != "" {
		t.Errorf("page of 100: data, totalCount (-want +got):\n%s", diff)
	}
	var got []string
	for page := range 4 {
		p := f.list(corrAlice, correlate.Query{PageSize: 1, Page: page, Order: correlate.OrderAsc})
		for _, e := range p.Data {
			got = append(got, e.Description)
		}
	}
	if diff := cmp.Diff([]string{"d0", "d1", "d2", "d3"}, got); diff != "" {
		t.Errorf("pageSize 1 (-want +got):\n%s", diff)
	}
	for _, tt := range []struct {
		maxBytes, want int
	}{{0, 4}, {1, 1}, {correlate.MaxPageBytes, 3}} {
		l, err := f.store.List(context.Background(), corrAlice, correlate.Query{PageSize: 100, Order: correlate.OrderAsc, Sort: correlate.SortCreatedAt, MaxBytes: tt.maxBytes})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Events) != tt.want || l.Total != 4 {
			t.Errorf("store List, MaxBytes %d: %d events of total %d, want %d of 4", tt.maxBytes, len(l.Events), l.Total, tt.want)
		}
	}
}
