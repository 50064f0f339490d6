// Package event is the canonical lifecycle event of tally: its shape, strict
// decoding, validation, categorization and the deterministic event id
// (docs/spec/canonical-event.md, sections Members, Bounds, Sources and
// categories, and Rules).
//
// It is the leaf of the library: every other package reads [Event], and this
// package does no I/O and imports nothing of tally.
//
// # Decoding
//
// [Decode] reads one item from bytes and is strict where encoding/json is
// lenient: member names are case-sensitive, an unknown top-level member, a
// member given twice, invalid UTF-8 and a NUL character (raw or \u0000) are
// refused, and the timestamp must be RFC 3339 with a zone. Timestamps are
// normalized to UTC and truncated to microseconds there, and only there, so
// every store compares the same instant. The payload keeps every member it
// does not name, with its exact JSON value: numbers are never rounded
// through float64.
//
// # Validation
//
// [Validate] reports every rule an event breaks at once, as a [*ValidationError]
// holding a list of [Problem] values in a fixed order (the order of the
// members in the spec). Bounds count bytes of UTF-8.
//
// # Categories and ids
//
// [Categorize] derives the [Category] from event_type alone, so no core code
// needs per-platform knowledge. [DeterministicID] is the event_id of an event
// whose provider gives none.
//
// # Faithfulness
//
// An Event from [Decode] encodes back to what was sent wherever the spec asks
// it (docs/decisions.md, Faithfulness; canonical-event.md: unknown members survive
// "untouched, which keeps an event byte-faithful to what the provider
// sent"). [Event.MarshalJSON] writes:
//
//   - payload.size and payload.provider: their bytes exactly as held (as
//     sent, for an Event from [Decode]): white space, string escapes such as
//     "\u0041\/" and number spellings such as 1.50e3 included;
//   - each unknown payload member: its name and its value, each exactly as
//     sent, in the order they came;
//   - what is canonicalised: the white space between the envelope's own
//     members (none is written), payload.state (written as a JSON string with
//     the encoder's escapes, or null), and the nine other event members
//     (strings with the encoder's escapes, timestamp as RFC 3339 in UTC).
package event
