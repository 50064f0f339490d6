package event_test

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/tallyhq/tally/event"
)

// TestDeterministicID: "Where none exists it is the deterministic hash
// sha256("{cloud}:{resource_id}:{event_type}:{timestamp_iso}"), hex and
// prefixed with the platform name. ... the timestamp in it is rendered RFC
// 3339 UTC." The golden vector pins that rendering
// (time.RFC3339Nano: fraction only when non-zero, trailing zeros trimmed,
// always Z).
func TestDeterministicID(t *testing.T) {
	const golden = "openstack-56e3f54aefd66cdc729b86ddc7ad894b8010095a2edbde2881319b1de7522d4f"
	plus2 := time.FixedZone("+02:00", 2*3600)
	minus530 := time.FixedZone("-05:30", -(5*3600 + 30*60))
	noon := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	// hashOf spells out the preimage by hand, independently of time.Format.
	hashOf := func(platform, preimage string) string {
		sum := sha256.Sum256([]byte(preimage))
		return platform + "-" + hex.EncodeToString(sum[:])
	}
	tests := []struct {
		name                                 string
		platform, cloud, resourceID, evtType string
		ts                                   time.Time
		want                                 string
	}{
		{"golden vector", "openstack", "os-prod-eu1", "i-1", "compute.instance.create.end", noon, golden},
		{"the same instant at +02:00", "openstack", "os-prod-eu1", "i-1", "compute.instance.create.end",
			time.Date(2026, 3, 1, 14, 0, 0, 0, plus2), golden},
		{"the same instant at -05:30", "openstack", "os-prod-eu1", "i-1", "compute.instance.create.end",
			time.Date(2026, 3, 1, 6, 30, 0, 0, minus530), golden},
		{"the same instant in time.Local", "openstack", "os-prod-eu1", "i-1", "compute.instance.create.end",
			noon.Local(), golden},
		{"a monotonic reading does not matter", "openstack", "os-prod-eu1", "i-1", "compute.instance.create.end",
			noon.Round(0), golden},
		{"the preimage spelled out", "openstack", "os-prod-eu1", "i-1", "compute.instance.create.end", noon,
			hashOf("openstack", "os-prod-eu1:i-1:compute.instance.create.end:2026-03-01T12:00:00Z")},
		{"fraction with trailing zeros trimmed", "openstack", "c", "v-9", "volume.create.end",
			noon.Add(500 * time.Millisecond),
			hashOf("openstack", "c:v-9:volume.create.end:2026-03-01T12:00:00.5Z")},
		{"microseconds", "openstack", "c", "v-9", "volume.create.end",
			time.Date(2012, 5, 8, 20, 23, 48, 28195000, time.UTC),
			hashOf("openstack", "c:v-9:volume.create.end:2012-05-08T20:23:48.028195Z")},
		{"nanoseconds at an offset", "openstack", "c", "v-9", "volume.create.end",
			time.Date(2026, 3, 1, 14, 0, 0, 120, plus2),
			hashOf("openstack", "c:v-9:volume.create.end:2026-03-01T12:00:00.00000012Z")},
		{"another platform prefixes its own name", "vmware", "vc-1", "vm-7", "vm.power_on", noon,
			hashOf("vmware", "vc-1:vm-7:vm.power_on:2026-03-01T12:00:00Z")},
		{"multi-byte UTF-8 is hashed as bytes", "p", "c€", "r-é", "a.b", noon,
			hashOf("p", "c€:r-é:a.b:2026-03-01T12:00:00Z")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := event.DeterministicID(tt.platform, tt.cloud, tt.resourceID, tt.evtType, tt.ts)
			if got != tt.want {
				t.Errorf("DeterministicID = %s, want %s", got, tt.want)
			}
			if len(got) != len(tt.platform)+65 {
				t.Errorf("len = %d, want len(platform)+65 = %d", len(got), len(tt.platform)+65)
			}
		})
	}

	// Every member of the preimage changes the id.
	base := event.DeterministicID("openstack", "os-prod-eu1", "i-1", "compute.instance.create.end", noon)
	for name, id := range map[string]string{
		"platform":   event.DeterministicID("openstack2", "os-prod-eu1", "i-1", "compute.instance.create.end", noon),
		"cloud":      event.DeterministicID("openstack", "os-prod-eu2", "i-1", "compute.instance.create.end", noon),
		"resourceID": event.DeterministicID("openstack", "os-prod-eu1", "i-2", "compute.instance.create.end", noon),
		"eventType":  event.DeterministicID("openstack", "os-prod-eu1", "i-1", "compute.instance.delete.end", noon),
		"timestamp":  event.DeterministicID("openstack", "os-prod-eu1", "i-1", "compute.instance.create.end", noon.Add(time.Microsecond)),
	} {
		if id == base {
			t.Errorf("changing %s does not change the id", name)
		}
	}
}
