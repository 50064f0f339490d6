package oslo_test

import (
	"testing"

	"github.com/tallyhq/tally/examples/openstack-collector/oslo"
)

// BenchmarkMap maps the 30 real notifications per iteration and reports
// notifications per second.
func BenchmarkMap(b *testing.B) {
	lines := readCorpus(b)
	m := oslo.Mapper{Cloud: "os-bench"}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for _, l := range lines {
			_, _ = m.Map(l)
		}
	}
	b.ReportMetric(float64(b.N*len(lines))/b.Elapsed().Seconds(), "notifications/s")
}
