package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/reconcile"
)

// benchSyncSize is the number of instances of the benchmark's observation.
const benchSyncSize = 5000

// benchObservation lists n instances of cloud c1, half in state active and
// half in state shutoff when flip is set, at observedAt.
func benchObservation(n int, flip bool, observedAt time.Time) reconcile.Observation {
	obs := reconcile.Observation{Platform: "openstack", ObservedAt: observedAt, CompleteTypes: []string{"instance"},
		Resources: make([]reconcile.Resource, n)}
	size := jsontext.Value(`{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"}`)
	for i := range obs.Resources {
		state := "active"
		if flip && i%2 == 0 {
			state = "shutoff"
		}
		obs.Resources[i] = reconcile.Resource{ResourceType: "instance", ResourceID: fmt.Sprintf("vm-%06d", i),
			ProjectID: "p1", State: state, Size: size}
	}
	return obs
}

// benchSync is Bench's Sync group, runs of a 5000-instance cloud through
// [reconcile.Service.Run]: fresh (every instance new: 5000 sync.create),
// unchanged (the same observation again: only the comparison) and drift
// (every run flips half the states: 2500 sync.update); reports
// resources/s.
func benchSync(b *testing.B, open func(tb testing.TB) Stores) {
	ctx := context.Background()
	run := func(b *testing.B, rec *reconcile.Service, obs reconcile.Observation) reconcile.Outcome {
		out, err := rec.Run(ctx, "bench", "c1", obs)
		if err != nil {
			b.Fatal(err)
		}
		return out
	}
	newRec := func(b *testing.B) *reconcile.Service {
		st := open(b)
		ing, err := ingest.New(st.Ingest, ingest.Options{})
		if err != nil {
			b.Fatal(err)
		}
		rec, err := reconcile.New(ing, st.Projection, st.Reconcile, reconcile.Options{})
		if err != nil {
			b.Fatal(err)
		}
		return rec
	}
	b.Run("fresh", func(b *testing.B) {
		rec := newRec(b)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			b.StopTimer()
			obs := benchObservation(benchSyncSize, false, t0.Add(time.Duration(i)*time.Hour))
			for j := range obs.Resources {
				obs.Resources[j].ResourceID = fmt.Sprintf("vm-%d-%06d", i, j)
			}
			obs.CompleteTypes = nil
			i++
			b.StartTimer()
			if out := run(b, rec, obs); out.Created != benchSyncSize {
				b.Fatalf("created %d", out.Created)
			}
		}
		b.ReportMetric(float64(b.N*benchSyncSize)/b.Elapsed().Seconds(), "resources/s")
	})
	b.Run("unchanged", func(b *testing.B) {
		rec := newRec(b)
		obs := benchObservation(benchSyncSize, false, t0)
		run(b, rec, obs)
		b.ReportAllocs()
		for b.Loop() {
			if out := run(b, rec, obs); out.Unchanged != benchSyncSize {
				b.Fatalf("unchanged %d", out.Unchanged)
			}
		}
		b.ReportMetric(float64(b.N*benchSyncSize)/b.Elapsed().Seconds(), "resources/s")
	})
	b.Run("drift", func(b *testing.B) {
		rec := newRec(b)
		run(b, rec, benchObservation(benchSyncSize, false, t0))
		b.ReportAllocs()
		i := 1
		for b.Loop() {
			obs := benchObservation(benchSyncSize, i%2 == 1, t0.Add(time.Duration(i)*time.Minute))
			i++
			if out := run(b, rec, obs); out.Updated != benchSyncSize/2 {
				b.Fatalf("updated %d", out.Updated)
			}
		}
		b.ReportMetric(float64(b.N*benchSyncSize)/b.Elapsed().Seconds(), "resources/s")
	})
}
