package correlate

// MaxPageBytes bounds the data of one getEvents page ([Service.List]) by
// the bytes of its events, as well as PageSize bounds their number: data
// stops before the event that would take the events' sizes ([EventBytes])
// past 8 MiB, and always holds at least one event (one event is bounded by
// the create body cap). Paging stays by page number: a page cut short
// shows as fewer events in data than pageSize while totalCount says more
// follow on it (page*pageSize + len(data) < min(totalCount,
// (page+1)*pageSize)); the events past the cut are reached with a smaller
// pageSize (pageSize=1, page=n reads the n-th event of the listing).
const MaxPageBytes = 8 << 20

// EventBytes is the size of e counted against [MaxPageBytes], in bytes:
// its strings and exact metadata plus a fixed allowance of 512 bytes for
// member names, times, counts and punctuation. Stores use it to stop
// reading at [Query].MaxBytes.
func EventBytes(e Event) int {
	return 512 + len(e.ID) + len(e.Owner) + len(e.SystemID) + len(e.ActedUpon) + len(e.OperationID) +
		len(e.Category) + len(e.Action) + len(e.Severity) + len(e.Status) + len(e.Description) +
		len(e.Metadata) + len(e.CorrelationKey) + len(e.Source) + len(e.Type) + len(e.Specversion) +
		len(e.TraceID) + len(e.ParentID)
}

// cutPage returns how many leading events of evs fit [MaxPageBytes]: at
// least one when evs has any.
func cutPage(evs []Event) int {
	n, total := 0, 0
	for n < len(evs) {
		s := EventBytes(evs[n])
		if n > 0 && total+s > MaxPageBytes {
			break
		}
		total += s
		n++
	}
	return n
}
