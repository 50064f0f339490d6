package storetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/correlate"
)

// testCorrelateSummary checks getEventSummaryByUser and getEventsAggregate
// (Store.Counts): scoped as getEvents is (an events caller its own user, a
// reader its whole organization), deleted events and other organizations
// never counted.
func testCorrelateSummary(t *testing.T, newStore func(t *testing.T) correlate.Store) {
	f := newCorrFixture(t, newStore, correlate.Options{})
	create := func(c correlate.Caller, js string) correlate.Event {
		e, _ := f.create(c, js)
		f.clock.Advance(time.Second)
		return e
	}
	create(corrAlice, `{"category":"connection","action":"connect","severity":"error","description":"down"}`)
	create(corrAlice, `{"category":"connection","action":"connect","severity":"error","description":"down again"}`)
	read := create(corrAlice, `{"category":"audit","action":"login","description":"alice logged in"}`)
	create(corrBob, `{"category":"design","action":"deploy","severity":"critical","description":"failed"}`)
	gone := create(corrBob, `{"category":"audit","action":"login","description":"deleted"}`)
	create(corrPublic, `{"category":"design","action":"deploy","severity":"success","description":"public"}`)
	create(corrMallory, `{"category":"audit","action":"login","description":"other org"}`)
	ctx := context.Background()
	if _, err := f.svc.SetStatus(ctx, corrAlice, read.ID, correlate.StatusRead); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Delete(ctx, corrBob, gone.ID); err != nil {
		t.Fatal(err)
	}
	reader := correlate.Caller{Organization: "org-1", AllUsers: true}
	sev := func(kv ...any) []correlate.SeverityCount {
		out := []correlate.SeverityCount{}
		for i := 0; i < len(kv); i += 2 {
			out = append(out, correlate.SeverityCount{Severity: correlate.Severity(kv[i].(string)), Count: int64(kv[i+1].(int))})
		}
		return out
	}
	alice := correlate.UserSummary{UserID: "alice", TotalCount: 3, ReadCount: 1, UnreadCount: 2,
		CountBySeverityLevel: sev("error", 2, "informational", 1)}
	bob := correlate.UserSummary{UserID: "bob", TotalCount: 1, UnreadCount: 1, CountBySeverityLevel: sev("critical", 1)}
	public := correlate.UserSummary{UserID: "", TotalCount: 1, UnreadCount: 1, CountBySeverityLevel: sev("success", 1)}
	for _, tt := range []struct {
		name   string
		caller correlate.Caller
		q      correlate.Query
		want   correlate.SummaryPage
	}{
		{"an events caller gets its own row only", corrAlice, correlate.Query{},
			correlate.SummaryPage{PageSize: correlate.DefaultPageSize, TotalCount: 1, Data: []correlate.UserSummary{alice}}},
		{"a reader gets one row per user of its organization, by user id", reader, correlate.Query{},
			correlate.SummaryPage{PageSize: correlate.DefaultPageSize, TotalCount: 3, Data: []correlate.UserSummary{public, alice, bob}}},
		{"order desc", reader, correlate.Query{Order: correlate.OrderDesc},
			correlate.SummaryPage{PageSize: correlate.DefaultPageSize, TotalCount: 3, Data: []correlate.UserSummary{bob, alice, public}}},
		{"paged by users", reader, correlate.Query{Page: 1, PageSize: 2},
			correlate.SummaryPage{Page: 1, PageSize: 2, TotalCount: 3, Data: []correlate.UserSummary{bob}}},
		{"filters apply as getEvents applies them", reader, correlate.Query{Category: []string{"connection"}},
			correlate.SummaryPage{PageSize: correlate.DefaultPageSize, TotalCount: 1, Data: []correlate.UserSummary{
				{UserID: "alice", TotalCount: 2, UnreadCount: 2, CountBySeverityLevel: sev("error", 2)}}}},
		{"nothing matches", corrBob, correlate.Query{Search: "nothing"},
			correlate.SummaryPage{PageSize: correlate.DefaultPageSize, Data: []correlate.UserSummary{}}},
	} {
		t.Run("summary: "+tt.name, func(t *testing.T) {
			got, err := f.svc.Summary(ctx, tt.caller, tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Summary (-want +got):\n%s", diff)
			}
		})
	}
	for _, tt := range []struct {
		name       string
		caller     correlate.Caller
		cumulative bool
		want       string
	}{
		{"cumulative: every event of the caller, audit always there", corrAlice, true, `{"audit":1,"connection":2}`},
		{"not cumulative: the unread ones", corrAlice, false, `{"audit":0,"connection":2}`},
		{"a reader counts its organization; deleted events never", reader, true, `{"audit":1,"connection":2,"design":2}`},
		{"no event at all: audit is 0", correlate.Caller{Organization: "org-3", User: "x"}, true, `{"audit":0}`},
	} {
		t.Run("aggregate: "+tt.name, func(t *testing.T) {
			got, err := f.svc.Aggregate(ctx, tt.caller, tt.cumulative)
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(b)); diff != "" {
				t.Errorf("Aggregate (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("summary: a sort is refused, naming /sort", func(t *testing.T) {
		if _, err := f.svc.Summary(ctx, corrAlice, correlate.Query{Sort: correlate.SortCategory}); err == nil || !strings.Contains(err.Error(), "/sort") {
			t.Errorf("Summary(sort): %v, want a validation error naming /sort", err)
		}
	})
}
