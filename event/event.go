package event

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Source names the pipeline an event came from (canonical-event.md, Sources
// and categories). The zero value "" means the item named none, which the
// rules read as [SourceCollector].
type Source string

// The sources an event may name.
const (
	// SourceCollector marks an event pushed by a provider-side collector. It
	// is the default: an event that names no source is a collector event.
	SourceCollector Source = "collector"
	// SourceReconciliation marks a synthetic event emitted by a server-side
	// sync run to correct drift between a platform and the projection.
	SourceReconciliation Source = "reconciliation"
)

// Sources lists every valid [Source], in the order the spec declares them.
func Sources() []Source { return []Source{SourceCollector, SourceReconciliation} }

// Valid reports whether s is one of [Sources]. The empty source is not valid
// here; [Validate] accepts it because the spec lets an item leave it out.
func (s Source) Valid() bool { return s == SourceCollector || s == SourceReconciliation }

// Category is the effect an event has on a resource (canonical-event.md,
// Sources and categories). It is derived by [Categorize], never sent.
type Category string

// The categories, derived by [Categorize] (canonical-event.md, Sources and
// categories).
const (
	// CategoryCreate starts a resource's life: it sets created_at and
	// requires a full payload (state and size).
	CategoryCreate Category = "create"
	// CategoryUpdate changes a resource's state, size, or owner.
	CategoryUpdate Category = "update"
	// CategoryDelete ends a resource's life: it sets deleted_at and forces
	// the state to "deleted".
	CategoryDelete Category = "delete"
)

// Categories lists every [Category], in the order the spec declares them.
func Categories() []Category { return []Category{CategoryCreate, CategoryUpdate, CategoryDelete} }

// Event is an immutable lifecycle fact (canonical-event.md, Members): exactly
// the ten members of the spec, with JSON names as it spells them.
//
// Encode an Event with encoding/json or with github.com/go-json-experiment/json
// alike: both go through [Event.MarshalJSON]. Decode untrusted bytes with
// [Decode], which is strict; [Event.UnmarshalJSON] calls it.
type Event struct {
	// EventID is the provider's own event id where one exists (the oslo
	// message_id), else [DeterministicID]. 1 to 256 bytes.
	EventID string `json:"event_id"`
	// Timestamp is when the event happened, in UTC with microsecond
	// precision once decoded. Encoded as RFC 3339.
	Timestamp time.Time `json:"timestamp"`
	// EventType is two or more dot-separated parts of [a-z0-9_], at most
	// 512 bytes, such as "compute.instance.create.end".
	EventType string `json:"event_type"`
	// Platform names the kind of platform ("openstack"). 1 to 512 bytes,
	// never "meta" or "partner".
	Platform string `json:"platform"`
	// Cloud names one installation of the platform. 1 to 512 bytes, never
	// "meta" or "partner".
	Cloud string `json:"cloud"`
	// ResourceType names the kind of resource ("instance"). 1 to 512 bytes.
	ResourceType string `json:"resource_type"`
	// ResourceID identifies the resource within its cloud. 1 to 512 bytes.
	ResourceID string `json:"resource_id"`
	// ProjectID is the project owning the resource at or after the event.
	// 1 to 512 bytes.
	ProjectID string `json:"project_id"`
	// Source is the pipeline the event came from; "" on an item that named
	// none. A stored event carries the pipeline that ingested it.
	Source Source `json:"source,omitzero"`
	// Payload is the normalized envelope every platform is mapped into.
	Payload PayloadEnvelope `json:"payload"`
}

// PayloadEnvelope is the normalized payload every event carries
// (canonical-event.md, Members). Members it does not name survive a decode
// and an encode with their exact JSON value, in [PayloadEnvelope.Unknown].
type PayloadEnvelope struct {
	// State is the resource state at or after the event. Absent, null and ""
	// survive a round trip as they came; absent and null both count as
	// missing for the rules. At most 512 bytes.
	State State `json:"state,omitzero"`
	// Size is the full replacement size object, as exact JSON; nil when
	// absent (the size did not change). Required on a create.
	Size jsontext.Value `json:"size,omitzero"`
	// Provider is free-form raw provider data, as exact JSON; nil when
	// absent. Core logic never reads it, except that ingestion writes
	// size_as_reported into it.
	Provider jsontext.Value `json:"provider,omitzero"`
	// Unknown holds every member the envelope does not name, as one JSON
	// object with their exact values; nil when there are none.
	Unknown jsontext.Value `json:",embed"`
}

// wireEvent and wirePayload carry the JSON tags without the methods, so the
// methods below can call the v2 encoder without recursing.
type wireEvent struct {
	EventID      string      `json:"event_id"`
	Timestamp    wireTime    `json:"timestamp"`
	EventType    string      `json:"event_type"`
	Platform     string      `json:"platform"`
	Cloud        string      `json:"cloud"`
	ResourceType string      `json:"resource_type"`
	ResourceID   string      `json:"resource_id"`
	ProjectID    string      `json:"project_id"`
	Source       Source      `json:"source,omitzero"`
	Payload      wirePayload `json:"payload"`
}

// wireTime reads the timestamp with [ParseTime]; null reads as absent
// (set false), as before, so that [Validate] names it required.
type wireTime struct {
	t   time.Time
	set bool
}

func (w *wireTime) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*w = wireTime{}
		return nil
	}
	var s string
	if len(b) == 0 || b[0] != '"' {
		return errNotTimeString
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	t, err := ParseTime(s)
	if err != nil {
		return err
	}
	*w = wireTime{t: t, set: true}
	return nil
}

