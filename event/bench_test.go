package event_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/tallyhq/tally/event"
)

// batchSize is the largest batch POST /api/v1/events takes
// (canonical-event.md, Delivery).
const batchSize = 1000

// openStackBatch builds batchSize realistic canonical events as a collector
// maps OpenStack notifications: instances, volumes, floating IPs and images,
// creates, updates and deletes, each with the size object its resource type
// registers and provider data of the kind oslo notifications carry (about 1
// to 2 KB per event). It returns each item's JSON and the batch total.
func openStackBatch(tb testing.TB) (items [][]byte, total int) {
	tb.Helper()
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	items = make([][]byte, batchSize)
	for i := range items {
		ts := base.Add(time.Duration(i) * 1733 * time.Millisecond).Add(time.Duration(i%1000) * time.Microsecond)
		project := fmt.Sprintf("9a8b7c6d5e4f4031%016x", 0x2233445566778899+i%37)
		var resType, resID, evType, state string
		var size, provider string
		switch i % 4 {
		case 0, 1: // instances
			resType = "instance"
			resID = fmt.Sprintf("3f2a6b1e-8c1d-4e7a-9b5f-%012x", i)
			evType = [...]string{"compute.instance.create.end", "compute.instance.update", "compute.instance.resize.confirm.end", "compute.instance.power_off.end", "compute.instance.delete.end"}[i%5]
			state = [...]string{"active", "active", "active", "stopped", "deleted"}[i%5]
			size = fmt.Sprintf(`{"vcpus":%d,"ram_gb":%d,"disk_gb":%d,"flavor":"m1.%s"}`, 2<<(i%3), 4<<(i%3), 40<<(i%3), [...]string{"small", "medium", "large"}[i%3])
			provider = fmt.Sprintf(`{"oslo_event_type":%q,"oslo_message_id":"%08x-1d2e-4f3a-8b9c-0d1e2f3a4b5c","publisher_id":"nova-compute:cmp-eu1-%03d",`+
				`"tenant_id":%q,"user_id":"5c6d7e8f90a1b2c3d4e5f60718293a4b","instance_id":%q,"display_name":"web-%04d.prod.example.com",`+
				`"host":"cmp-eu1-%03d","node":"cmp-eu1-%03d.cloud.example.net","availability_zone":"eu1-az%d","instance_type":"m1.%s","instance_type_id":%d,`+
				`"memory_mb":%d,"disk_gb":%d,"root_gb":%d,"ephemeral_gb":0,"vcpus":%d,"architecture":"x86_64","os_type":"linux",`+
				`"image_ref_url":"https://glance.eu1.example.net/images/6b5a4c3d-2e1f-4a0b-9c8d-7e6f5a4b3c2d","kernel_id":"","ramdisk_id":"",`+
				`"created_at":"2026-02-28 09:%02d:%02d+00:00","launched_at":"2026-02-28T09:%02d:%02d.000000","terminated_at":"","deleted_at":"",`+
				`"state":%q,"state_description":"","progress":"","cell_name":"","access_ip_v4":null,"access_ip_v6":null,`+
				`"fixed_ips":[{"address":"10.%d.%d.%d","floating_ips":[],"label":"private","meta":{},"type":"fixed","version":4,"vif_mac":"fa:16:3e:%02x:%02x:%02x"}],`+
				`"metadata":{"role":"web","env":"prod","owner":"team-%d"},"image_meta":{"base_image_ref":"6b5a4c3d-2e1f-4a0b-9c8d-7e6f5a4b3c2d","container_format":"bare","disk_format":"qcow2","hw_disk_bus":"virtio","hw_vif_model":"virtio","min_disk":"20","min_ram":"0"},`+
				`"bandwidth":{},"audit_period_beginning":"2026-03-01T00:00:00.000000","audit_period_ending":"2026-03-01T12:00:00.000000"}`,
				evType, i, i%128, project, resID, i, i%128, i%128, i%3+1, [...]string{"small", "medium", "large"}[i%3], i%3+2,
				4096<<(i%3), 40<<(i%3), 40<<(i%3), 2<<(i%3), i%60, i%60, i%60, i%60, state,
				i%256, (i/256)%256, i%200+10, i%256, (i/7)%256, (i/13)%256, i%9)
		case 2: // volumes
			resType = "volume"
			resID = fmt.Sprintf("9d8c7b6a-5f4e-4d3c-2b1a-%012x", i)
			evType = [...]string{"volume.create.end", "volume.attach.end", "volume.resize.end", "volume.delete.end"}[i%4/2+(i/4)%2*2]
			state = [...]string{"available", "in-use", "available", "deleted"}[i%4/2+(i/4)%2*2]
			size = fmt.Sprintf(`{"size_gb":%d,"type":"%s"}`, 10*(i%50+1), [...]string{"ssd", "hdd", "7a8b9c0d-1e2f-4a3b-8c4d-5e6f70819203"}[i%3])
			provider = fmt.Sprintf(`{"oslo_event_type":%q,"oslo_message_id":"%08x-7a6b-4c5d-9e8f-a0b1c2d3e4f5","publisher_id":"volume.cinder-volume-eu1@ceph#ceph",`+
				`"tenant_id":%q,"user_id":"5c6d7e8f90a1b2c3d4e5f60718293a4b","volume_id":%q,"display_name":"data-%04d","size":%d,`+
				`"volume_type":"7a8b9c0d-1e2f-4a3b-8c4d-5e6f70819203","availability_zone":"eu1-az%d","host":"cinder-volume-eu1@ceph#ceph",`+
				`"status":%q,"created_at":"2026-02-28T10:%02d:%02d+00:00","launched_at":"2026-02-28T10:%02d:%02d+00:00","replication_status":null,"snapshot_id":null,`+
				`"glance_metadata":[],"metadata":{"attached_mode":"rw","readonly":"False"},`+
				`"volume_attachment":[{"id":"c1d2e3f4-a5b6-4c7d-8e9f-%012x","instance_uuid":"3f2a6b1e-8c1d-4e7a-9b5f-%012x","attach_status":"attached","attached_at":"2026-02-28T10:00:00.000000","mountpoint":"/dev/vdb","attach_mode":"rw","connector":{"initiator":"iqn.1993-08.org.debian:01:%x","multipath":false,"platform":"x86_64","os_type":"linux","host":"cmp-eu1-%03d"}}]}`,
				evType, i, project, resID, i, 10*(i%50+1), i%3+1, state, i%60, i%60, i%60, i%60, i, i-2, i*7919, i%128)
		case 3: // floating IPs and images
			if i%8 == 3 {
				resType = "floating_ip"
				resID = fmt.Sprintf("a1b2c3d4-e5f6-4a7b-8c9d-%012x", i)
				evType = [...]string{"floatingip.create.end", "floatingip.update.end", "floatingip.delete.end"}[i%3]
				state = [...]string{"DOWN", "ACTIVE", "deleted"}[i%3]
				size = `{"ip_version":4}`
				provider = fmt.Sprintf(`{"oslo_event_type":%q,"oslo_message_id":"%08x-3c4d-4e5f-a6b7-c8d9e0f1a2b3","publisher_id":"network.neutron-server-eu1",`+
					`"floatingip":{"id":%q,"tenant_id":%q,"project_id":%q,"floating_ip_address":"203.0.113.%d","floating_network_id":"0e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b",`+
					`"router_id":"b2c3d4e5-f6a7-4b8c-9d0e-1f2a3b4c5d6e","port_id":"d4e5f6a7-b8c9-4d0e-1f2a-3b4c5d6e7f8a","fixed_ip_address":"10.0.%d.%d","status":%q,`+
					`"description":"","qos_policy_id":null,"port_details":{"name":"","network_id":"f6a7b8c9-d0e1-4f2a-3b4c-5d6e7f8a9b0c","mac_address":"fa:16:3e:%02x:%02x:%02x","admin_state_up":true,"status":"ACTIVE","device_id":"3f2a6b1e-8c1d-4e7a-9b5f-%012x","device_owner":"compute:eu1-az1"},`+
					`"dns_domain":"","dns_name":"","port_forwardings":[],"tags":["prod","web"],"created_at":"2026-02-28T11:00:00Z","updated_at":"2026-03-01T12:00:00Z","revision_number":%d}}`,
					evType, i, resID, project, project, i%250+1, i%256, i%200, state, i%256, (i/3)%256, (i/5)%256, i-3, i%9+1)
			} else {
				resType = "image"
				resID = fmt.Sprintf("6b5a4c3d-2e1f-4a0b-9c8d-%012x", i)
				evType = [...]string{"image.create", "image.upload", "image.activate", "image.update", "image.delete"}[i%5]
				state = [...]string{"queued", "saving", "active", "active", "deleted"}[i%5]
				size = fmt.Sprintf(`{"size_gb":%d,"virtual_size_gb":%d}`, i%20+1, i%40+2)
				provider = fmt.Sprintf(`{"oslo_event_type":%q,"oslo_message_id":"%08x-9f8e-4d7c-b6a5-948372615049","publisher_id":"image.localhost",`+
					`"id":%q,"name":"ubuntu-24.04-server-cloudimg-amd64-%d","owner":%q,"status":%q,"visibility":"private","protected":false,`+
					`"checksum":"%032x","os_hash_algo":"sha512","os_hash_value":"%0128x","size":%d,"virtual_size":%d,`+
					`"container_format":"bare","disk_format":"qcow2","min_disk":0,"min_ram":0,"created_at":"2026-02-28T12:00:00Z","updated_at":"2026-03-01T12:00:00Z","deleted":false,"deleted_at":null,`+
					`"properties":{"os_distro":"ubuntu","os_version":"24.04","hw_disk_bus":"virtio","hw_scsi_model":"virtio-scsi","hw_qemu_guest_agent":"yes","architecture":"x86_64"},`+
					`"locations":[{"url":"rbd://b1c2d3e4-f5a6-4b7c-8d9e-0f1a2b3c4d5e/images/%s/snap","metadata":{"store":"ceph"}}],"tags":[]}`,
					evType, i, resID, i, project, state, i*104729, i*1299709, (i%20+1)<<30, (i%40+2)<<30, resID)
			}
		}
		id := fmt.Sprintf(`"%08x-1d2e-4f3a-8b9c-0d1e2f3a4b5c"`, i)
		src := `,"source":"collector"`
		if i%10 == 9 {
			evType = "sync.update"
			src = `,"source":"reconciliation"`
		}
		stateJSON := fmt.Sprintf("%q", state)
		if event.Categorize(evType) == event.CategoryDelete {
			stateJSON = "null"
		}
		items[i] = fmt.Appendf(nil,
			`{"event_id":%s,"timestamp":%q,"event_type":%q,"platform":"openstack","cloud":"os-prod-eu1","resource_type":%q,"resource_id":%q,"project_id":%q%s,`+
				`"payload":{"state":%s,"size":%s,"provider":%s}}`,
			id, ts.Format(time.RFC3339Nano), evType, resType, resID, project, src, stateJSON, size, provider)
		total += len(items[i])
	}
	// Every item is a valid event: the benchmark measures the path an
	// accepted event takes.
	for i, it := range items {
		ev, err := event.Decode(it)
		if err == nil {
			err = event.Validate(&ev)
		}
		if err != nil {
			tb.Fatalf("item %d: %v\n%s", i, err, it)
		}
	}
	return items, total
}

