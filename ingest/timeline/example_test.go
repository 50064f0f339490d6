package timeline_test

import (
	"fmt"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest/timeline"
)

func ExampleBuild() {
	mk := func(id, typ string, hour int, size string) event.Event {
		e := event.Event{EventID: id, EventType: typ, Timestamp: t0.Add(time.Duration(hour) * time.Hour), Platform: "openstack",
			Cloud: "c1", ResourceType: "instance", ResourceID: "i-1", ProjectID: "p1"}
		e.Payload.State = event.StateOf("active")
		if size != "" {
			e.Payload.Size = jsontext.Value(size)
		}
		return e
	}
	tl := timeline.Build([]event.Event{
		mk("e3", "compute.instance.delete.end", 5, ""),
		mk("e1", "compute.instance.create.end", 0, `{"vcpus":2}`),
		mk("e2", "compute.instance.resize.confirm.end", 2, `{"vcpus":4}`),
	})
	for _, iv := range tl.Intervals {
		fmt.Println(iv.From.Format("15:04"), iv.To.Format("15:04"), iv.State, string(iv.Size))
	}
	// Output:
	// 12:00 14:00 active {"vcpus":2}
	// 14:00 17:00 active {"vcpus":4}
}
