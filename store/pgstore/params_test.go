package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/store/pgstore"
)

// TestResourceParamsRoundTrip: projection rows written through the
// binary-encoded column arrays (the merge's, a rebuild's, retention's
// checkpoints') read back as they were given, to the microsecond
// (PostgreSQL's precision, rounded down): NULL sizes and times among
// others, text beyond ASCII and empty text, the ends of the time range
// an event may carry, and an empty set of rows.
func TestResourceParamsRoundTrip(t *testing.T) {
	ctx := context.Background()
	db, _ := openDB(t, pgstore.Options{})
	at := func(tm time.Time) *time.Time { return &tm }
	early := time.Date(1, 1, 1, 0, 0, 0, 1999, time.UTC)
	late := time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC)
	pre1970 := time.Date(1969, 7, 20, 20, 17, 40, 123_456_789, time.FixedZone("", -5*3600))
	var rows []projection.Resource
	for i := range 300 {
		r := projection.Resource{
			Key:           projection.Key{Cloud: "c☃", ResourceType: "instance", ResourceID: fmt.Sprintf("r%03d-é", i)},
			Platform:      "openstack",
			ProjectID:     []string{"", "p1", "projét"}[i%3],
			State:         []string{"active", "", "deleted"}[i%3],
			FirstEventAt:  early.Add(time.Duration(i) * time.Hour),
			LastEventAt:   []time.Time{late, pre1970, time.Date(2026, 3, 1, 0, 0, 0, 999, time.UTC)}[i%3],
			LastEventType: "compute.instance.update", LastEventID: fmt.Sprintf("e%d", i),
		}
		if i%2 == 0 {
			r.Size = jsontext.Value(fmt.Sprintf(`{"vcpus":%d,"name":"m1.é"}`, i))
		}
		if i%3 != 1 {
			r.CreatedAt = at(pre1970.Add(time.Duration(i) * time.Nanosecond))
		}
		if i%5 == 0 {
			r.DeletedAt = at(late)
		}
		rows = append(rows, r)
	}
	if err := pgstore.UpsertResources(ctx, db, nil); err != nil {
		t.Fatalf("no rows: %v", err)
	}
	if err := pgstore.UpsertResources(ctx, db, rows); err != nil {
		t.Fatal(err)
	}
	micro := func(tm time.Time) time.Time { return tm.UTC().Truncate(time.Microsecond) }
	microp := func(tm *time.Time) *time.Time {
		if tm == nil {
			return nil
		}
		return at(micro(*tm))
	}
	for _, want := range rows {
		got, err := db.Projection().Get(ctx, want.Key)
		if err != nil {
			t.Fatal(err)
		}
		want.FirstEventAt, want.LastEventAt = micro(want.FirstEventAt), micro(want.LastEventAt)
		want.CreatedAt, want.DeletedAt = microp(want.CreatedAt), microp(want.DeletedAt)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("row %v (-want +got):\n%s", want.Key, diff)
		}
	}
}
