package correlate

import (
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// Event is one recorded event as createEvent answers it and getEvents lists
// it (event-correlation.md, Fields). Its JSON shape is closed: exactly the
// members tagged below, in camelCase, and nothing else. Optional members are
// omitted when absent. Times are UTC with microsecond precision.
//
// Organization and User record the [Caller] that created the event. They are
// never client-settable and are not part of the JSON shape. Extra holds the
// members of the [Payload] that the event shape does not list; it is stored
// with the row so nothing sent is lost, but never returned at the top level.
type Event struct {
	// ID is a UUID minted by the service, in its canonical lower-case form.
	ID string `json:"id"`
	// Owner is the client-settable owner, as sent; it never scopes
	// correlation.
	Owner string `json:"owner,omitzero"`
	// SystemID says which instance emitted the event, as sent.
	SystemID string `json:"systemId,omitzero"`
	// ActedUpon names the subject of the event, as sent.
	ActedUpon string `json:"actedUpon,omitzero"`
	// OperationID groups the events of one operation, as sent.
	OperationID string `json:"operationId,omitzero"`
	// Category and Action are two free strings, at most [MaxCategoryLen]
	// characters each.
	Category string `json:"category"`
	Action   string `json:"action"`
	// Severity is one of [Severities]; informational when the create omitted it.
	Severity Severity `json:"severity"`
	// Status is read or unread (see [Statuses]); unread when recorded.
	Status Status `json:"status"`
	// Description is free text, at most [MaxDescriptionLen] characters; ""
	// when none was sent.
	Description string `json:"description"`
	// Metadata is the JSON object the create sent (see [DecodePayload] for its
	// formatting; number literals are kept exactly), or nil.
	Metadata  jsontext.Value `json:"metadata,omitzero"`
	CreatedAt time.Time      `json:"createdAt"`
	// UpdatedAt advances whenever the event changes (a counted occurrence, a
	// resolution, a status update, a delete).
	UpdatedAt time.Time `json:"updatedAt"`
	// DeletedAt is set by a soft delete ([Service.Delete]).
	DeletedAt *time.Time `json:"deletedAt,omitzero"`

	// CorrelationKey names the condition ("" when absent).
	CorrelationKey string `json:"correlationKey,omitzero"`
	// OccurrenceCount is how many occurrences the event counts; nil only on
	// an event stored exactly as sent without one (step 2).
	OccurrenceCount *int64 `json:"occurrenceCount,omitzero"`
	// FirstSeenAt is the first counted occurrence; a close keeps it.
	FirstSeenAt *time.Time `json:"firstSeenAt,omitzero"`
	// LastSeenAt is the latest time the condition was seen; it only moves
	// forward on an open event.
	LastSeenAt *time.Time `json:"lastSeenAt,omitzero"`
	// ResolvedAt is when the condition cleared; nil while it is open.
	ResolvedAt *time.Time `json:"resolvedAt,omitzero"`
	// Source is which surface emitted the event (a CloudEvents source, a
	// URI reference), Type its CloudEvents-compatible type, and
	// Specversion "1.0" when set.
	Source      string `json:"source,omitzero"`
	Type        string `json:"type,omitzero"`
	Specversion string `json:"specversion,omitzero"`
	// TraceID (32 hex digits) and ParentID (16) are W3C Trace Context
	// identifiers minted by the client; the server never mints them.
	TraceID  string `json:"traceId,omitzero"`
	ParentID string `json:"parentId,omitzero"`

	// Organization of the caller that recorded the event.
	Organization string `json:"-"`
	// User of the caller that recorded the event; "" for a call that
	// identifies no user.
	User string `json:"-"`
	// Extra holds the payload members the event shape does not list, by
	// name, each value exactly as sent. Nil when there were none.
	Extra map[string]jsontext.Value `json:"-"`
}

// Clone returns a deep copy of e: no pointer, slice or map is shared.
func (e Event) Clone() Event {
	c := e
	c.Metadata = cloneValue(e.Metadata)
	c.DeletedAt = cloneTime(e.DeletedAt)
	c.FirstSeenAt = cloneTime(e.FirstSeenAt)
	c.LastSeenAt = cloneTime(e.LastSeenAt)
	c.ResolvedAt = cloneTime(e.ResolvedAt)
	if e.OccurrenceCount != nil {
		n := *e.OccurrenceCount
		c.OccurrenceCount = &n
	}
	c.Extra = cloneExtra(e.Extra)
	return c
}

func cloneValue(v jsontext.Value) jsontext.Value {
	if v == nil {
		return nil
	}
	return v.Clone()
}

func cloneTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	c := *t
	return &c
}

