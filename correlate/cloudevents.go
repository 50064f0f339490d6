package correlate

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// CloudEventKeyPrefix starts every idempotencyKey made by [CloudEventKey].
const CloudEventKeyPrefix = "cloudevents:sha256:"

// CloudEventKey is the idempotencyKey of a CloudEvent: CloudEvents says
// that source and id together identify an event, so a redelivered
// CloudEvent (same source, same id) is a replay of the first create
// (event-correlation.md, step 1; docs/decisions.md, CloudEvents HTTP binding),
// while two sources that reuse an id stay two events.
//
// The key is [CloudEventKeyPrefix] followed by the lower-case hex SHA-256 of
// the length of source (unsigned varint), source and id: 83 characters
// whatever the lengths of source and id, within [MaxKeyLen], and the same
// for every transport that delivers the event. Like every idempotencyKey it
// is scoped to the caller's (organization, user).
func CloudEventKey(source, id string) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(source)))])
	h.Write([]byte(source))
	h.Write([]byte(id))
	return CloudEventKeyPrefix + hex.EncodeToString(h.Sum(nil))
}
