package correlate_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/store/memstore"
)

// A condition opens, counts two more occurrences, clears, and opens again as
// a new event.
func Example() {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		panic(err)
	}
	svc, err := correlate.New(db.Correlate(), correlate.Options{
		Now: func() time.Time { return now },
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	caller := correlate.Caller{Organization: "acme", User: "alice"}
	key := "meshery-server/k8s-connection/5b0b1c2d/unreachable"

	occurrence := correlate.Payload{Category: "connection", Action: "connect",
		Severity: correlate.SeverityError, CorrelationKey: key}
	for range 3 {
		e, d, err := svc.Create(ctx, caller, occurrence)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%-11s %d count=%d\n", d, svc.StatusCode(occurrence, d), *e.OccurrenceCount)
		now = now.Add(time.Minute)
	}

	restored := "Connection to cluster prod-1 restored"
	resolution := correlate.Payload{Category: "connection", Action: "connect",
		Severity: correlate.SeveritySuccess, Description: &restored,
		CorrelationKey: key, ResolvedAt: &now}
	e, d, err := svc.Create(ctx, caller, resolution)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%-11s %d count=%d severity=%s\n", d, svc.StatusCode(resolution, d), *e.OccurrenceCount, e.Severity)

	now = now.Add(time.Hour)
	reopened, d, err := svc.Create(ctx, caller, occurrence)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%-11s %d count=%d new=%t firstSeenAt=%s\n", d, svc.StatusCode(occurrence, d),
		*reopened.OccurrenceCount, reopened.ID != e.ID, reopened.FirstSeenAt.Format(time.TimeOnly))
	// Output:
	// created     201 count=1
	// incremented 200 count=2
	// incremented 200 count=3
	// resolved    200 count=3 severity=success
	// created     201 count=1 new=true firstSeenAt=13:03:00
}

// A retried create with the same idempotencyKey changes nothing.
func ExampleService_Create_idempotencyKey() {
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		panic(err)
	}
	svc, err := correlate.New(db.Correlate(), correlate.Options{})
	if err != nil {
		panic(err)
	}
	caller := correlate.Caller{Organization: "acme", User: "alice"}
	p := correlate.Payload{Category: "design", Action: "deploy", IdempotencyKey: "deploy-42"}
	for range 2 {
		_, d, err := svc.Create(context.Background(), caller, p)
		if err != nil {
			panic(err)
		}
		fmt.Println(d, svc.StatusCode(p, d))
	}
	// Output:
	// created 201
	// replayed 200
}

// Every problem of a payload is reported at once.
func ExampleDecodePayload() {
	_, err := correlate.DecodePayload([]byte(`{"category":"connection","occurrenceCount":1.5,"traceId":"00000000000000000000000000000000"}`))
	var ve *event.ValidationError
	if errors.As(err, &ve) {
		for _, p := range ve.Problems {
			fmt.Println(p.Member, p.Rule)
		}
	}
	// Output:
	// /action required
	// /occurrenceCount type
	// /traceId format
}

// ExampleService_Feed reads the changes of a caller's events: one item per
// change, none for a replayed create.
func ExampleService_Feed() {
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		panic(err)
	}
	svc, err := correlate.New(db.Correlate(), correlate.Options{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	caller := correlate.Caller{Organization: "acme", User: "alice"}
	open := correlate.Payload{Category: "connection", Action: "failed", CorrelationKey: "db-1", IdempotencyKey: "try-1"}
	e, _, err := svc.Create(ctx, caller, open)
	if err != nil {
		panic(err)
	}
	if _, _, err := svc.Create(ctx, caller, open); err != nil { // a retry: replayed
		panic(err)
	}
	open.IdempotencyKey = ""
	if _, _, err := svc.Create(ctx, caller, open); err != nil { // a second occurrence
		panic(err)
	}
	if _, err := svc.SetStatus(ctx, caller, e.ID, correlate.StatusRead); err != nil {
		panic(err)
	}
	page, err := svc.Feed(ctx, caller, correlate.FeedQuery{})
	if err != nil {
		panic(err)
	}
	for _, it := range page.Items {
		fmt.Println(it.Kind, *it.Event.OccurrenceCount, it.Event.Status)
	}
	// Output:
	// created 1 unread
	// incremented 2 unread
	// status 2 read
}
