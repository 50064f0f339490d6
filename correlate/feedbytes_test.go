package correlate_test

import (
	"context"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/store/memstore"
)

// A page of the correlated feed holds at most MaxPageBytes of events (at
// least one), as a getEvents page does: "the cost of a request and the
// size of its answer are bounded". The cursor of a cut page continues
// with the rest.
func TestFeedPageIsBoundedInBytes(t *testing.T) {
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := correlate.New(db.Correlate(), correlate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	caller := correlate.Caller{Organization: "o", User: "u"}
	meta := jsontext.Value(`{"blob":"` + strings.Repeat("x", 3<<20) + `"}`)
	const n = 5
	for range n {
		if _, _, err := svc.Create(ctx, caller, correlate.Payload{Category: "c", Action: "a", Metadata: meta}); err != nil {
			t.Fatal(err)
		}
	}
	var got int
	after := ""
	for range n + 1 {
		p, err := svc.Feed(ctx, caller, correlate.FeedQuery{After: after, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		for _, it := range p.Items {
			size += correlate.EventBytes(it.Event)
		}
		if len(p.Items) > 1 && size > correlate.MaxPageBytes {
			t.Errorf("a page of %d items holds %d bytes of events, over %d", len(p.Items), size, correlate.MaxPageBytes)
		}
		got += len(p.Items)
		after = p.NextCursor
		if p.CaughtUp {
			break
		}
	}
	if got != n {
		t.Errorf("the feed gave %d items over its pages, want %d", got, n)
	}
}
