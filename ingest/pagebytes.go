package ingest

import (
	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/internal/page"
)

// Paging bounds of every listing: a limit of 0 means DefaultLimit; no page
// holds more than MaxLimit items.
const (
	DefaultLimit = page.DefaultLimit
	MaxLimit     = page.MaxLimit
)

// MaxPageBytes bounds the item bytes of one page of every listing (such as
// [StoredEventBytes]); a page holds at least one item and, cut short, a
// NextCursor (docs/http-api.md, Answer bounds).
const MaxPageBytes = page.MaxBytes

// StoredEventBytes is the size of e counted against [MaxPageBytes], in
// bytes: its strings and exact JSON payload values plus a fixed allowance.
// Stores use it to stop reading at the byte budget ([EventQuery.MaxBytes]).
func StoredEventBytes(e StoredEvent) int { return eventBytes(e.Event) }

func eventBytes(e event.Event) int {
	return page.ItemOverhead + len(e.EventID) + len(e.EventType) + len(e.Platform) + len(e.Cloud) +
		len(e.ResourceType) + len(e.ResourceID) + len(e.ProjectID) + len(e.Source) +
		len(e.Payload.State.String()) + len(e.Payload.Size) + len(e.Payload.Provider) + len(e.Payload.Unknown)
}

// deadLetterBytes is the size of d counted against [MaxPageBytes], in
// bytes; its raw bytes count 4/3 over, as an answer may carry them in
// base64.
func deadLetterBytes(d DeadLetter) int {
	return page.ItemOverhead + (len(d.Raw)+2)/3*4 + len(d.Reason) + len(d.EventID)
}

// auditBytes is the size of a counted against [MaxPageBytes], in bytes.
func auditBytes(a AuditEntry) int {
	return page.ItemOverhead + len(a.Action) + len(a.Credential) + len(a.EventID) + len(a.Platform) + len(a.Cloud)
}
