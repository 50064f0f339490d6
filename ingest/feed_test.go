package ingest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
)

// equateState compares event.State by value.
var equateState = cmpopts.EquateComparable(event.State{})

const feedEventJSON = `"event_id":"e1","timestamp":"2026-03-01T12:00:00Z","event_type":"volume.create.end","platform":"openstack","cloud":"c1","resource_type":"volume","resource_id":"vol-1","project_id":"p1","payload":{"state":"available","size":{"size_gb":10},"extra":[1,2]}`

// A FeedItem decodes from what it encodes: the event's members, received_at,
// position and late.
func TestFeedItemJSONRoundTrip(t *testing.T) {
	e, err := event.Decode([]byte("{" + feedEventJSON + "}"))
	if err != nil {
		t.Fatal(err)
	}
	want := ingest.FeedItem{
		StoredEvent: ingest.StoredEvent{Event: e, ReceivedAt: time.Date(2026, 3, 1, 12, 0, 1, 123000, time.UTC)},
		Position:    "lc1.abc", Late: true,
	}
	b, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var got ingest.FeedItem
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("Unmarshal(%s): %v", b, err)
	}
	if d := cmp.Diff(want, got, equateState); d != "" {
		t.Errorf("round trip of %s (-want +got):\n%s", b, d)
	}
	again, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(b) {
		t.Errorf("encoded again:\n%s\nwant\n%s", again, b)
	}
	// A page decodes with its items.
	var p ingest.FeedPage
	if err := json.Unmarshal([]byte(`{"items":[`+string(b)+`],"next_cursor":"lc1.abc","caught_up":true}`), &p); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(ingest.FeedPage{Items: []ingest.FeedItem{want}, NextCursor: "lc1.abc", CaughtUp: true}, p, equateState); d != "" {
		t.Errorf("page (-want +got):\n%s", d)
	}
}

func TestFeedItemUnmarshalRefuses(t *testing.T) {
	const tail = `,"received_at":"2026-03-01T12:00:01Z","position":"p","late":false`
	tests := []struct {
		name, js, want string
	}{
		{"not an object", `[]`, "must be a JSON object"},
		{"no position", `{` + feedEventJSON + `,"received_at":"2026-03-01T12:00:01Z","late":false}`, "position is required"},
		{"no received_at", `{` + feedEventJSON + `,"position":"p","late":false}`, "received_at is required"},
		{"no late", `{` + feedEventJSON + `,"received_at":"2026-03-01T12:00:01Z","position":"p"}`, "late is required"},
		{"position not a string", `{` + feedEventJSON + `,"received_at":"2026-03-01T12:00:01Z","position":1,"late":false}`, "position"},
		{"bad received_at", `{` + feedEventJSON + `,"received_at":"yesterday","position":"p","late":false}`, "received_at"},
		{"duplicate member", `{` + feedEventJSON + tail + `,"late":true}`, "duplicate"},
		{"unknown member", `{` + feedEventJSON + tail + `,"colour":"red"}`, "colour"},
		{"bad event", `{"event_id":"e1","timestamp":5` + tail + `}`, "/timestamp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var it ingest.FeedItem
			err := json.Unmarshal([]byte(tt.js), &it)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Unmarshal: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
