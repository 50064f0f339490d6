package correlate_test

import (
	"strings"
	"testing"

	"github.com/tallyhq/tally/correlate"
)

// docs/decisions.md, CloudEvents HTTP binding: "Source + id identify a
// CloudEvent; a redelivery must replay." The key is the same for the same
// (source, id), differs when either differs (however the two split one
// string), and fits the idempotencyKey bound.
func TestCloudEventKey(t *testing.T) {
	k := correlate.CloudEventKey("meshery-server", "42")
	if k != correlate.CloudEventKey("meshery-server", "42") {
		t.Error("the key of one CloudEvent changed")
	}
	for _, other := range [][2]string{{"meshery-server", "43"}, {"meshery-ui", "42"}, {"meshery-server4", "2"}, {"meshery-serve", "r42"}} {
		if correlate.CloudEventKey(other[0], other[1]) == k {
			t.Errorf("source %q id %q has the key of meshery-server 42", other[0], other[1])
		}
	}
	long := correlate.CloudEventKey(strings.Repeat("s", 255), strings.Repeat("i", 10000))
	if len(k) != 83 || len(long) != 83 || !strings.HasPrefix(k, correlate.CloudEventKeyPrefix) || len(k) > correlate.MaxKeyLen {
		t.Errorf("keys %q and %q: want 83 characters starting %q", k, long, correlate.CloudEventKeyPrefix)
	}
}
