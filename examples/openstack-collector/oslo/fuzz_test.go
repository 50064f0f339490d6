package oslo_test

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/examples/openstack-collector/oslo"
)

// FuzzMap feeds arbitrary lines to the parser and mapper. It never panics;
// every result is either an event that passes event.Validate and survives
// the strict decoder byte for byte, or a reported error (unmappable or
// invalid). Seeds: the 30 real notifications when present, and a few
// edge cases.
func FuzzMap(f *testing.F) {
	if p := corpusPathOrEmpty(); p != "" {
		if b, err := os.ReadFile(p); err == nil {
			for line := range bytes.SplitSeq(b, []byte("\n")) {
				f.Add(line)
			}
		}
	}
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `{"event_type":"instance.update","payload":{"nova_object.data":null}}`,
		`{"oslo.message":"{\"event_type\":\"image.update\",\"payload\":{}}"}`,
		`{"message_id":"m","timestamp":"2014-05-3107: 19: 43.463101","event_type":"floatingip.update.start","payload":{"id":"x"}}`,
		`{"message_id":"m","timestamp":"2020-01-02 03:04:05","event_type":"image.update","payload":{"id":"i","owner":"o","status":"a","size":1e400}}`,
		// Once took minutes: exact arithmetic on a huge exponent.
		`{"message_id":"m","timestamp":"2020-01-02 03:04:05","event_type":"image.update","payload":{"id":"i","owner":"o","status":"a","size":1e-9999999}}`,
		`{"message_id":"m","timestamp":"2020-01-02 03:04:05","event_type":"compute.instance.create.end","payload":{"instance_id":"i","tenant_id":"t","state":"a","vcpus":1,"memory_mb":1e-400,"root_gb":1,"instance_type":"f"}}`,
	} {
		f.Add([]byte(s))
	}
	m := oslo.Mapper{Cloud: "fuzz"}
	f.Fuzz(func(t *testing.T, line []byte) {
		ev, err := m.Map(line)
		if err != nil {
			if !errors.Is(err, oslo.ErrUnmappable) && !errors.Is(err, event.ErrInvalid) {
				t.Fatalf("error %v is neither unmappable nor invalid", err)
			}
			return
		}
		if err := event.Validate(&ev); err != nil {
			t.Fatalf("mapped event invalid: %v", err)
		}
		b, err := ev.MarshalJSON()
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		back, err := event.Decode(b)
		if err != nil {
			t.Fatalf("the server's decoder refuses %s: %v", b, err)
		}
		b2, err := back.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, b2) {
			t.Fatalf("round trip changed the event:\n%s\n%s", b, b2)
		}
	})
}
