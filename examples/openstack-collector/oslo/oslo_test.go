package oslo_test

import (
	"bufio"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/examples/openstack-collector/oslo"
)

func corpusLines(t *testing.T) [][]byte {
	t.Helper()
	lines := readCorpus(t)
	if len(lines) != 30 {
		t.Fatalf("the corpus has %d lines, want 30", len(lines))
	}
	return lines
}

func readCorpus(t testing.TB) [][]byte {
	t.Helper()
	f, err := os.Open(corpusPath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, append([]byte(nil), sc.Bytes()...))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// TestShapeCorpus checks the envelope of every line against the "Shape"
// column of testdata/openstack/README.md.
func TestShapeCorpus(t *testing.T) {
	// Lines 1-9 V; 10-15 W; 16-23 L; 24-26 W; 27-29 L; 30 W.
	want := "VVVVVVVVV" + "WWWWWW" + "LLLLLLLL" + "WWW" + "LLL" + "W"
	var got strings.Builder
	for i, line := range corpusLines(t) {
		n, err := oslo.Parse(line)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		got.WriteString(string(n.Shape))
	}
	if diff := cmp.Diff(want, got.String()); diff != "" {
		t.Errorf("shapes of lines 1-30 (-want +got):\n%s", diff)
	}
}

// TestCorpusCounts pins the outcome of the 30 lines: 28 events, each valid
// under event.Validate, and two lines reported (24: no floatingip.status on
// an update; 26: the damaged timestamp).
func TestCorpusCounts(t *testing.T) {
	var mapped int
	var reported []int
	for _, e := range mapCorpus(t) {
		if e.Event != nil {
			mapped++
			if err := event.Validate(e.Event); err != nil {
				t.Errorf("line %d: %v", e.Line, err)
			}
			continue
		}
		reported = append(reported, e.Line)
	}
	if mapped != 28 {
		t.Errorf("mapped %d events, want 28", mapped)
	}
	if diff := cmp.Diff([]int{24, 26}, reported); diff != "" {
		t.Errorf("reported lines (-want +got):\n%s", diff)
	}
}

// TestCorpusRules checks the corpus README's "Things a mapper has to cope
// with" on the mapped events.
func TestCorpusRules(t *testing.T) {
	byLine := map[int]goldenEntry{}
	for _, e := range mapCorpus(t) {
		byLine[e.Line] = e
	}
	ev := func(line int) *event.Event {
		t.Helper()
		e := byLine[line]
		if e.Event == nil {
			t.Fatalf("line %d did not map: %v %s", line, e.Unmappable, e.Invalid)
		}
		return e.Event
	}
	// "No message_id or timestamp on lines 1-9": deterministic ids.
	for line := 1; line <= 9; line++ {
		e := ev(line)
		want := event.DeterministicID("openstack", "os-demo", e.ResourceID, e.EventType, e.Timestamp)
		if e.EventID != want {
			t.Errorf("line %d: event_id %s, want the deterministic %s", line, e.EventID, want)
		}
	}
	// "message_id collision": lines 19 and 20 share (message_id, timestamp).
	if a, b := ev(19), ev(20); a.EventID != b.EventID || !a.Timestamp.Equal(b.Timestamp) || a.ResourceID == b.ResourceID {
		t.Errorf("lines 19 and 20: (%s, %v, %s) and (%s, %v, %s), want one (event_id, timestamp) on two volumes",
			a.EventID, a.Timestamp, a.ResourceID, b.EventID, b.Timestamp, b.ResourceID)
	}
	// "Where the project lives": only in the context on 23 and 25.
	for line, want := range map[int]string{23: "5fe7c4e4e492490393c674089a178e19", 25: "c97027dd880d4c129ae7a4ba7edade05"} {
		if got := ev(line).ProjectID; got != want {
			t.Errorf("line %d: project_id %s, want %s from the context", line, got, want)
		}
	}
	// Naive oslo times are UTC.
	if got, want := ev(10).Timestamp, time.Date(2012, 5, 8, 20, 23, 48, 28195000, time.UTC); !got.Equal(want) || got.Location() != time.UTC {
		t.Errorf("line 10: timestamp %v, want %v", got, want)
	}
	// Line 26: damaged timestamp.
	if u := byLine[26].Unmappable; len(u) == 0 || !strings.HasPrefix(u[0], "timestamp: ") {
		t.Errorf("line 26: reasons %q, want the damaged timestamp first", u)
	}
}

func TestParseShapes(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		want    oslo.Notification
		wantErr bool
	}{
		{
			name: "V: only event_type, priority, publisher_id, payload",
			line: `{"event_type":"instance.update","priority":"INFO","publisher_id":"nova-compute:a","payload":{"x":1}}`,
			want: oslo.Notification{Shape: oslo.ShapeVersioned, EventType: "instance.update", Priority: "INFO", PublisherID: "nova-compute:a"},
		},
		{
			name: "W: message_id, timestamp, _context_*",
			line: `{"message_id":"m1","timestamp":"2012-05-08 20:23:48.028195","event_type":"volume.create.end","publisher_id":"p","priority":"INFO","_context_project_id":"p1","_context_request_id":"r","payload":{}}`,
			want: oslo.Notification{Shape: oslo.ShapeWire, EventType: "volume.create.end", PublisherID: "p", Priority: "INFO", MessageID: "m1", Timestamp: "2012-05-08 20:23:48.028195"},
		},
		{
			name: "L: ctxt and metadata, no priority",
			line: `{"event_type":"image.create","publisher_id":"image.localhost","ctxt":{},"payload":{},"metadata":{"timestamp":"2015-09-01 08:57:35.282586","message_id":"m2"}}`,
			want: oslo.Notification{Shape: oslo.ShapeListener, EventType: "image.create", PublisherID: "image.localhost", MessageID: "m2", Timestamp: "2015-09-01 08:57:35.282586"},
		},
		{
			name: "messagingv2 wrapper around W",
			line: `{"oslo.version":"2.0","oslo.message":"{\"message_id\":\"m3\",\"timestamp\":\"2022-04-22 23:02:15.717375\",\"event_type\":\"octavia.loadbalancer.create.end\",\"payload\":{}}"}`,
			want: oslo.Notification{Shape: oslo.ShapeWire, Wrapped: true, EventType: "octavia.loadbalancer.create.end", MessageID: "m3", Timestamp: "2022-04-22 23:02:15.717375"},
		},
		{name: "not an object", line: `[1]`, wantErr: true},
		{name: "no event_type", line: `{"payload":{}}`, wantErr: true},
		{name: "payload not an object", line: `{"event_type":"a.b","payload":"x"}`, wantErr: true},
		{name: "member given twice", line: `{"event_type":"a.b","event_type":"c.d","payload":{}}`, wantErr: true},
		{name: "oslo.message not JSON", line: `{"oslo.message":"{"}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := oslo.Parse([]byte(tt.line))
			if tt.wantErr {
				var pe *oslo.ParseError
				if !errors.As(err, &pe) {
					t.Fatalf("err = %v, want a *ParseError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			n.Payload, n.Context = nil, nil
			if diff := cmp.Diff(tt.want, *n); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseTime(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Time
		wantErr bool
	}{
		// The formats of the corpus README, "Timestamp formats seen".
		{in: "2012-05-08 20:23:48.028195", want: time.Date(2012, 5, 8, 20, 23, 48, 28195000, time.UTC)},
		{in: "2012-05-08T20:23:41.425105", want: time.Date(2012, 5, 8, 20, 23, 41, 425105000, time.UTC)},
		{in: "2012-10-29T13:42:11Z", want: time.Date(2012, 10, 29, 13, 42, 11, 0, time.UTC)},
		{in: "2012-05-08 20:23:41", want: time.Date(2012, 5, 8, 20, 23, 41, 0, time.UTC)},
		{in: "2016-03-07T16:23:08+00:00", want: time.Date(2016, 3, 7, 16, 23, 8, 0, time.UTC)},
		{in: "2016-03-07T16:23:09.145721+00:00", want: time.Date(2016, 3, 7, 16, 23, 9, 145721000, time.UTC)},
		{in: "2016-12-16 09:30:47+00:00", want: time.Date(2016, 12, 16, 9, 30, 47, 0, time.UTC)},
		{in: "2016-03-07T16:23:08", want: time.Date(2016, 3, 7, 16, 23, 8, 0, time.UTC)},
		// Offsets are normalized to UTC; nanoseconds truncated to microseconds.
		{in: "2016-03-07T18:23:08.1234567+02:00", want: time.Date(2016, 3, 7, 16, 23, 8, 123456000, time.UTC)},
		{in: "2014-05-3107: 19: 43.463101", wantErr: true},
		{in: "", wantErr: true},
		{in: "2014-02-30 00:00:00", wantErr: true},
		{in: "yesterday", wantErr: true},
	}
	for _, tt := range tests {
		got, err := oslo.ParseTime(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseTime(%q) err = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if !got.Equal(tt.want) || (err == nil && got.Location() != time.UTC) {
			t.Errorf("ParseTime(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// mapOne maps a one-line notification with cloud os-test.
func mapOne(t *testing.T, line string) (event.Event, error) {
	t.Helper()
	return oslo.Mapper{Cloud: "os-test"}.Map([]byte(line))
}

func TestMapRules(t *testing.T) {
	const wire = `{"message_id":"m","timestamp":"2020-01-02 03:04:05.678901","event_type":%q,"_context_project_id":"ctx-proj","payload":%s}`
	tests := []struct {
		name           string
		line           string
		wantState      string
		wantSize       string // "" for none
		wantProject    string
		wantUnmappable string // a substring of the reasons
	}{
		{
			name:        "instance size: ram_gb = memory_mb/1024 exactly, disk_gb = root_gb + ephemeral_gb",
			line:        sprintf(wire, "compute.instance.create.end", `{"instance_id":"i","tenant_id":"t","state":"active","vcpus":2,"memory_mb":1536,"root_gb":10,"ephemeral_gb":5,"disk_gb":15,"instance_type":"m1.x"}`),
			wantState:   "active",
			wantSize:    `{"vcpus":2,"ram_gb":1.5,"disk_gb":15,"flavor":"m1.x"}`,
			wantProject: "t",
		},
		{
			name:        "legacy instance without root_gb uses its own disk_gb",
			line:        sprintf(wire, "compute.instance.update", `{"instance_id":"i","tenant_id":"t","state":"active","vcpus":1,"memory_mb":100,"disk_gb":7,"instance_type":"odd"}`),
			wantState:   "active",
			wantSize:    `{"vcpus":1,"ram_gb":0.09765625,"disk_gb":7,"flavor":"odd"}`,
			wantProject: "t",
		},
		{
			name:           "a create without a complete size is unmappable",
			line:           sprintf(wire, "compute.instance.create.end", `{"instance_id":"i","tenant_id":"t","state":"active","vcpus":1}`),
			wantUnmappable: "size: a create requires the full size",
		},
		{
			name:        "an update without a complete size carries none",
			line:        sprintf(wire, "compute.instance.update", `{"instance_id":"i","tenant_id":"t","state":"active"}`),
			wantState:   "active",
			wantProject: "t",
		},
		{
			name:        "project from the context when the payload has none",
			line:        sprintf(wire, "volume.attach.end", `{"volume_id":"v","status":"in-use","size":10,"volume_type":"ty"}`),
			wantState:   "in-use",
			wantSize:    `{"size_gb":10,"type":"ty"}`,
			wantProject: "ctx-proj",
		},
		{
			name:        "floating IP: ip_version 6 from an IPv6 address",
			line:        sprintf(wire, "floatingip.create.end", `{"floatingip":{"id":"f","tenant_id":"t","status":"DOWN","floating_ip_address":"2001:db8::5"}}`),
			wantState:   "DOWN",
			wantSize:    `{"ip_version":6}`,
			wantProject: "t",
		},
		{
			name:           "floating IP update without status is unmappable: a state is required and none is guessed",
			line:           sprintf(wire, "floatingip.update.end", `{"floatingip":{"id":"f","tenant_id":"t","port_id":"p","floating_ip_address":"192.0.2.1"}}`),
			wantUnmappable: "state: payload.floatingip.status is missing",
		},
		{
			name:        "a delete needs no state",
			line:        sprintf(wire, "floatingip.delete.end", `{"floatingip_id":"f"}`),
			wantProject: "ctx-proj",
		},
		{
			name:        "image: size_gb = bytes/2^30 as an exact decimal",
			line:        sprintf(wire, "image.update", `{"id":"im","owner":"o","status":"active","size":1610612736}`),
			wantState:   "active",
			wantSize:    `{"size_gb":1.5}`,
			wantProject: "o",
		},
		{
			name:        "image: a null size (nothing uploaded) is 0",
			line:        sprintf(wire, "image.create", `{"id":"im","owner":"o","status":"queued","size":null}`),
			wantState:   "queued",
			wantSize:    `{"size_gb":0}`,
			wantProject: "o",
		},
		{
			name:        "load balancer: loadbalancer_id preferred, counts of listeners and pools",
			line:        sprintf(wire, "octavia.loadbalancer.update.end", `{"loadbalancer_id":"lb","id":"other","project_id":"p","provisioning_status":"ACTIVE","listeners":[{},{}],"pools":[{}]}`),
			wantState:   "ACTIVE",
			wantSize:    `{"listeners":2,"pools":1}`,
			wantProject: "p",
		},
		{
			name:           "unsupported event type",
			line:           sprintf(wire, "snapshot.create.end", `{}`),
			wantUnmappable: `event_type "snapshot.create.end" is not supported`,
		},
		{
			name:           "no project anywhere",
			line:           `{"message_id":"m","timestamp":"2020-01-02 03:04:05","event_type":"image.update","payload":{"id":"im","status":"active","size":1}}`,
			wantUnmappable: "project: the payload has none of payload.owner",
		},
		{
			name:           "no resource id",
			line:           sprintf(wire, "volume.update", `{"status":"available"}`),
			wantUnmappable: "resource id: the payload has none of payload.volume_id, payload.id",
		},
		{
			name:           "a timestamp that is not a string is damaged",
			line:           `{"message_id":"m","timestamp":12,"event_type":"volume.update","payload":{"volume_id":"v","status":"x","tenant_id":"t"}}`,
			wantUnmappable: "timestamp: ",
		},
		{
			name:           "a metadata.timestamp that is not a string is damaged",
			line:           `{"event_type":"volume.update","ctxt":{},"metadata":{"message_id":"m","timestamp":{}},"payload":{"volume_id":"v","status":"x","tenant_id":"t","updated_at":"2020-01-01T00:00:00Z"}}`,
			wantUnmappable: "timestamp: ",
		},
		{
			name:           "V line with no usable time in the payload",
			line:           `{"event_type":"instance.update","priority":"INFO","publisher_id":"p","payload":{"nova_object.data":{"uuid":"u","tenant_id":"t","state":"active","updated_at":null,"created_at":""}}}`,
			wantUnmappable: "timestamp: the envelope has none, and the payload none of payload.nova_object.data.updated_at",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := mapOne(t, tt.line)
			if tt.wantUnmappable != "" {
				var u *oslo.UnmappableError
				if !errors.As(err, &u) || !errors.Is(err, oslo.ErrUnmappable) {
					t.Fatalf("err = %v, want an *UnmappableError", err)
				}
				if !strings.Contains(u.Error(), tt.wantUnmappable) {
					t.Errorf("reasons %q, want one containing %q", u.Reasons, tt.wantUnmappable)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := struct{ State, Size, Project string }{ev.Payload.State.String(), string(ev.Payload.Size), ev.ProjectID}
			want := struct{ State, Size, Project string }{tt.wantState, tt.wantSize, tt.wantProject}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if err := event.Validate(&ev); err != nil {
				t.Errorf("mapped event is invalid: %v", err)
			}
		})
	}
}

// TestDeterministicIDTruncates: "the timestamp in it is rendered RFC 3339
// UTC" and the server truncates to microseconds, so the id of a V line is
// computed on the truncated time.
func TestDeterministicIDTruncates(t *testing.T) {
	ev, err := mapOne(t, `{"event_type":"instance.update","priority":"INFO","publisher_id":"p","payload":{"nova_object.data":{"uuid":"u","tenant_id":"t","state":"active","updated_at":"2020-01-02T03:04:05.123456789+01:00"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2020, 1, 2, 2, 4, 5, 123456000, time.UTC)
	if !ev.Timestamp.Equal(ts) {
		t.Errorf("timestamp %v, want %v", ev.Timestamp, ts)
	}
	if want := event.DeterministicID("openstack", "os-test", "u", "instance.update", ts); ev.EventID != want {
		t.Errorf("event_id %s, want %s", ev.EventID, want)
	}
	// What the server decodes is what the collector computed on.
	b, err := ev.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := event.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Timestamp.Equal(ev.Timestamp) {
		t.Errorf("decoded timestamp %v, want %v", back.Timestamp, ev.Timestamp)
	}
}

func TestMapInvalidEvent(t *testing.T) {
	// An event_type the pattern refuses maps, then fails event.Validate.
	_, err := mapOne(t, `{"message_id":"m","timestamp":"2020-01-02 03:04:05","event_type":"volume.Create-End","payload":{"volume_id":"v","tenant_id":"t","status":"x"}}`)
	if !errors.Is(err, event.ErrInvalid) {
		t.Fatalf("err = %v, want event.ErrInvalid", err)
	}
	// A reserved cloud name is refused the same way.
	_, err = oslo.Mapper{Cloud: "meta"}.Map([]byte(`{"message_id":"m","timestamp":"2020-01-02 03:04:05","event_type":"volume.update","payload":{"volume_id":"v","tenant_id":"t","status":"x"}}`))
	if !errors.Is(err, event.ErrInvalid) {
		t.Fatalf("err = %v, want event.ErrInvalid", err)
	}
}

func TestReader(t *testing.T) {
	good := `{"message_id":"m","timestamp":"2020-01-02 03:04:05","event_type":"volume.update","payload":{"volume_id":"v","tenant_id":"t","status":"x"}}`
	long := `{"message_id":"m","timestamp":"2020-01-02 03:04:05","event_type":"volume.update","payload":{"volume_id":"` + strings.Repeat("v", 300) + `","tenant_id":"t","status":"x"}}`
	in := good + "\n\n   \n" + "not json\n" + long + "\r\n" + good // last line without newline
	rd := oslo.Mapper{Cloud: "c"}.NewReader(strings.NewReader(in))
	rd.MaxLineBytes = 256
	type row struct {
		Line       int
		OK         bool
		Unmappable bool
	}
	var got []row
	for {
		o, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, row{o.Line, o.Err == nil, errors.Is(o.Err, oslo.ErrUnmappable)})
	}
	want := []row{{1, true, false}, {4, false, true}, {5, false, true}, {6, true, false}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
