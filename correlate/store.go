package correlate

import (
	"context"
	"time"
)

// Store is what the [Service] needs from storage. The implementations are
// the Correlate stores of github.com/tallyhq/tally/store/memstore and
// store/pgstore (DB.Correlate); both pass the conformance suite
// store/storetest.Run.
//
// Every method is scoped to a [Caller]: it reads or changes only events
// whose Organization and User equal the caller's (User "" being the events
// of calls that identified no user), except that List with
// [Caller.AllUsers] set reads every event of the caller's organization,
// whoever recorded it (docs/decisions.md, Who reads correlated events). An id
// that does not exist, is out of scope or is soft-deleted gives an error
// wrapping github.com/tallyhq/tally/store.ErrNotFound. Implementations are
// safe for concurrent use.
type Store interface {
	// Create applies one planned create atomically, all or nothing
	// (see [Create]), and returns the event as it is after the create with
	// the disposition.
	Create(ctx context.Context, c Create) (Event, Disposition, error)
	// Get returns the event with id (a canonical UUID) in scope.
	Get(ctx context.Context, scope Caller, id string) (Event, error)
	// List returns one page of the events in scope that match q, ordered
	// by q.Sort then (CreatedAt, ID), all in q.Order, with the counts of
	// [Listing] over all pages. Soft-deleted events are never listed or
	// counted. q has been normalized by the service (PageSize ≥ 1,
	// Page ≥ 0, Order and Sort set).
	List(ctx context.Context, scope Caller, q Query) (Listing, error)
	// SetStatus sets the status of the event with id and advances its
	// UpdatedAt to at (never backwards), returning the event.
	SetStatus(ctx context.Context, scope Caller, id string, status Status, at time.Time) (Event, error)
	// Delete soft-deletes the event with id: DeletedAt and UpdatedAt
	// become at. A deleted event is no longer listed, read or matched as
	// open; a key bound to it still replays it.
	Delete(ctx context.Context, scope Caller, id string, at time.Time) (Event, error)
	// SetStatuses sets the status of each event of ids (canonical UUIDs,
	// no repeats) that is in scope and not deleted, and advances its
	// UpdatedAt to at (never backwards), all at once; it returns the ids it
	// changed, in the order of ids. An id it cannot change is left out, not
	// an error.
	SetStatuses(ctx context.Context, scope Caller, ids []string, status Status, at time.Time) ([]string, error)
	// DeleteMany soft-deletes, as Delete does, each event of ids in scope
	// that is not deleted, all at once, and returns the ids it deleted, in
	// the order of ids.
	DeleteMany(ctx context.Context, scope Caller, ids []string, at time.Time) ([]string, error)
	// Types returns the distinct (Category, Action) pairs of the events in
	// scope that are not deleted (scope.AllUsers widens it to the
	// organization, as for List), ordered by Category then Action, byte by
	// byte.
	Types(ctx context.Context, scope Caller) ([]EventType, error)
	// Counts counts the events in scope (scope.AllUsers widens it to the
	// organization, as for List) that match every filter of q (paging,
	// Sort and Order ignored; deleted events never counted), in one
	// pass, grouped by (by's key, Severity, Status): only groups of at
	// least one event, ordered by Key, then Severity, then Status, byte by
	// byte.
	Counts(ctx context.Context, scope Caller, q Query, by CountKey) ([]Count, error)
	// PurgeIdempotencyKeys forgets every idempotency key bound before
	// before, in every scope, and returns how many it forgot.
	PurgeIdempotencyKeys(ctx context.Context, before time.Time) (int64, error)
	// Feed reads the change log: every create that recorded, counted or
	// resolved an event (not a replay), SetStatus, Delete, SetStatuses and
	// DeleteMany append one [Change] per event they changed, atomically
	// with the change, holding the event after it. Feed returns at most
	// q.Limit changes after q.After that q.Filter selects, in log order,
	// scanning at most [MaxFeedScan] changes; with q.Limit 0 it answers
	// only the head (Next: the last readable position). A change is
	// readable only once every change before it in the order is committed,
	// so a reader never skips one that commits late. A q.After this
	// database cannot have written is an error wrapping [ErrCursor].
	Feed(ctx context.Context, q FeedRead) (FeedBatch, error)
}

