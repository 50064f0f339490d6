package timeline_test

import (
	"slices"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/ingest/timeline"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ev(id, typ string, at time.Duration, project, state, size string) event.Event {
	e := event.Event{
		EventID: id, Timestamp: t0.Add(at), EventType: typ,
		Platform: "openstack", Cloud: "c1", ResourceType: "instance", ResourceID: "i-1", ProjectID: project,
	}
	if state != "" {
		e.Payload.State = event.StateOf(state)
	}
	if size != "" {
		e.Payload.Size = jsontext.Value(size)
	}
	return e
}

func at(d time.Duration) *time.Time { t := t0.Add(d); return &t }

func iv(from time.Duration, to *time.Time, state, size, project string) timeline.Interval {
	i := timeline.Interval{From: t0.Add(from), To: to, State: state, ProjectID: project}
	if size != "" {
		i.Size = jsontext.Value(size)
	}
	return i
}

const (
	create = "compute.instance.create.end"
	resize = "compute.instance.resize.confirm.end"
	power  = "compute.instance.power_off.end"
	del    = "compute.instance.delete.end"
	h      = time.Hour
)

func codes(ws []timeline.Warning) []timeline.Code {
	out := []timeline.Code{}
	for _, w := range ws {
		out = append(out, w.Code)
	}
	return out
}

