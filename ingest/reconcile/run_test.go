package reconcile_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/reconcile"
	"github.com/tallyhq/tally/store/memstore"
)

// TestRunRefusesFutureObservation (docs/reconciliation.md, observed_at:
// "when the listings were taken"): an observation cannot have been taken
// after the server's now, beyond the clock skew allowed. A run that
// accepted one would date its creates, updates and deletes there: every
// resource it touched would then be skipped by every later run and outlive
// every collector event, and a delete of 9999 bills the resource until
// then. It is refused as /observed_at (maximum) and nothing is written.
func TestRunRefusesFutureObservation(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		observedAt time.Time
		refused    bool
	}{
		{"now", now, false},
		{"within the clock skew allowed", now.Add(reconcile.MaxClockSkew), false},
		{"past the clock skew allowed", now.Add(reconcile.MaxClockSkew + time.Microsecond), true},
		{"year 9999", time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := memstore.New(memstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ing, err := ingest.New(db.Ingest(), ingest.Options{Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			rec, err := reconcile.New(ing, db.Projection(), db.Reconcile(), reconcile.Options{Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			obs := reconcile.Observation{Platform: "openstack", ObservedAt: tc.observedAt, CompleteTypes: []string{"instance"},
				Resources: []reconcile.Resource{{ResourceType: "instance", ResourceID: "vm-1", ProjectID: "p1", State: "active",
					Size: jsontext.Value(`{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"}`)}}}
			_, err = rec.Run(context.Background(), "t", "c1", obs)
			var got []event.Problem
			if ve := (*event.ValidationError)(nil); errors.As(err, &ve) {
				got = ve.Problems
			} else if err != nil {
				t.Fatal(err)
			}
			var want []event.Problem
			if tc.refused {
				want = []event.Problem{{Member: "/observed_at", Rule: event.RuleMaximum}}
			}
			if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b event.Problem) bool { return a.Member == b.Member && a.Rule == b.Rule })); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			page, err := rec.Runs(context.Background(), reconcile.RunFilter{})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(page.Items); (n == 0) != tc.refused {
				t.Errorf("%d runs recorded; refused %v", n, tc.refused)
			}
		})
	}
}
