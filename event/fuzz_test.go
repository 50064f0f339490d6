package event_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/tallyhq/tally/event"
)

// FuzzDecode: Decode never panics; whatever it accepts encodes, and the
// encoding decodes to an equal event that encodes to the same bytes; a
// refusal is an *event.ValidationError whose paths are valid UTF-8 without NUL.
// Validate never panics on a decoded event and judges both alike.
//
//	go test -run='^$' -fuzz=FuzzDecode -fuzztime=60s ./event
func FuzzDecode(f *testing.F) {
	ins, _ := filepath.Glob(filepath.Join("testdata", "roundtrip", "*.json"))
	for _, in := range ins {
		b, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		item(),
		item("timestamp", `"2026-03-01T14:00:00.123456789+02:00"`),
		item("timestamp", `"9999-12-31T23:59:59-01:00"`),
		item("timestamp", `"2012-05-08 20:23:48.028195"`),
		item("payload", `{"state":null,"size":{"a":12345678901234567890},"provider":{},"x":[0.1,1e400]}`),
		item("payload", `{"state":"","p":"C:\\u0000"}`),
		item("payload", `{"state":"a\u0000"}`),
		item("payload", `{"a":{"b":1,"b":2}}`),
		item("Event_ID", `"x"`),
		item("event_type", `"a.b"`, "source", `"reconciliation"`),
		`{"event_id":"\ud800"}`,
		"{\"event_id\":\"\xff\"}",
		"\x00",
		`[]`, `null`, `{}`, `{"payload":null}`, `{} {}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := event.Decode(data)
		// DecodeValidate skips only checks Decode has made: it answers
		// exactly what Decode then Validate answer.
		want := err
		if want == nil {
			want = event.Validate(&ev)
		}
		if _, got := event.DecodeValidate(data); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("DecodeValidate: %v; Decode then Validate: %v", got, want)
		}
		if err != nil {
			var e *event.ValidationError
			if !errors.As(err, &e) || !errors.Is(err, event.ErrInvalid) || len(e.Problems) != 1 {
				t.Fatalf("Decode error %#v is not one problem in an *event.ValidationError", err)
			}
			for _, p := range e.Problems {
				if !utf8.ValidString(p.Member) || strings.IndexByte(p.Member, 0) >= 0 {
					t.Fatalf("problem path %q is not valid text", p.Member)
				}
				if p.Rule == "" || p.Message == "" {
					t.Fatalf("problem without a rule or message: %#v", p)
				}
			}
			return
		}
		if loc := ev.Timestamp.Location(); loc != time.UTC {
			t.Fatalf("timestamp in %v, want UTC", loc)
		}
		if ev.Timestamp.Nanosecond()%1000 != 0 {
			t.Fatalf("timestamp %v not truncated to microseconds", ev.Timestamp)
		}
		verr := event.Validate(&ev)

		b, err := ev.MarshalJSON()
		if err != nil {
			t.Fatalf("MarshalJSON of a decoded event: %v", err)
		}
		ev2, err := event.Decode(b)
		if err != nil {
			t.Fatalf("Decode(MarshalJSON(Decode(data))) = %v\ndata: %q\nenc:  %q", err, data, b)
		}
		if diff := cmp.Diff(ev, ev2, cmpEventJSON); diff != "" {
			t.Fatalf("decode → encode → decode changed the event (-first +second):\n%s", diff)
		}
		b2, err := ev2.MarshalJSON()
		if err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("encoding is not idempotent (%v):\n%s\n%s", err, b, b2)
		}
		if diff := cmp.Diff(problemsOf(verr), problemsOf(event.Validate(&ev2))); diff != "" {
			t.Fatalf("Validate judges the round-tripped event differently (-first +second):\n%s", diff)
		}
	})
}

func problemsOf(err error) []event.Problem {
	var e *event.ValidationError
	if errors.As(err, &e) {
		return e.Problems
	}
	if err != nil {
		return []event.Problem{{Message: "not an *event.ValidationError: " + err.Error()}}
	}
	return nil
}

// FuzzDeterministicID: DeterministicID never panics, gives the platform, a
// hyphen and 64 lower-case hex digits, and the same id for the same instant
// written at any offset.
//
//	go test -run='^$' -fuzz=FuzzDeterministicID -fuzztime=60s ./event
func FuzzDeterministicID(f *testing.F) {
	f.Add("openstack", "os-prod-eu1", "i-1", "compute.instance.create.end", int64(1772366400), int64(0), 7200)
	f.Add("openstack", "c", "v-9", "volume.create.end", int64(1772366400), int64(500000000), -19800)
	f.Add("", "", "", "", int64(0), int64(0), 0)
	f.Add("p€", "c:d", "r:", ":x", int64(-62135596800), int64(1), 50400)
	f.Add("p", "c", "r", "a.b", int64(253402300799), int64(999999999), -50400)
	f.Fuzz(func(t *testing.T, platform, cloud, resourceID, eventType string, sec, nsec int64, offset int) {
		ts := time.Unix(sec, nsec).UTC()
		id := event.DeterministicID(platform, cloud, resourceID, eventType, ts)
		hexPart, ok := strings.CutPrefix(id, platform+"-")
		if !ok {
			t.Fatalf("id %q does not start with %q", id, platform+"-")
		}
		if len(hexPart) != 64 || strings.Trim(hexPart, "0123456789abcdef") != "" {
			t.Fatalf("id %q does not end in 64 lower-case hex digits", id)
		}
		zone := time.FixedZone("", offset%(26*3600))
		if other := event.DeterministicID(platform, cloud, resourceID, eventType, ts.In(zone)); other != id {
			t.Fatalf("same instant at offset %ds: %s, want %s", offset%(26*3600), other, id)
		}
		if other := event.DeterministicID(platform, cloud, resourceID, eventType, ts.Local()); other != id {
			t.Fatalf("same instant in time.Local: %s, want %s", other, id)
		}
	})
}
