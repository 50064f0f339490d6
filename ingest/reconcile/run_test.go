package reconcile_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
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

// TestDecodeBoundsProblems: a refusal names the broken rules, and its
// answer stays small whatever the body. An 8 MB observation of 110,000
// broken resources was answered with 330,000 problems (57 MB, seven times
// the body); the answer lists the first [reconcile.MaxProblems] in
// document order (the count's own maximum first), then one problem saying
// how many more there are.
func TestDecodeBoundsProblems(t *testing.T) {
	for _, tc := range []struct {
		name   string
		broken int
		capped bool
	}{
		{"few problems, every one named", 5, false},
		{"many problems, the first named and the rest counted", reconcile.MaxResources + 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			b.WriteString(`{"platform":"openstack","observed_at":"2026-03-01T12:00:00Z","resources":[`)
			for i := range tc.broken {
				if i > 0 {
					b.WriteString(",")
				}
				b.WriteString(`{"resource_type":"t","resource_id":"` + strconv.Itoa(i) + `","project_id":"","state":"","size":1}`)
			}
			b.WriteString(`]}`)
			_, err := reconcile.Decode([]byte(b.String()))
			var ve *event.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Decode: %v, want a ValidationError", err)
			}
			got := ve.Problems
			want := 3 * tc.broken // project_id, state, size
			if tc.capped {
				want = reconcile.MaxProblems + 1
				if got[0].Member != "/resources" || got[0].Rule != event.RuleMaximum {
					t.Errorf("first problem %+v, want /resources maximum", got[0])
				}
				if last := got[len(got)-1]; last.Member != "" || last.Rule != event.RuleMaximum || !strings.Contains(last.Message, strconv.Itoa(3*tc.broken+1-reconcile.MaxProblems)+" more") {
					t.Errorf("last problem %+v, want the count of the problems left out", last)
				}
			}
			if len(got) != want {
				t.Errorf("%d problems, want %d", len(got), want)
			}
		})
	}
}