// Step is which step of createEvent (event-correlation.md, `createEvent`
// semantics) a [Create] carries out after replay.
type Step int

// The steps a store applies.
const (
	// StepRecord (step 2): insert Create.Event as it is.
	StepRecord Step = 2
	// StepOccurrence (step 3): count an occurrence on the open event of
	// (Caller, Event.CorrelationKey), or insert Create.Event to open the
	// condition.
	StepOccurrence Step = 3
	// StepResolution (step 4): close the open event of (Caller,
	// Event.CorrelationKey), or insert Create.Event, already resolved.
	// On that insert the Service defaults a missing firstSeenAt to the
	// earliest time given (lastSeenAt or resolvedAt) and a missing
	// lastSeenAt to resolvedAt, so firstSeenAt never lies after lastSeenAt.
	StepResolution Step = 4
)

// Create is one create as the [Service] planned it: the rules are decided
// (defaults applied, times truncated), and what remains depends on the
// stored state, which the store reads and changes atomically. A store
// applies it, all or nothing, in this order:
//
//  1. Replay. When IdempotencyKey is not "" and is bound in (Caller.Organization,
//     Caller.User) at or after KeyNotBefore, return the bound event as it is
//     now (even if deleted) with [Replayed]; change nothing.
//  2. [StepRecord]: insert Event; [Created].
//  3. [StepOccurrence]: when an open event (ResolvedAt nil, not deleted)
//     exists for (Caller.Organization, Caller.User, Event.CorrelationKey), add
//     Count to its OccurrenceCount (saturating at the int64 maximum), set its
//     LastSeenAt to the later of its own and LastSeenAt, and advance its
//     UpdatedAt to Now (never backwards): [Incremented]. Otherwise insert
//     Event: [Created].
//  4. [StepResolution]: when such an open event exists, set its ResolvedAt
//     to ResolvedAt, its Severity to Severity unless "", its Description to
//     *Description unless nil, its LastSeenAt to the later of its own and
//     LastSeenAt, and advance its UpdatedAt to Now: [Resolved]. Otherwise,
//     when InsertRefused is nil, insert Event: [Created]; when it is set,
//     return it (errors.As finds it in the error) and change nothing.
//  5. Binding. When IdempotencyKey is not "", bind it (replacing an expired
//     binding) to the event of step 2, 3 or 4, at Now.
//
// At most one open event exists per (organization, user, correlationKey)
// of a non-empty user, whatever runs concurrently, and no counted
// occurrence is lost. Two concurrent creates with one key have exactly one
// effect: the second waits for the first and replays.
type Create struct {
	Caller         Caller
	IdempotencyKey string
	// KeyNotBefore is the oldest binding that still replays (zero: every
	// binding, the default retention).
	KeyNotBefore time.Time
	Step         Step
	// Event is the complete event to insert when one is recorded: ID,
	// Organization, User, CreatedAt and UpdatedAt set.
	Event Event
	// Count is the occurrences to add (StepOccurrence).
	Count int64
	// LastSeenAt is compared with the open event's (StepOccurrence,
	// StepResolution).
	LastSeenAt time.Time
	// ResolvedAt, Severity and Description close the open event
	// (StepResolution).
	ResolvedAt  time.Time
	Severity    Severity
	Description *string
	// InsertRefused, when not nil, is returned instead of inserting Event at
	// StepResolution when there is no open event to close: an
	// already-resolved insert whose times contradict each other (resolvedAt
	// before firstSeenAt), an *event.ValidationError. A close proceeds.
	InsertRefused error
	// Now is the time of receipt.
	Now time.Time
}

// Order is the order of a listing by creation time.
type Order string

// The orders; [OrderDesc] (newest first) is the default.
const (
	OrderDesc Order = "desc"
	OrderAsc  Order = "asc"
)

