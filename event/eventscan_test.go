package event

import (
	"reflect"
	"strings"
	"testing"
)

var eventSeeds = []string{
	`{"event_id":"e1","timestamp":"2026-03-01T12:00:00.123456789+02:00","event_type":"compute.instance.create.end","platform":"openstack","cloud":"eu1","resource_type":"instance","resource_id":"r1","project_id":"p1","source":"collector","payload":{"state":"active","size":{"vcpus":4},"provider":{"a":[1,2,{"b":null}]}}}`,
	` { "event_id" : "e1" , "timestamp" : "2026-03-01T12:00:00Z" , "payload" : { } } ` + "\n",
	`{}`, `{"event_id":"e1"}`, `{"event_id":"e1","event_id":"e2"}`, `{"Event_id":"e1"}`, `{"event_id":null}`,
	`{"event_id":1}`, `{"event_id":"a\u0041"}`, `{"event_id":"é"}`, `{"event_id":"a` + "\t" + `b"}`, `{"extra":"x"}`,
	`{"timestamp":"2026-03-01 12:00:00"}`, `{"timestamp":"2026-03-01T12:00:00"}`, `{"timestamp":null}`, `{"timestamp":"0001-01-01T00:00:00Z"}`,
	`{"timestamp":"9999-12-31T23:59:59-01:00"}`, `{"timestamp":"2026-03-01T12:00:60Z"}`, `{"timestamp":5}`,
	`{"payload":null}`, `{"payload":[]}`, `{"payload":{"x":1}}`, `{"payload":{"state":null}}`, `{"payload":{"state":"a","state":"b"}}`,
	`{"payload":{"size":{"a":1,"a":2}}}`, `{"payload":{"size":{"a":1}},"payload":{}}`, `{"event_id":"e1",}`, `{"event_id":"e1"}x`,
	`{"event_id":"e1"`, `[]`, `null`, `{"source":"reconciliation"}`, `{"source":"other"}`, `{"source":null}`,
	`{"event_id":"e1","cloud":"c","platform":"p","resource_type":"t","resource_id":"i","project_id":"j","event_type":"a.b"}`,
	`{"payload":{"provider":` + manyMembers(40, false) + `}}`, `{"payload":{"provider":` + manyMembers(40, true) + `}}`,
	`{"payload":{"provider":` + manyMembers(200, false) + `}}`, `{"payload":{"size":` + manyMembers(17, true) + `}}`,
	`{"payload":{"size":{"a":1}},"payload":{"size":{"a":1}}}`, `{"event_id":"` + strings.Repeat("x", 300) + `"}`,
}

// manyMembers is an object of n members named m0, m1, …; dup repeats the
// first name last.
func manyMembers(n int, dup bool) string {
	var sb strings.Builder
	sb.WriteByte('{')
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		name := "m" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if dup && i == n-1 {
			name = "ma" + "a"
		}
		sb.WriteString(`"` + name + `":` + `{"v":[1,"s",true]}`)
	}
	sb.WriteByte('}')
	return sb.String()
}

// checkEventScan: whatever scanEvent takes, the full decoder decodes to
// the same wireEvent, and the values do not alias the input.
func checkEventScan(t *testing.T, in string) bool {
	t.Helper()
	want, werr := unmarshalWire([]byte(in))
	if werr == nil && want.Payload.Unknown != nil {
		raw, err := payloadMember([]byte(in))
		if err == nil {
			want.Payload.Unknown, err = rawUnknown(raw)
		}
		if err != nil {
			werr = err
		}
	}
	var got wireEvent
	b := []byte(in)
	if !scanEvent(b, &got) {
		return false
	}
	if werr != nil {
		t.Fatalf("%q: the fast path accepts what the full decoder refuses: %v", in, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\nfast %#v\nfull %#v", in, got, want)
	}
	for i := range b {
		b[i] = 'x'
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: the fast path's values alias its input", in)
	}
	return true
}

func TestScanEvent(t *testing.T) {
	fast := 0
	for _, in := range eventSeeds {
		if checkEventScan(t, in) {
			fast++
		}
	}
	if fast < 8 {
		t.Fatalf("the fast path took %d seeds", fast)
	}
	for _, in := range []string{eventSeeds[0], eventSeeds[1], `{"payload":{"provider":` + manyMembers(40, false) + `}}`} {
		var w wireEvent
		if !scanEvent([]byte(in), &w) {
			t.Errorf("%s: not taken by the fast path", in)
		}
	}
	for _, in := range []string{`{"payload":{"provider":` + manyMembers(40, true) + `}}`, `{"payload":{"size":` + manyMembers(17, true) + `}}`} {
		var w wireEvent
		if scanEvent([]byte(in), &w) {
			t.Errorf("%s: a duplicate member taken by the fast path", in)
		}
	}
}

// TestDecodeFastSlow: Decode answers the same, event or error, whether or
// not the fast path takes the item.
func TestDecodeFastSlow(t *testing.T) {
	for _, in := range eventSeeds {
		got, gerr := Decode([]byte(in))
		// The same item with a member the fast path never takes (an
		// escaped name of a known member) goes the full decoder's way.
		slow := strings.Replace(in, `"event_id"`, `"event\u005fid"`, 1)
		if slow == in {
			continue
		}
		want, werr := Decode([]byte(slow))
		if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
			t.Fatalf("%q: errors differ: %v / %v", in, gerr, werr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: events differ:\n%#v\n%#v", in, got, want)
		}
	}
}

// FuzzScanEvent checks that the fast path decodes exactly what the full
// decoder does, and accepts nothing it refuses.
func FuzzScanEvent(f *testing.F) {
	for _, s := range eventSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) { checkEventScan(t, in) })
}
