package event_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/tallyhq/tally/event"
)

// Decode reads one item strictly: the timestamp, given at +02:00 with
// nanoseconds, comes out in UTC truncated to microseconds, and the payload
// keeps its members and numbers exactly.
func ExampleDecode() {
	ev, err := event.Decode([]byte(`{
		"event_id": "8f3c9e1a-4b2d-4c6e-9f0a-1b2c3d4e5f60",
		"timestamp": "2026-03-01T14:00:00.123456789+02:00",
		"event_type": "compute.instance.create.end",
		"platform": "openstack",
		"cloud": "os-prod-eu1",
		"resource_type": "instance",
		"resource_id": "i-1",
		"project_id": "p-1",
		"payload": {
			"state": "active",
			"size": {"vcpus": 2, "ram_gb": 4, "disk_gb": 12345678901234567890, "flavor": "m1.medium"},
			"host": "cmp-eu1-042"
		}
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ev.Timestamp.Format(time.RFC3339Nano))
	fmt.Println(ev.Payload.State, event.Categorize(ev.EventType))
	fmt.Println(string(ev.Payload.Size))
	fmt.Println(string(ev.Payload.Unknown))

	// A member the spec does not name is refused, naming it.
	_, err = event.Decode([]byte(`{"event_id":"e-1","Timestamp":"2026-03-01T12:00:00Z"}`))
	fmt.Println(err)

	// So is a naive OpenStack timestamp.
	_, err = event.Decode([]byte(`{"timestamp":"2012-05-08 20:23:48.028195"}`))
	fmt.Println(err)
	// Output:
	// 2026-03-01T12:00:00.123456Z
	// active create
	// {"vcpus": 2, "ram_gb": 4, "disk_gb": 12345678901234567890, "flavor": "m1.medium"}
	// {"host":"cmp-eu1-042"}
	// /Timestamp: additionalProperties: is not a member of the canonical event (names are case-sensitive; extension data belongs in payload)
	// /timestamp: format: must be an RFC 3339 date-time with Z or an offset, such as 2026-03-01T12:00:00Z (a T must follow the date, not " ")
}

// Validate reports every rule an event breaks at once, in the order of the
// members, each with its JSON path, rule and message.
func ExampleValidate() {
	ev := event.Event{
		EventID:      "e-1",
		Timestamp:    time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		EventType:    "Compute.Instance.Create",
		Platform:     "openstack",
		Cloud:        "meta",
		ResourceType: "instance",
		ResourceID:   "i-1",
		ProjectID:    "",
		Source:       "push",
		Payload:      event.PayloadEnvelope{State: event.NullState()},
	}
	err := event.Validate(&ev)

	var invalid *event.ValidationError
	if errors.As(err, &invalid) {
		for _, p := range invalid.Problems {
			fmt.Printf("%s [%s] %s\n", p.Member, p.Rule, p.Message)
		}
	}
	fmt.Println(errors.Is(err, event.ErrInvalid))

	ev.EventType, ev.Cloud, ev.ProjectID, ev.Source = "compute.instance.delete.end", "os-prod-eu1", "p-1", ""
	fmt.Println(event.Validate(&ev)) // a delete needs no state
	// Output:
	// /event_type [pattern] "Compute.Instance.Create" must be two or more dot-separated parts of a-z, 0-9 and _ (^[a-z0-9_]+(\.[a-z0-9_]+)+$)
	// /cloud [reserved] must not be "meta": meta and partner name the virtual projects, which own no resources
	// /project_id [required] is required (1 to 512 bytes)
	// /source [enum] "push" must be collector or reconciliation, or left out
	// /payload/state [required] is required on every event except a delete
	// true
	// <nil>
}

// Categorize reads the category from the whole dot-separated parts of
// event_type.
func ExampleCategorize() {
	for _, t := range []string{
		"compute.instance.create.end",
		"compute.instance.delete.end",
		"compute.instance.resize.confirm.end",
		"x.delete_on_termination",
		"sync.create",
		"sync.update",
		"sync.delete",
	} {
		fmt.Println(t, event.Categorize(t))
	}
	// Output:
	// compute.instance.create.end create
	// compute.instance.delete.end delete
	// compute.instance.resize.confirm.end update
	// x.delete_on_termination update
	// sync.create create
	// sync.update update
	// sync.delete delete
}

// DeterministicID gives the same id for the same instant at any offset.
func ExampleDeterministicID() {
	utc := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	plus2 := time.Date(2026, 3, 1, 14, 0, 0, 0, time.FixedZone("", 2*3600))

	fmt.Println(event.DeterministicID("openstack", "os-prod-eu1", "i-1", "compute.instance.create.end", utc))
	fmt.Println(event.DeterministicID("openstack", "os-prod-eu1", "i-1", "compute.instance.create.end", plus2))
	// Output:
	// openstack-56e3f54aefd66cdc729b86ddc7ad894b8010095a2edbde2881319b1de7522d4f
	// openstack-56e3f54aefd66cdc729b86ddc7ad894b8010095a2edbde2881319b1de7522d4f
}

// DecodeValidate is the one call for untrusted bytes: decoding and every rule.
func ExampleDecodeValidate() {
	_, err := event.DecodeValidate([]byte(`{"event_id":"e1","timestamp":"2026-03-01T12:00:00Z","event_type":"volume.create.end",
		"platform":"meta","cloud":"c1","resource_type":"volume","resource_id":"v1","project_id":"p1","payload":{"state":"available"}}`))
	fmt.Println(err)
	// Output:
	// /platform: reserved: must not be "meta": meta and partner name the virtual projects, which own no resources; /payload/size: required: is required on a create (the full size object)
}

// A collector that builds an event in Go normalizes its timestamp before
// computing the deterministic id: the server decodes the event's timestamp
// to UTC microseconds, so an id hashed from the raw nanosecond time would
// not be the id of the stored event.
func ExampleNormalize() {
	seen := time.Date(2026, 3, 1, 14, 0, 0, 123456789, time.FixedZone("CEST", 2*60*60))
	ts := event.Normalize(seen)
	fmt.Println(ts.Format(time.RFC3339Nano))

	id := event.DeterministicID("openstack", "os-prod-eu1", "i-1", "compute.instance.create.end", ts)
	fmt.Println(id == event.DeterministicID("openstack", "os-prod-eu1", "i-1", "compute.instance.create.end", seen))

	// The server reads the id back with the same instant.
	ev, _ := event.Decode([]byte(`{"event_id":"` + id + `","timestamp":"2026-03-01T14:00:00.123456789+02:00"}`))
	fmt.Println(ev.Timestamp.Equal(ts), event.DeterministicID("openstack", "os-prod-eu1", "i-1", "compute.instance.create.end", ev.Timestamp) == id)
	// Output:
	// 2026-03-01T12:00:00.123456Z
	// false
	// true true
}