// Query selects events for getEvents ([Service.List]). Zero fields do not
// filter. Several values in one slice match any of them; the fields combine
// with AND.
type Query struct {
	Category []string
	Action   []string
	Severity []Severity
	Status   []Status
	// Resolved nil lists every event; false only events without ResolvedAt
	// (open), true only events with one.
	Resolved *bool
	// CorrelationKey, when set, lists the events with exactly that key.
	CorrelationKey string
	// Search, when set, keeps events whose description contains it,
	// ignoring case.
	Search string
	// Sort is the field listed by first (text compared byte by byte, as
	// PostgreSQL's "C" collation does), then CreatedAt and ID; "" means
	// [SortCreatedAt]. See [SortFields].
	Sort SortField
	// Order of the listing; "" means [OrderDesc].
	Order Order
	// Page is 0-based.
	Page int
	// PageSize is 1 to [MaxPageSize]; 0 means [DefaultPageSize].
	PageSize int
	// MaxBytes, when positive, lets the store stop reading the page after
	// the event that takes the [EventBytes] of the events it holds past
	// MaxBytes (the Service passes [MaxPageBytes] and cuts that last one).
	// Total, Read and BySeverity still count the whole listing.
	MaxBytes int
}

// Limits of [Service.List]: the page size when none is given, the largest
// page size, and the largest page number (so that an offset never
// overflows).
const (
	DefaultPageSize = 25
	MaxPageSize     = 100
	MaxPage         = 1<<31 - 1
)

// SortField is a field getEvents sorts by: one of [SortFields], named as
// the event's JSON member.
type SortField string

// The sort fields: the members of @meshery/schemas v1beta3 EventResult
// that tally stores (owner, systemId, category, action, description,
// createdAt), and severity, status and updatedAt.
const (
	SortCreatedAt   SortField = "createdAt"
	SortUpdatedAt   SortField = "updatedAt"
	SortOwner       SortField = "owner"
	SortSystemID    SortField = "systemId"
	SortCategory    SortField = "category"
	SortAction      SortField = "action"
	SortSeverity    SortField = "severity"
	SortStatus      SortField = "status"
	SortDescription SortField = "description"
)

// SortFields lists every valid [SortField].
func SortFields() []SortField {
	return []SortField{SortCreatedAt, SortUpdatedAt, SortOwner, SortSystemID, SortCategory,
		SortAction, SortSeverity, SortStatus, SortDescription}
}

// Listing is what [Store.List] answers: one page and the counts over
// every page.
type Listing struct {
	// Events is the page.
	Events []Event
	// Total counts the events in scope that match the query.
	Total int64
	// Read counts the events in scope that match every filter of the query
	// but Status, and are [StatusRead]: the summary's "read" figure, which
	// a status filter (such as the UI's unread view) must not zero.
	Read int64
	// BySeverity counts the events Total counts by severity: only
	// severities with at least one event, in the order of [Severities].
	BySeverity []SeverityCount
}

// SeverityCount is how many events have one severity (@meshery/schemas
// v1beta3 SeverityCount).
type SeverityCount struct {
	Severity Severity `json:"severity"`
	Count    int64    `json:"count"`
}

// Page is one page of getEvents, in the shape of @meshery/schemas v1beta3
// EventsPage: readCount and countBySeverityLevel as [Listing] defines
// them (countBySeverityLevel is [] when nothing matches).
type Page struct {
	Page                 int             `json:"page"`
	PageSize             int             `json:"pageSize"`
	TotalCount           int64           `json:"totalCount"`
	ReadCount            int64           `json:"readCount"`
	CountBySeverityLevel []SeverityCount `json:"countBySeverityLevel"`
	Data                 []Event         `json:"data"`
}

// EventType is one kind of event: a (category, action) pair, as
// @meshery/schemas v1beta3 EventType (getEventTypes) has it.
type EventType struct {
	Category string `json:"category"`
	Action   string `json:"action"`
}

// MaxBulkIDs is the most ids one bulk status update or bulk delete takes.
const MaxBulkIDs = 1000

// CountKey is what [Store.Counts] groups the events by first.
type CountKey string

// The keys of [Store.Counts].
const (
	// CountByUser groups by the User that recorded each event.
	CountByUser CountKey = "user"
	// CountByCategory groups by Category.
	CountByCategory CountKey = "category"
)

// Count is one group of [Store.Counts]: N events whose key (a User or a
// Category, as asked) is Key, with Severity and Status.
type Count struct {
	Key      string
	Severity Severity
	Status   Status
	N        int64
}
