package server

import (
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

// tally_build_info is 1, labelled with the build NewMetrics was given, or
// the running binary's when none.
func TestBuildInfoGauge(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build Build
		want  map[string]string
	}{
		{"given", Build{Version: "v1.2.3", Revision: "abc+dirty", GoVersion: "go1.99"},
			map[string]string{"version": "v1.2.3", "revision": "abc+dirty", "goversion": "go1.99"}},
		{"read from the binary", Build{}, map[string]string{"version": ReadBuild("").Version, "revision": ReadBuild("").Revision, "goversion": runtime.Version()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			if _, err := NewMetrics(reg, MetricsOptions{Build: tc.build}); err != nil {
				t.Fatal(err)
			}
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]string
			var value float64
			for _, mf := range mfs {
				if mf.GetName() != "tally_build_info" {
					continue
				}
				if len(mf.GetMetric()) != 1 {
					t.Fatalf("tally_build_info has %d series, want 1", len(mf.GetMetric()))
				}
				got = map[string]string{}
				for _, l := range mf.GetMetric()[0].GetLabel() {
					got[l.GetName()] = l.GetValue()
				}
				value = mf.GetMetric()[0].GetGauge().GetValue()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			if value != 1 {
				t.Errorf("value %v, want 1", value)
			}
		})
	}
	if got := ReadBuild("v0.1.0"); got.Version != "v0.1.0" || got.GoVersion != runtime.Version() || got.Revision == "" {
		t.Errorf("ReadBuild(v0.1.0) = %+v", got)
	}
	if got, want := (Build{Version: "v1", Revision: "r", GoVersion: "go1"}).String(), "tallyd v1 (revision r, go1)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