var errNotTimeString = errors.New("must be a string")

type wirePayload struct {
	State    State          `json:"state,omitzero"`
	Size     jsontext.Value `json:"size,omitzero"`
	Provider jsontext.Value `json:"provider,omitzero"`
	Unknown  jsontext.Value `json:",embed"`
}

func (w *wireEvent) event() Event {
	return Event{
		EventID: w.EventID, Timestamp: w.Timestamp.t, EventType: w.EventType,
		Platform: w.Platform, Cloud: w.Cloud, ResourceType: w.ResourceType,
		ResourceID: w.ResourceID, ProjectID: w.ProjectID, Source: w.Source,
		Payload: PayloadEnvelope(w.Payload),
	}
}

// MarshalJSON encodes e as compact JSON with its ten members in the spec's
// order, source omitted when "". The timestamp is written as
// time.RFC3339Nano writes it (null for the zero time, which means no
// timestamp, so that [Decode] reads it back as none); payload.size, payload.provider and each
// unknown payload member (name and value) are written byte for byte as held
// (for an Event from [Decode]: as sent, white space and string escapes
// included); the rest is written the encoder's way (see the package
// documentation, Faithfulness). The output of an Event from [Decode]
// decodes to an equal Event and encodes to the same bytes.
//
// It fails when a raw payload member is not valid JSON, when the unknown
// members are not an object or repeat state, size or provider, or when the
// timestamp's year is outside 0000 to 9999 (never for an Event from
// [Decode]). encoding/json's Marshal calls it, then compacts white space and
// escapes <, >, & and U+2028/U+2029 as it does for every Marshaler, and
// github.com/go-json-experiment/json reformats it likewise: a caller that
// must hand the bytes on as sent writes these bytes itself (tally's HTTP
// answers do: internal/problem's Marshal splices them in verbatim).
func (e Event) MarshalJSON() ([]byte, error) {
	if y := e.Timestamp.Year(); y < 0 || y > 9999 {
		return nil, fmt.Errorf("event: timestamp year %d is outside 0000 to 9999", y)
	}
	return appendEvent(nil, &e) // never a truncated document
}

// UnmarshalJSON decodes b strictly with [Decode], so an Event read through
// encoding/json obeys the same rules (JSON null included: it is refused as
// not an object). The error is an [*ValidationError] matching [ErrInvalid].
func (e *Event) UnmarshalJSON(b []byte) error {
	ev, err := Decode(b)
	if err != nil {
		return err
	}
	*e = ev
	return nil
}

// MarshalJSON encodes the envelope as compact JSON: state (when present),
// size and provider (when non-nil), then the unknown members in the order
// they came; size, provider and each unknown member byte for byte as held.
// It fails when a raw member is not valid JSON.
func (p PayloadEnvelope) MarshalJSON() ([]byte, error) {
	return appendPayload(nil, &p)
}

// UnmarshalJSON decodes an envelope alone, keeping size, provider and each
// unknown member (name and value) byte for byte. Duplicate names, invalid
// UTF-8 and a state that is neither a string nor null are refused, with the
// json package's own error; a NUL is not checked. Decode whole events with
// [Decode], which checks everything and returns an [*ValidationError].
func (p *PayloadEnvelope) UnmarshalJSON(b []byte) error {
	if scanPayload(b, p) {
		return nil
	}
	var w wirePayload
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if w.Unknown != nil {
		var err error
		if w.Unknown, err = rawUnknown(b); err != nil {
			return err
		}
	}
	*p = PayloadEnvelope(w)
	return nil
}

// Collides reports whether a and b, two events with one (event_id,
// timestamp), name another platform, cloud, resource_type or resource_id:
// then the later one is not a duplicate of the earlier but a conflict
// (ingest.KindConflict). Two events of one resource with one key are the spec's
// duplicate (canonical-event.md, Rules), whatever else they carry.
func Collides(a, b *Event) bool {
	return a.Platform != b.Platform || a.Cloud != b.Cloud || a.ResourceType != b.ResourceType || a.ResourceID != b.ResourceID
}