// reportPerEvent reports events/s and allocs/event for b.N batches of
// batchSize events, given the allocation count before the loop.
func reportPerEvent(b *testing.B, mallocsBefore uint64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	events := float64(b.N * batchSize)
	b.ReportMetric(events/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(ms.Mallocs-mallocsBefore)/events, "allocs/event")
}

// BenchmarkDecodeValidate decodes and validates a batch of 1000 realistic
// OpenStack events with event.DecodeValidate, as ingestion does.
// One op is the whole batch.
//
//	go test -run='^$' -bench=. -benchmem ./event
func BenchmarkDecodeValidate(b *testing.B) {
	items, total := openStackBatch(b)
	b.SetBytes(int64(total))
	b.ReportAllocs()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ResetTimer()
	for b.Loop() {
		for _, it := range items {
			if _, err := event.DecodeValidate(it); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	reportPerEvent(b, ms.Mallocs)
}

// baselineEvent has the ten members of the canonical event for plain
// encoding/json (v1), which is lenient where Decode is strict: names match
// case-insensitively, unknown members and duplicates pass silently, invalid
// UTF-8 is replaced.
type baselineEvent struct {
	EventID      string    `json:"event_id"`
	Timestamp    time.Time `json:"timestamp"`
	EventType    string    `json:"event_type"`
	Platform     string    `json:"platform"`
	Cloud        string    `json:"cloud"`
	ResourceType string    `json:"resource_type"`
	ResourceID   string    `json:"resource_id"`
	ProjectID    string    `json:"project_id"`
	Source       string    `json:"source"`
	Payload      json.RawMessage
}

// baselineEventMap is baselineEvent with the payload read into
// map[string]any, which rounds every number through float64.
type baselineEventMap struct {
	EventID      string         `json:"event_id"`
	Timestamp    time.Time      `json:"timestamp"`
	EventType    string         `json:"event_type"`
	Platform     string         `json:"platform"`
	Cloud        string         `json:"cloud"`
	ResourceType string         `json:"resource_type"`
	ResourceID   string         `json:"resource_id"`
	ProjectID    string         `json:"project_id"`
	Source       string         `json:"source"`
	Payload      map[string]any `json:"payload"`
}

// BenchmarkBaselineEncodingJSON is the baseline of BenchmarkDecodeValidate:
// plain encoding/json Unmarshal of the same bytes into a struct with the
// same ten fields, without any validation. "payload=raw" keeps the payload
// as json.RawMessage (the least work encoding/json can do; the figure the
// target is measured against); "payload=map" reads it into map[string]any.
func BenchmarkBaselineEncodingJSON(b *testing.B) {
	items, total := openStackBatch(b)
	b.Run("payload=raw", func(b *testing.B) {
		b.SetBytes(int64(total))
		b.ReportAllocs()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ResetTimer()
		for b.Loop() {
			for _, it := range items {
				var ev baselineEvent
				if err := json.Unmarshal(it, &ev); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StopTimer()
		reportPerEvent(b, ms.Mallocs)
	})
	b.Run("payload=map", func(b *testing.B) {
		b.SetBytes(int64(total))
		b.ReportAllocs()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ResetTimer()
		for b.Loop() {
			for _, it := range items {
				var ev baselineEventMap
				if err := json.Unmarshal(it, &ev); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StopTimer()
		reportPerEvent(b, ms.Mallocs)
	})
}

// TestBenchmarkBatch keeps the benchmark's batch honest: 1000 valid events
// of about 1 to 2 KB each.
func TestBenchmarkBatch(t *testing.T) {
	items, total := openStackBatch(t)
	minLen, maxLen := len(items[0]), len(items[0])
	for _, it := range items {
		minLen, maxLen = min(minLen, len(it)), max(maxLen, len(it))
	}
	t.Logf("%d events, %d bytes, %d to %d bytes each, %d on average", len(items), total, minLen, maxLen, total/len(items))
	if avg := total / len(items); avg < 1000 || avg > 2200 {
		t.Errorf("average event size %d bytes, want about 1 to 2 KB", avg)
	}
}