func cloneExtra(m map[string]jsontext.Value) map[string]jsontext.Value {
	if m == nil {
		return nil
	}
	c := make(map[string]jsontext.Value, len(m))
	for k, v := range m {
		c[k] = cloneValue(v)
	}
	return c
}

// Caller is the authenticated caller of a create, a read or a write. Every
// operation is scoped to it (event-correlation.md, Scope and invariant): a
// caller never reads or changes another organization's events, and
// correlation and idempotency keys are scoped to (Organization, User), never
// to the client-settable owner.
type Caller struct {
	// Organization is required.
	Organization string
	// User is the authenticated user; "" for a call that identifies no user
	// (such as a public token), which records every create as sent (step 2)
	// and so never correlates.
	User string
	// AllUsers widens [Service.List] to the events of every user of
	// Organization (those recorded with no user included): the view of a
	// reader of the whole organization, such as tallyd's `read` credential
	// (docs/decisions.md, Who reads correlated events). Create, Get, SetStatus
	// and Delete ignore it and stay scoped to (Organization, User).
	AllUsers bool
}

// Severity is the eight-level ladder of event-correlation.md (`source`,
// `type` and `specversion`).
type Severity string

// The severities, most to least severe, then success.
const (
	SeverityEmergency     Severity = "emergency"
	SeverityAlert         Severity = "alert"
	SeverityCritical      Severity = "critical"
	SeverityError         Severity = "error"
	SeverityWarning       Severity = "warning"
	SeverityInformational Severity = "informational"
	SeverityDebug         Severity = "debug"
	SeveritySuccess       Severity = "success"
)

// Severities lists every valid [Severity], in ladder order.
func Severities() []Severity {
	return []Severity{SeverityEmergency, SeverityAlert, SeverityCritical, SeverityError,
		SeverityWarning, SeverityInformational, SeverityDebug, SeveritySuccess}
}

// Valid reports whether s is one of [Severities].
func (s Severity) Valid() bool {
	for _, v := range Severities() {
		if s == v {
			return true
		}
	}
	return false
}

// Status is whether a reader has seen an event, as Meshery's events API has
// it. A new event is [StatusUnread].
type Status string

// The statuses.
const (
	StatusUnread Status = "unread"
	StatusRead   Status = "read"
)

// Statuses lists every valid [Status].
func Statuses() []Status { return []Status{StatusUnread, StatusRead} }

// Valid reports whether s is one of [Statuses].
func (s Status) Valid() bool { return s == StatusUnread || s == StatusRead }

// Disposition says what a create did: the value of the Event-Disposition
// response header (event-correlation.md, `Event-Disposition`). A disposition
// is a result, never an error.
type Disposition string

// The dispositions.
const (
	// Created: a new event was recorded (steps 2, 3 and 4).
	Created Disposition = "created"
	// Replayed: the idempotencyKey was already bound; nothing changed (step 1).
	Replayed Disposition = "replayed"
	// Incremented: an occurrence was counted on the open event (step 3).
	Incremented Disposition = "incremented"
	// Resolved: the open event was closed (step 4).
	Resolved Disposition = "resolved"
)

// Dispositions lists every [Disposition].
func Dispositions() []Disposition { return []Disposition{Created, Replayed, Incremented, Resolved} }

// statusCode is the HTTP status createEvent answers with for d: 201 for
// [Created], 200 for the others; with legacy200 (decided by
// [Service.StatusCode], the one exported way), a created create answers 200.
func (d Disposition) statusCode(legacy200 bool) int {
	if d == Created && !legacy200 {
		return 201 // Created; this package does not import net/http.
	}
	return 200
}
