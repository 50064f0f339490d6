package event

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// DeterministicID is the event_id of an event whose provider gives none
// (canonical-event.md, Rules): the platform, a hyphen, and the lower-case hex
// sha256 of "{cloud}:{resource_id}:{event_type}:{timestamp}", where the
// timestamp is converted to UTC and written as time.RFC3339Nano writes it
// (a fraction only when non-zero, trailing zeros trimmed, always "Z"). The
// same instant written at any offset gives the same id.
//
// The result is len(platform)+65 bytes; it fits [EventIDMaxLen] when the
// platform is at most 191 bytes. It never fails and is safe for concurrent
// use. Pass the timestamp the event will carry after decoding,
// [Normalize] of it, so that the id a collector computes matches what the
// server stores.
func DeterministicID(platform, cloud, resourceID, eventType string, ts time.Time) string {
	h := sha256.New()
	h.Write([]byte(cloud))
	h.Write([]byte{':'})
	h.Write([]byte(resourceID))
	h.Write([]byte{':'})
	h.Write([]byte(eventType))
	h.Write([]byte{':'})
	var buf [64]byte
	h.Write(ts.UTC().AppendFormat(buf[:0], time.RFC3339Nano))
	var sum [sha256.Size]byte
	return platform + "-" + hex.EncodeToString(h.Sum(sum[:0]))
}

// Normalize returns t as tally keeps every timestamp: in UTC, truncated to
// microseconds (docs/decisions.md, Timestamps: "truncated to microseconds in
// one place (the decoder)", which calls it). A collector that builds an
// [Event] in Go normalizes its timestamp before [DeterministicID], so that
// the id it computes is the id of the event the server decodes and stores:
// a nanosecond fraction would otherwise hash differently.
func Normalize(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}
