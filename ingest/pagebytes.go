package ingest

import "github.com/tallyhq/tally/event"

// MaxPageBytes bounds one page of every listing ([Service.Events],
// [Service.Resources], [Service.DeadLetters], [Service.Audit]) and the
// events embedded in [Service.Resource] by the bytes of its items, as well
// as by their number: a page stops at whichever comes first, its limit or
// the item that would take the items' sizes ([StoredEventBytes],
// [ResourceBytes], [DeadLetterBytes], [AuditBytes]) past 8 MiB. A page
// always holds at least one item, so paging always progresses; that one
// item is bounded by the ingest body cap. A page cut short by bytes carries
// a NextCursor like one cut short by its limit, so nothing is unreachable.
// The sizes count stored bytes (strings, exact JSON values) plus a fixed
// per-item allowance; JSON escaping of control characters can make the
// encoded answer larger.
const MaxPageBytes = 8 << 20

// itemOverhead is the allowance per item for member names, times, ids and
// punctuation, in bytes.
const itemOverhead = 256

// StoredEventBytes is the size of e counted against [MaxPageBytes], in
// bytes: its strings and exact JSON payload values plus a fixed allowance.
// Stores use it to stop reading at the byte budget ([EventQuery.MaxBytes]).
func StoredEventBytes(e StoredEvent) int { return eventBytes(e.Event) }

func eventBytes(e event.Event) int {
	return itemOverhead + len(e.EventID) + len(e.EventType) + len(e.Platform) + len(e.Cloud) +
		len(e.ResourceType) + len(e.ResourceID) + len(e.ProjectID) + len(e.Source) +
		len(e.Payload.State.String()) + len(e.Payload.Size) + len(e.Payload.Provider) + len(e.Payload.Unknown)
}

// ResourceBytes is the size of r counted against [MaxPageBytes], in bytes.
func ResourceBytes(r Resource) int {
	return itemOverhead + len(r.Cloud) + len(r.ResourceType) + len(r.ResourceID) + len(r.Platform) +
		len(r.ProjectID) + len(r.State) + len(r.Size) + len(r.LastEventType) + len(r.LastEventID)
}

// DeadLetterBytes is the size of d counted against [MaxPageBytes], in
// bytes; its raw bytes count 4/3 over, as an answer may carry them in
// base64.
func DeadLetterBytes(d DeadLetter) int {
	return itemOverhead + (len(d.Raw)+2)/3*4 + len(d.Reason) + len(d.EventID)
}

// AuditBytes is the size of a counted against [MaxPageBytes], in bytes.
func AuditBytes(a AuditEntry) int {
	return itemOverhead + len(a.Action) + len(a.Credential) + len(a.EventID) + len(a.Platform) + len(a.Cloud)
}

// ByteBudget tells a store when to stop reading a page (the MaxBytes of
// [EventQuery], [ResourceQuery], [DeadLetterQuery] and [AuditQuery]): add
// each item's size as it is read; Full reports true once at least two
// items are held and their sizes total more than max, so the caller holds
// one item past the budget, which shows the page has more. A max of 0 or
// less never fills.
type ByteBudget struct {
	max, total, n int
}

// NewByteBudget returns a budget of max bytes.
func NewByteBudget(max int) ByteBudget { return ByteBudget{max: max} }

// Add counts one item of size bytes and reports whether the budget is
// full (see [ByteBudget]).
func (b *ByteBudget) Add(size int) (full bool) {
	b.total += size
	b.n++
	return b.max > 0 && b.n >= 2 && b.total > b.max
}

// cut returns how many leading items of items fit a page of limit items
// and [MaxPageBytes] (at least one when items has any).
func cut[T any](items []T, limit int, size func(T) int) int {
	n, total := 0, 0
	for n < len(items) && n < limit {
		s := size(items[n])
		if n > 0 && total+s > MaxPageBytes {
			break
		}
		total += s
		n++
	}
	return n
}