func TestBuildRules(t *testing.T) {
	tests := []struct {
		name      string
		history   []event.Event
		intervals []timeline.Interval
		lives     []timeline.Life
		warnings  []timeline.Code
	}{
		{
			name:      "a create opens a life and an open interval",
			history:   []event.Event{ev("e1", create, 0, "p1", "active", `{"vcpus":2}`)},
			intervals: []timeline.Interval{iv(0, nil, "active", `{"vcpus":2}`, "p1")},
			lives:     []timeline.Life{{From: t0, Created: true}},
		},
		{
			name: "split only when state, size or project changes",
			history: []event.Event{
				ev("e1", create, 0, "p1", "active", `{"vcpus":2}`),
				ev("e2", "compute.instance.update", h, "p1", "active", `{"vcpus":2.0}`),
				ev("e3", power, 2*h, "p1", "stopped", ""),
				ev("e4", resize, 3*h, "p1", "", `{"vcpus":4}`),
			},
			intervals: []timeline.Interval{
				iv(0, at(2*h), "active", `{"vcpus":2}`, "p1"),
				iv(2*h, at(3*h), "stopped", `{"vcpus":2}`, "p1"),
				iv(3*h, nil, "stopped", `{"vcpus":4}`, "p1"),
			},
			lives: []timeline.Life{{From: t0, Created: true}},
		},
		{
			name: "a transfer at T splits [start, T) for P1 and [T, end) for P2",
			history: []event.Event{
				ev("e1", create, 0, "p1", "active", `{"vcpus":2}`),
				ev("e2", "compute.instance.update", h, "p2", "", ""),
				ev("e3", del, 3*h, "p2", "", ""),
			},
			intervals: []timeline.Interval{
				iv(0, at(h), "active", `{"vcpus":2}`, "p1"),
				iv(h, at(3*h), "active", `{"vcpus":2}`, "p2"),
			},
			lives: []timeline.Life{{From: t0, To: at(3 * h), Created: true}},
		},
		{
			name: "a delete closes the open interval and opens none; a create after it opens a new life",
			history: []event.Event{
				ev("e1", create, 0, "p1", "active", `{"vcpus":2}`),
				ev("e2", del, h, "p1", "", ""),
				ev("e3", create, 5*h, "p1", "active", `{"vcpus":8}`),
			},
			intervals: []timeline.Interval{
				iv(0, at(h), "active", `{"vcpus":2}`, "p1"),
				iv(5*h, nil, "active", `{"vcpus":8}`, "p1"),
			},
			lives: []timeline.Life{{From: t0, To: at(h), Created: true}, {From: t0.Add(5 * h), Created: true}},
		},
		{
			name: "an event after a delete adds nothing and warns event_after_delete",
			history: []event.Event{
				ev("e1", create, 0, "p1", "active", `{"vcpus":2}`),
				ev("e2", del, h, "p1", "", ""),
				ev("e3", resize, 2*h, "p1", "active", `{"vcpus":4}`),
				ev("e4", del, 3*h, "p1", "", ""),
			},
			intervals: []timeline.Interval{iv(0, at(h), "active", `{"vcpus":2}`, "p1")},
			lives:     []timeline.Life{{From: t0, To: at(h), Created: true}},
			warnings:  []timeline.Code{timeline.CodeEventAfterDelete, timeline.CodeEventAfterDelete},
		},
		{
			name: "a history that starts without a create is folded from its first event, with a warning",
			history: []event.Event{
				ev("e1", resize, h, "p1", "active", `{"vcpus":4}`),
				ev("e2", del, 2*h, "p1", "", ""),
			},
			intervals: []timeline.Interval{iv(h, at(2*h), "active", `{"vcpus":4}`, "p1")},
			lives:     []timeline.Life{{From: t0.Add(h), To: at(2 * h)}},
			warnings:  []timeline.Code{timeline.CodeHistoryStartsWithoutCreate},
		},
		{
			name:      "a history that starts with a delete opens no life",
			history:   []event.Event{ev("e1", del, h, "p1", "", ""), ev("e2", resize, 2*h, "p1", "active", "")},
			intervals: []timeline.Interval{},
			lives:     []timeline.Life{},
			warnings:  []timeline.Code{timeline.CodeHistoryStartsWithoutCreate, timeline.CodeEventAfterDelete},
		},
		{
			name: "zero-length intervals are dropped and equal neighbours merge",
			history: []event.Event{
				ev("e1", create, 0, "p1", "active", `{"vcpus":2}`),
				ev("e2", power, h, "p1", "stopped", ""),
				ev("e3", "compute.instance.power_on.end", h, "p1", "active", ""),
			},
			intervals: []timeline.Interval{iv(0, nil, "active", `{"vcpus":2}`, "p1")},
			lives:     []timeline.Life{{From: t0, Created: true}},
		},
		{
			name: "equal timestamps: create before update before delete, then event_id (the projection's order)",
			history: []event.Event{
				ev("b", del, h, "p1", "", ""),
				ev("a", resize, h, "p1", "active", `{"vcpus":4}`),
				ev("z", create, 0, "p1", "active", `{"vcpus":2}`),
			},
			intervals: []timeline.Interval{iv(0, at(h), "active", `{"vcpus":2}`, "p1")},
			lives:     []timeline.Life{{From: t0, To: at(h), Created: true}},
		},
		{
			name:      "a create during a life changes the interval like an update",
			history:   []event.Event{ev("e1", create, 0, "p1", "active", `{"vcpus":2}`), ev("e2", create, h, "p1", "active", `{"vcpus":4}`)},
			intervals: []timeline.Interval{iv(0, at(h), "active", `{"vcpus":2}`, "p1"), iv(h, nil, "active", `{"vcpus":4}`, "p1")},
			lives:     []timeline.Life{{From: t0, Created: true}},
		},
		{
			name:      "an empty history gives an empty timeline",
			intervals: []timeline.Interval{},
			lives:     []timeline.Life{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := timeline.Build(tt.history)
			if diff := cmp.Diff(tt.intervals, got.Intervals); diff != "" {
				t.Errorf("intervals (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.lives, got.Lives); diff != "" {
				t.Errorf("lives (-want +got):\n%s", diff)
			}
			want := tt.warnings
			if want == nil {
				want = []timeline.Code{}
			}
			if diff := cmp.Diff(want, codes(got.Warnings)); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// permutations calls f with every order of s.
func permutations(s []event.Event, f func([]event.Event)) {
	var rec func(k int)
	rec = func(k int) {
		if k == len(s) {
			f(s)
			return
		}
		for i := k; i < len(s); i++ {
			s[k], s[i] = s[i], s[k]
			rec(k + 1)
			s[k], s[i] = s[i], s[k]
		}
	}
	rec(0)
}

func TestBuildArrivalOrderNeverMatters(t *testing.T) {
	// "All 120 arrival orders of a 5-event history give identical intervals."
	history := []event.Event{
		ev("e1", create, 0, "p1", "active", `{"vcpus":2}`),
		ev("e2", resize, h, "p1", "active", `{"vcpus":4}`),
		ev("e3", power, h, "p1", "stopped", ""), // same instant as e2
		ev("e4", "compute.instance.update", 2*h, "p2", "", ""),
		ev("e5", del, 3*h, "p2", "", ""),
	}
	want := timeline.Build(history)
	n := 0
	permutations(history, func(order []event.Event) {
		n++
		if diff := cmp.Diff(want, timeline.Build(order)); diff != "" {
			t.Fatalf("order %d (-want +got):\n%s", n, diff)
		}
	})
	if n != 120 {
		t.Fatalf("%d orders, want 120", n)
	}
}

func TestClip(t *testing.T) {
	ivs := []timeline.Interval{iv(0, at(2*h), "active", "", "p1"), iv(2*h, nil, "stopped", "", "p1")}
	tests := []struct {
		name     string
		from, to time.Duration
		want     []timeline.Interval
	}{
		{"inside one interval", h / 2, h, []timeline.Interval{iv(h/2, at(h), "active", "", "p1")}},
		{"across the split; the open one ends at to", h, 3 * h, []timeline.Interval{iv(h, at(2*h), "active", "", "p1"), iv(2*h, at(3*h), "stopped", "", "p1")}},
		{"a window ending at an interval's start adds nothing of it", -h, 0, []timeline.Interval{}},
		{"an empty window", h, h, []timeline.Interval{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, timeline.Clip(ivs, t0.Add(tt.from), t0.Add(tt.to))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestSizeEqual(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{`{"vcpus":4}`, `{"vcpus":4.0}`, true},
		{`{"vcpus":4}`, `{"vcpus":40e-1}`, true},
		{`{"a":1,"b":"x"}`, `{"b":"x","a":1}`, true},
		{`{"ram":0.1}`, `{"ram":0.10000000000000001}`, false}, // equal as float64, not as decimals
		{`{"vcpus":4}`, `{"vcpus":"4"}`, false},
		{`{"l":[1,2]}`, `{"l":[2,1]}`, false},
		{`{"z":-0}`, `{"z":0.0}`, true},
		{``, ``, true},
		{``, `{}`, false},
	}
	for _, tt := range tests {
		if got := timeline.SizeEqual(jsontext.Value(tt.a), jsontext.Value(tt.b)); got != tt.want {
			t.Errorf("SizeEqual(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestCanonicalNumber(t *testing.T) {
	for in, want := range map[string]string{
		"4": "4", "4.0": "4", "40e-1": "4", "0.000": "0", "-0": "0", "1.50": "1.5", "-12.34e1": "-123.4",
		"1e3": "1000", "0.001": "0.001", "1e100": "1e100", "1.5e-60": "1.5e-60", "120E+0": "120",
	} {
		if got := timeline.CanonicalNumber(in); got != want {
			t.Errorf("CanonicalNumber(%s) = %s, want %s", in, got, want)
		}
	}
}

// "History stays answerable" (docs/operations.md, Retention): a history
// folded from a checkpoint goes on from its state at the checkpoint.
func TestBuildFromCheckpoint(t *testing.T) {
	at := time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
	created := at.AddDate(0, -6, 0)
	alive := projection.Resource{Platform: "openstack", ProjectID: "p1", State: "active", Size: jsontext.Value(`{"vcpus":8}`), CreatedAt: &created}
	deleted := alive
	deleted.DeletedAt, deleted.State = &at, projection.StateDeleted
	upd := event.Event{EventID: "u", Timestamp: at.Add(time.Hour), EventType: "compute.instance.update", Platform: "openstack", ProjectID: "p2"}
	for _, tt := range []struct {
		name      string
		start     projection.Resource
		history   []event.Event
		intervals int
		warnings  []timeline.Code
	}{
		{"alive and untouched: open from the checkpoint, no warning", alive, nil, 1, []timeline.Code{}},
		{"alive, then transferred", alive, []event.Event{upd}, 2, []timeline.Code{}},
		{"deleted before the checkpoint, then updated", deleted, []event.Event{upd}, 0, []timeline.Code{timeline.CodeEventAfterDelete}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tl := timeline.BuildFrom(&tt.start, at, tt.history)
			if len(tl.Intervals) != tt.intervals || !slices.Equal(warningCodes(tl), tt.warnings) {
				t.Fatalf("intervals %+v, warnings %+v", tl.Intervals, tl.Warnings)
			}
			if tt.intervals > 0 && (!tl.Intervals[0].From.Equal(at) || tl.Intervals[0].ProjectID != "p1" || string(tl.Intervals[0].Size) != `{"vcpus":8}`) {
				t.Errorf("first interval %+v", tl.Intervals[0])
			}
		})
	}
}

func warningCodes(tl timeline.Timeline) []timeline.Code {
	out := []timeline.Code{}
	for _, w := range tl.Warnings {
		out = append(out, w.Code)
	}
	return out
}
