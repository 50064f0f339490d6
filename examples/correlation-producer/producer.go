package main

import (
	"time"

	"github.com/tallyhq/tally/correlate"
)

func occurrence(key string) correlate.Payload {
	desc := "Connection to cluster prod-1 failed"
	return correlate.Payload{
		Category: "connection", Action: "ping", Severity: correlate.Severity("error"),
		Description: &desc, CorrelationKey: key, Source: "example-producer",
	}
}

// resolution closes the condition: same key and category, the time it
// cleared, and a severity and description that say what cleared
// (event-correlation.md, Resolution events).
func resolution(key string, at time.Time) correlate.Payload {
	desc := "Connection to cluster prod-1 restored"
	at = at.UTC()
	return correlate.Payload{
		Category: "connection", Action: "ping", Severity: correlate.Severity("success"),
		Description: &desc, CorrelationKey: key, ResolvedAt: &at, Source: "example-producer",
	}
}
