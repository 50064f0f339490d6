package ingest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/internal/feed"
	"github.com/tallyhq/tally/sizenames"
	"github.com/tallyhq/tally/store"
)

// MaxBatch is the most items one call may carry (canonical-event.md,
// Delivery: "one event or an array of at most 1000 of them").
const MaxBatch = 1000

// DefaultMaxDeadLetterBytes is the cap on the raw bytes kept per dead letter
// when [Options].MaxDeadLetterBytes is 0: 64 KiB. A larger item keeps only
// its size.
const DefaultMaxDeadLetterBytes = 64 << 10

// ActionScopeViolation is the audit action of an item outside the caller's
// scope (canonical-event.md, Delivery).
const ActionScopeViolation = "events.scope_violation"

// ActionConflict is the audit action of an item refused as a conflict
// ([KindConflict]): its (event_id, timestamp) is stored, or came earlier in
// the batch, for another resource (docs/decisions.md, Same (event_id, timestamp)
// stored for another resource). The row names the caller's credential and
// the item's own event_id, platform and cloud, never the stored event's.
const ActionConflict = "events.conflict"

// ErrBatchTooLarge is returned, before anything is read or stored, for a
// batch of more than [MaxBatch] items. The HTTP layer answers 413.
var ErrBatchTooLarge = fmt.Errorf("ingest: a batch holds at most %d items", MaxBatch)

// ErrInvalidCaller is returned by [Service.Ingest] for a [Caller] with half
// a scope (only one of Platform and Cloud), an invalid Source, or a
// Credential, Platform or Cloud that is not valid UTF-8 or holds NUL;
// nothing is stored.
var ErrInvalidCaller = errors.New("ingest: invalid caller")

// Kind is the kind of a refusal: the text of a reason before its first
// colon (docs/decisions.md, Refusal reasons).
type Kind string

// The refusal kinds.
const (
	// KindSchema refuses an item that does not decode or validate as a
	// canonical event.
	KindSchema Kind = "schema"
	// KindSizeSchema refuses an item whose payload.size breaks the size
	// schema of its (platform, resource_type), or has none when one is
	// required.
	KindSizeSchema Kind = "size_schema"
	// KindScope refuses an item outside the caller's scope.
	KindScope Kind = "scope"
	// KindConflict refuses an item whose (event_id, timestamp) is stored,
	// or came earlier in the batch, as an event of another platform, cloud,
	// resource_type or resource_id ([event.Collides]): not the spec's duplicate
	// (a replay of one event) but a collision or an attack, which must not
	// make the stored event or the newcomer disappear. It is kept as a dead
	// letter with an audit row of action [ActionConflict].
	KindConflict Kind = "conflict"
	// KindRetention refuses an event older than the store's retention
	// horizon ([Committed].Expired): the events before it are no longer
	// kept, and folding this one would change answers that retention
	// fixed (docs/operations.md, Retention). It is kept as a dead letter
	// whose reason names the horizon ([RetentionReason]), never dropped
	// silently.
	KindRetention Kind = "retention"
)

// RetentionReason is the reason of a [KindRetention] refusal of an event
// older than horizon, the instant before which a store keeps no event.
func RetentionReason(horizon time.Time) string {
	return reason(KindRetention, event.Problem{Member: "/timestamp", Rule: event.RuleMinimum,
		Message: "is before the retention horizon " + horizon.UTC().Format(time.RFC3339) +
			": events older than it are no longer kept, so this item was not stored (it is kept here)"})
}

// Kinds lists every [Kind].
func Kinds() []Kind {
	return []Kind{KindSchema, KindSizeSchema, KindScope, KindConflict, KindRetention}
}

// Observer receives the counters of ingestion (the server backs them with
// Prometheus), after a batch is committed and only then; a count of 0 is
// not reported. Implementations must be safe for concurrent use.
type Observer interface {
	// Ingested counts n events of cloud newly stored by the pipeline
	// source (tally_events_ingested_total{cloud,source}), once per cloud.
	Ingested(cloud string, source event.Source, n int)
	// Duplicates counts n items that were already stored or came earlier in
	// the same batch.
	Duplicates(n int)
	// Rejected counts n refused items of one kind sent by a caller whose
	// scope is cloud ("" without scope), whatever cloud the items name
	// (tally_events_rejected_total{cloud,reason}).
	Rejected(cloud string, kind Kind, n int)
	// UnvalidatedSize counts n newly stored events of (platform,
	// resourceType) whose size was taken unvalidated because no size schema
	// is registered for the pair (tally_ingest_unvalidated_size_total).
	UnvalidatedSize(platform, resourceType string, n int)
	// ProjectionReplays counts n late events of cloud that made a resource
	// replay its history (tally_projection_replays_total{cloud}).
	ProjectionReplays(cloud string, n int)
}

type nopObserver struct{}

func (nopObserver) Ingested(string, event.Source, int)  {}
func (nopObserver) Duplicates(int)                      {}
func (nopObserver) Rejected(string, Kind, int)          {}
func (nopObserver) UnvalidatedSize(string, string, int) {}
func (nopObserver) ProjectionReplays(string, int)       {}

// Options configures a [Service]. The zero value is valid.
type Options struct {
	// RequireSizeSchema refuses a size for a (platform, resource_type) no
	// size schema is registered for, instead of accepting it unvalidated
	// (canonical-event.md, Size schemas; the server maps
	// TALLY_INGEST_REQUIRE_SIZE_SCHEMA to it).
	RequireSizeSchema bool
	// Observer receives the counters; nil counts nothing.
	Observer Observer
	// Now is the clock that stamps received_at of dead letters and at of
	// audit rows (UTC, truncated to microseconds); nil means time.Now.
	Now func() time.Time
	// MaxDeadLetterBytes caps the raw bytes kept per dead letter; 0 means
	// DefaultMaxDeadLetterBytes; it must not be negative.
	MaxDeadLetterBytes int
	// Logger receives the one thing the pipeline logs: an item whose checks
	// panicked (at ERROR, with the stack; the item is refused). nil
	// discards it, as every Options.Logger of the module does: pass the
	// program's logger (cmd/tallyd passes its own) to see such a bug.
	Logger *slog.Logger
	// Feed tunes the lifecycle feed ([Service.Feed]).
	Feed FeedOptions
}

// Caller is who submits a batch.
type Caller struct {
	// Credential names the credential of the call; it is written in audit
	// rows.
	Credential string
	// Platform and Cloud are the credential's scope: every item must name
	// both. Both empty means no scope (no check), as for a reconciliation
	// run inside the process; only one of them set is an invalid caller.
	Platform string
	Cloud    string
	// Source is the pipeline that ingests the batch, stored as every
	// event's source: collector for the public route, reconciliation for a
	// sync run. "" means collector.
	Source event.Source
}

// Result is the answer to one batch (canonical-event.md, Delivery;
// IngestResult). Accepted + Duplicates + len(Rejected) equals the number of
// items.
type Result struct {
	// Accepted counts the items newly stored.
	Accepted int `json:"accepted"`
	// Duplicates counts the items whose (event_id, timestamp) was stored
	// already or came earlier in the batch.
	Duplicates int `json:"duplicates"`
	// Rejected lists the refused items in index order; never nil in a
	// Result returned with a nil error, so it encodes as [] when empty.
	Rejected []Rejection `json:"rejected"`
}

// Rejection names one refused item.
type Rejection struct {
	// Index is the item's position in the batch, from 0.
	Index int `json:"index"`
	// EventID is the event_id the item carried, exactly as sent (after JSON
	// unescaping), read best effort even from an invalid item, and never
	// truncated (docs/decisions.md, Echoed event_id: "A truncated id matches
	// nothing the client sent; the body cap bounds it"). "" when the item
	// has none, or one that is not a string of valid UTF-8 without NUL;
	// the member is always present in JSON, as Tally's RejectedEvent
	// requires it (a string) of every refused item.
	EventID string `json:"event_id"`
	// Reason is "<kind>: <member>: <rule>: <message>", one such
	// "<member>: <rule>: <message>" per problem joined by "; " after the
	// kind (docs/decisions.md, Refusal reasons): the kind is "schema",
	// "size_schema" or "scope", and is the only part a program may match
	// on; member is a JSON Pointer into the item ("" for the item as a
	// whole), rule an event.Rule* constant or the JSON Schema keyword that
	// failed. Valid UTF-8 without NUL, at most MaxReasonBytes.
	Reason string `json:"reason"`
}

// Service is the ingestion pipeline over a [Store]. It is safe for
// concurrent use; its only state is the compiled-schema cache.
type Service struct {
	store    Store
	opts     Options
	now      func() time.Time
	observer Observer
	maxDL    int
	log      *slog.Logger
	reg      registry
	feed     *feed.Hub[ringEvent, FeedFilter]

	// sizeValidations counts the sizes validated against a schema (the
	// expensive step that verdicts spare), for tests.
	sizeValidations atomic.Int64
}

// New returns a Service over s. It returns an error (every problem joined)
// when s is nil or opts.MaxDeadLetterBytes is negative.
func New(s Store, opts Options) (*Service, error) {
	var errs []error
	if s == nil {
		errs = append(errs, errors.New("ingest: a store is required"))
	}
	if opts.MaxDeadLetterBytes < 0 {
		errs = append(errs, fmt.Errorf("ingest: MaxDeadLetterBytes must not be negative, is %d", opts.MaxDeadLetterBytes))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	svc := &Service{store: s, opts: opts, now: opts.Now, observer: opts.Observer, maxDL: opts.MaxDeadLetterBytes}
	if svc.now == nil {
		svc.now = time.Now
	}
	if svc.observer == nil {
		svc.observer = nopObserver{}
	}
	if svc.maxDL == 0 {
		svc.maxDL = DefaultMaxDeadLetterBytes
	}
	svc.feed = newFeedHub(s, opts.Feed)
	svc.log = opts.Logger
	if svc.log == nil {
		svc.log = slog.New(slog.DiscardHandler)
	}
	return svc, nil
}

// Ingest runs one batch through the pipeline (canonical-event.md, Size
// schemas, Size names, Delivery, Rules) and commits it in one
// [Store.Commit]. Each item is, in this order:
//
//  1. decoded and validated ([event.DecodeValidate]), else refused
//     "schema: …";
//  2. checked against the caller's scope, else refused "scope: …" with an
//     audit row of action [ActionScopeViolation] and no dead letter;
//  3. given the size names of its (cloud, resource_type)
//     ([sizenames.Resolve]), the replaced values recorded in
//     payload.provider.size_as_reported;
//  4. refused "size_schema: …" when a number of its size is out of range
//     ([MaxNumberDigits]) or the size fails the schema of its (platform,
//     resource_type); a pair with no schema is accepted and counted
//     ([Observer].UnvalidatedSize), or refused with RequireSizeSchema;
//  5. given the caller's pipeline as source.
//
// A survivor with the (event_id, timestamp) of an earlier one is a
// duplicate. The survivors, a dead letter per refused item (except scope
// refusals) and the audit rows are committed at once.
//
// It returns [ErrBatchTooLarge] for more than [MaxBatch] items,
// [ErrInvalidCaller] for an invalid caller, the store's error (wrapped), or
// an error when a registered size schema no longer compiles; then nothing
// of the batch is stored and the caller may retry it whole. An item is
// never an error but a [Rejection]; a panic in one item's checks refuses
// that item alone, naming the stage, and is logged at ERROR
// (docs/http-api.md, Hostile input).
func (s *Service) Ingest(ctx context.Context, caller Caller, items [][]byte) (Result, error) {
	source, err := checkCall(caller, len(items), MaxBatch, ErrBatchTooLarge)
	if err != nil {
		return Result{}, err
	}
	run := s.newRun(ctx, caller, source, len(items))
	return run.all(items)
}

// MaxSyncBatch is the most synthetic events one [Service.Sync] call may
// carry; a reconciliation observation holds at most as many resources.
const MaxSyncBatch = 100_000

// ErrSyncTooLarge is returned by [Service.Sync], before anything is read or
// stored, for more than [MaxSyncBatch] items.
var ErrSyncTooLarge = fmt.Errorf("ingest: a sync run writes at most %d events", MaxSyncBatch)

// SyncWrite is what a reconciliation run writes with its synthetic events,
// in the same transaction ([Batch].SizeNames and [Batch].SyncRun).
type SyncWrite struct {
	// SizeNames, when not nil, replaces the rows of its cloud; the items of
	// that cloud are resolved with these rows, not the stored ones
	// (canonical-event.md, Size names: the names replace before the size
	// schema validates).
	SizeNames *SizeNameSet
	// Run, when not nil, is called once every item has been judged, the
	// store's judgement included, with every refusal in index order (the
	// stages', and the store's: an event that conflicts with a stored one
	// or is older than the retention horizon), and returns the run's
	// record to commit in the same transaction (nil: none).
	Run func(rejected []Rejection) *SyncRun
}

// Sync runs the synthetic events of one reconciliation run through the
// pipeline exactly as [Service.Ingest] runs a batch (every stage, the dead
// letters, the projection, the feed) and commits them in one [Store.Commit]
// with w's size names and run record. It returns the result and the ID the
// store gave the run (0 without one).
//
// It returns [ErrSyncTooLarge] for more than [MaxSyncBatch] items,
// [ErrInvalidCaller] for an invalid caller, or the store's error (wrapped);
// then nothing is written. Safe for concurrent use.
func (s *Service) Sync(ctx context.Context, caller Caller, items [][]byte, w SyncWrite) (Result, int64, error) {
	source, err := checkCall(caller, len(items), MaxSyncBatch, ErrSyncTooLarge)
	if err != nil {
		return Result{}, 0, err
	}
	run := s.newRun(ctx, caller, source, len(items))
	run.batch.SizeNames, run.names, run.record = w.SizeNames, w.SizeNames, w.Run
	res, err := run.all(items)
	if err != nil {
		return Result{}, 0, err
	}
	return res, run.runID, nil
}

// all runs every item through the stages, then commits the batch.
func (r *run) all(items [][]byte) (Result, error) {
	ctx := r.ctx
	for i, raw := range items {
		// A client that is gone gets no answer: stop at once rather than
		// validate the rest of its batch for nobody.
		if err := ctx.Err(); err != nil {
			return Result{}, fmt.Errorf("ingest: batch stopped at item %d: %w", i, err)
		}
		if err := r.item(i, raw); err != nil {
			return Result{}, err
		}
	}
	if r.record != nil {
		r.batch.SyncRun = func(c Committed) *SyncRun {
			rejected := slices.Clone(r.res.Rejected)
			for i := range c.Inserted {
				if rej, _, ok := r.refusedAtCommit(c, i); ok {
					rejected = append(rejected, rej)
				}
			}
			slices.SortStableFunc(rejected, func(a, b Rejection) int { return cmp.Compare(a.Index, b.Index) })
			return r.record(rejected)
		}
	}
	return r.commit()
}

// checkCall judges the call before any item: the batch's length and the
// caller. It returns the pipeline the events are stored with.
func checkCall(caller Caller, n, most int, tooMany error) (event.Source, error) {
	if n > most {
		return "", tooMany
	}
	if (caller.Platform == "") != (caller.Cloud == "") {
		return "", fmt.Errorf("%w: a scope names both platform and cloud, or neither", ErrInvalidCaller)
	}
	for _, f := range []struct{ name, v string }{{"credential", caller.Credential}, {"platform", caller.Platform}, {"cloud", caller.Cloud}} {
		if !utf8.ValidString(f.v) || strings.IndexByte(f.v, 0) >= 0 {
			// PostgreSQL stores neither (an audit row names the credential
			// and its scope), so both stores refuse the call alike.
			return "", fmt.Errorf("%w: %s must be valid UTF-8 without NUL", ErrInvalidCaller, f.name)
		}
	}
	source := caller.Source
	if source == "" {
		source = event.SourceCollector
	}
	if !source.Valid() {
		return "", fmt.Errorf("%w: source %q", ErrInvalidCaller, caller.Source)
	}
	return source, nil
}

type dupKey struct {
	id string
	ts int64
}

// run is the state of one [Service.Ingest] call: what the batch will write
// and the lookups read once per pair and batch.
type run struct {
	s         *Service
	ctx       context.Context
	caller    Caller
	source    event.Source
	now       time.Time
	res       Result
	batch     Batch
	seen      map[dupKey]int // index in batch.Events of the survivor with the key
	rows      map[pair][]sizenames.Row
	resolved  map[pair]map[string]resolvedSize // by (cloud, resource_type), then the size as sent
	schemas   map[pair]*schemaLookup
	valid     map[pair]map[string]bool     // sizes of this batch its pair's schema accepted (see checkSize)
	refused   map[pair]map[string][]string // sizes of this batch its pair's schema refused, with the problems
	unvalid   []*pair                      // parallel to batch.Events: the pair of an unvalidated size, or nil
	index     []int                        // parallel to batch.Events: the item's index in the call
	dups      int
	rejByKind map[Kind]int
	names     *SizeNameSet                        // a sync run's rows, which its cloud's items resolve with
	record    func(rejected []Rejection) *SyncRun // a sync run's record, built by the store's commit
	runID     int64                               // the ID the store gave the record
}

func (s *Service) newRun(ctx context.Context, caller Caller, source event.Source, n int) *run {
	return &run{
		s: s, ctx: ctx, caller: caller, source: source,
		now: event.Normalize(s.now()),
		res: Result{Rejected: []Rejection{}},
		// The survivors' slices get their usual length at once: most
		// items of a batch are admitted.
		batch:     Batch{Events: make([]event.Event, 0, n), Conflicts: make([]Conflict, 0, n), checked: true, sums: make([]uint64, 0, n)},
		index:     make([]int, 0, n),
		unvalid:   make([]*pair, 0, n),
		seen:      make(map[dupKey]int, n),
		rows:      make(map[pair][]sizenames.Row),
		resolved:  make(map[pair]map[string]resolvedSize),
		schemas:   make(map[pair]*schemaLookup),
		valid:     make(map[pair]map[string]bool),
		refused:   make(map[pair]map[string][]string),
		rejByKind: map[Kind]int{},
	}
}

// The stages of one item, named in the reason of an item whose checks
// panicked.
const (
	stageDecode     = "decode"
	stageScope      = "scope"
	stageSizeNames  = "size_names"
	stageSizeSchema = "size_schema"
	stageAdmit      = "admit"
)

// item runs one item through the stages. It returns an error only for a
// failure of the store or of a registered schema, which fails the batch. A
// panic inside the item's checks refuses that item (docs/decisions.md: one item
// must not sink a batch): its reason names the stage, the panic is logged
// with its stack, and the rest of the batch goes on.
func (r *run) item(i int, raw []byte) (err error) {
	stage := stageDecode
	id := ""
	defer func() {
		if p := recover(); p != nil {
			r.s.log.ErrorContext(r.ctx, "ingest: an item's checks panicked; the item is refused",
				"index", i, "stage", stage, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			kind, ptr := KindSchema, ""
			if stage == stageSizeNames || stage == stageSizeSchema {
				kind, ptr = KindSizeSchema, "/payload/size"
			}
			if id == "" {
				id = BestEffortEventID(raw)
			}
			r.reject(i, id, kind, reason(kind, event.Problem{Member: ptr, Rule: event.RuleInternal,
				Message: fmt.Sprintf("the %s stage failed on this item; it was refused and kept as a dead letter", stage)}), raw)
			err = nil
		}
	}()
	ev, id, ok := r.decode(i, raw)
	if !ok {
		return nil
	}
	stage = stageScope
	if !r.inScope(i, raw, id, ev) {
		return nil
	}
	var unvalidated *pair
	if ev.Payload.Size.Kind() == '{' {
		stage = stageSizeNames
		size, replaced, err := r.resolveSizeNames(i, ev)
		if err != nil {
			return err
		}
		stage = stageSizeSchema
		var ok bool
		if unvalidated, ok, err = r.checkSize(i, raw, id, ev, size); err != nil || !ok {
			return err
		}
		if replaced != nil {
			prov, err := withSizeAsReported(ev.Payload.Provider, replaced)
			if err != nil {
				return fmt.Errorf("ingest: item %d: %w", i, err)
			}
			ev.Payload.Size = size
			ev.Payload.Provider = prov
		}
	}
	stage = stageAdmit
	r.admit(i, raw, id, ev, unvalidated)
	return nil
}

// decode is stage 1: strict decoding and every rule of the event.
func (r *run) decode(i int, raw []byte) (event.Event, string, bool) {
	ev, err := event.DecodeValidate(raw)
	id := ev.EventID
	if id == "" {
		id = BestEffortEventID(raw)
	}
	if err != nil {
		r.reject(i, id, KindSchema, string(KindSchema)+": "+err.Error(), raw)
		return ev, id, false
	}
	return ev, id, true
}

// inScope is stage 2: the caller's scope, when it has one.
func (r *run) inScope(i int, raw []byte, id string, ev event.Event) bool {
	if r.caller.Platform == "" || (ev.Platform == r.caller.Platform && ev.Cloud == r.caller.Cloud) {
		return true
	}
	r.reject(i, id, KindScope, scopeReason(r.caller, ev), raw)
	r.batch.Audit = append(r.batch.Audit, AuditEntry{
		At: r.now, Action: ActionScopeViolation, Credential: r.caller.Credential,
		EventID: id, Platform: ev.Platform, Cloud: ev.Cloud,
	})
	return false
}

// resolveSizeNames is stage 3: the size names of the item's (cloud,
// resource_type) applied to its size.
func (r *run) resolveSizeNames(i int, ev event.Event) (jsontext.Value, map[string]string, error) {
	np := pair{ev.Cloud, ev.ResourceType}
	rows, ok := r.rows[np]
	if !ok && r.names != nil && r.names.Cloud == ev.Cloud {
		rows = []sizenames.Row{}
		for _, row := range r.names.Rows {
			if row.ResourceType == ev.ResourceType {
				rows = append(rows, row)
			}
		}
		r.rows[np], ok = rows, true
	}
	if !ok {
		var err error
		if rows, err = r.s.store.SizeNames(r.ctx, ev.Cloud, ev.ResourceType); err != nil {
			return nil, nil, fmt.Errorf("ingest: read size names of (%s, %s): %w", ev.Cloud, ev.ResourceType, err)
		}
		r.rows[np] = rows
	}
	if len(rows) == 0 {
		return ev.Payload.Size, nil, nil // Resolve would return it as it is
	}
	// Resolve is pure and the rows stay the same for the run: a size met
	// before in this batch is resolved as it was then (the performance rules).
	memo := r.resolved[np]
	if res, ok := memo[string(ev.Payload.Size)]; ok {
		if res.replaced == nil {
			return ev.Payload.Size, nil, nil
		}
		return bytes.Clone(res.size), res.replaced, nil // the map is only read
	}
	size, replaced, err := sizenames.Resolve(rows, ev.Payload.Size)
	if err != nil {
		return nil, nil, fmt.Errorf("ingest: item %d: %w", i, err)
	}
	if memo == nil {
		memo = make(map[string]resolvedSize)
		r.resolved[np] = memo
	}
	res := resolvedSize{replaced: replaced}
	if replaced != nil {
		res.size = bytes.Clone(size)
	}
	memo[string(ev.Payload.Size)] = res
	return size, replaced, nil
}

// resolvedSize is what [sizenames.Resolve] returned for one size.
type resolvedSize struct {
	size     jsontext.Value
	replaced map[string]string
}

// checkSize is stage 4: the size's numbers must lie in the range the
// validator judges, then the size must satisfy the schema of its
// (platform, resource_type). It reports false when it refused the item,
// and the pair when the size was taken unvalidated.
//
// Sizes repeat within a batch (one flavor, one volume type), and the check
// is a pure function of the size's bytes and its pair's schema, which stays
// the same for the whole run: a size this run's schema accepted is accepted
// again without being read (the performance rules: the size schema was about a fifth of
// the Go time per event). The memo holds at most the batch's own sizes.
// Across batches, a size the same compiled schema accepted before (its
// verdicts, kept by the registry with the schema and bounded) is accepted
// too, once this run has read the pair's registry row: a put is seen by
// the next batch, as without the memo.
func (r *run) checkSize(i int, raw []byte, id string, ev event.Event, size jsontext.Value) (*pair, bool, error) {
	sp := pair{ev.Platform, ev.ResourceType}
	if r.valid[sp][string(size)] {
		return nil, true, nil
	}
	if lk := r.schemas[sp]; lk != nil && lk.rt != nil && lk.accepted.has(size) {
		r.accept(sp, size)
		return nil, true, nil
	}
	ptrs, total, err := numbersOutOfRange(size, maxSizeProblems)
	if err != nil {
		return nil, false, fmt.Errorf("ingest: item %d: read size: %w", i, err)
	}
	if total > 0 {
		problems := make([]string, 0, len(ptrs)+1)
		for _, p := range ptrs {
			problems = append(problems, "/payload/size"+p+": "+event.RuleNumberRange+": "+msgNumberRange)
		}
		if total > len(ptrs) {
			problems = append(problems, fmt.Sprintf("and %d more", total-len(ptrs)))
		}
		r.reject(i, id, KindSizeSchema, "size_schema: "+strings.Join(problems, "; "), raw)
		return nil, false, nil
	}
	lk, ok := r.schemas[sp]
	if !ok {
		if lk, err = r.s.lookupSchema(r.ctx, ev.Platform, ev.ResourceType); err != nil {
			return nil, false, err
		}
		r.schemas[sp] = lk
	}
	switch {
	case lk.rt == nil && r.s.opts.RequireSizeSchema:
		r.reject(i, id, KindSizeSchema, reason(KindSizeSchema, event.Problem{Member: "/payload/size", Rule: event.RuleSchema,
			Message: fmt.Sprintf("no size schema is registered for (%s, %s), and this server requires one", ev.Platform, ev.ResourceType)}), raw)
		return nil, false, nil
	case lk.rt == nil:
		return &sp, true, nil
	}
	problems, judged := lk.accepted.get(size)
	if !judged {
		if problems, judged = r.refused[sp][string(size)]; !judged {
			r.s.sizeValidations.Add(1)
			if problems, err = validateSize(lk.schema, size); err != nil {
				return nil, false, fmt.Errorf("ingest: item %d: %w", i, err)
			}
			lk.accepted.put(size, problems)
		}
	}
	if problems != nil {
		if r.refused[sp] == nil {
			r.refused[sp] = make(map[string][]string)
		}
		r.refused[sp][string(size)] = problems
		r.reject(i, id, KindSizeSchema, "size_schema: "+strings.Join(problems, "; "), raw)
		return nil, false, nil
	}
	r.accept(sp, size)
	return nil, true, nil
}

// accept remembers for the rest of the run that sp's schema accepted size.
func (r *run) accept(sp pair, size jsontext.Value) {
	if r.valid[sp] == nil {
		r.valid[sp] = make(map[string]bool)
	}
	r.valid[sp][string(size)] = true
}

// admit is stage 5: the caller's pipeline as source, then the survivor is
// kept unless an earlier survivor of the batch has its (event_id,
// timestamp): a duplicate when that one names the same resource, a
// conflict ([KindConflict]) when it names another ([event.Collides]). A kept
// survivor carries the dead letter and audit row that [Store.Commit] writes
// should a stored event of another resource hold its key.
func (r *run) admit(i int, raw []byte, id string, ev event.Event, unvalidated *pair) {
	ev.Source = r.source
	dk := dupKey{ev.EventID, ev.Timestamp.UnixMicro()}
	if j, ok := r.seen[dk]; ok {
		if event.Collides(&r.batch.Events[j], &ev) {
			r.conflict(i, raw, id, ev)
			return
		}
		r.dups++
		return
	}
	r.seen[dk] = len(r.batch.Events)
	r.batch.Events = append(r.batch.Events, ev)
	r.batch.sums = append(r.batch.sums, payloadSum(&ev.Payload))
	r.batch.Conflicts = append(r.batch.Conflicts, r.conflictRecord(id, ev, raw))
	r.index = append(r.index, i)
	r.unvalid = append(r.unvalid, unvalidated)
}

// conflictReason is the reason of a [KindConflict] refusal. It names the
// rule and nothing of the event that holds the key, which may be another
// cloud's.
var conflictReason = reason(KindConflict, event.Problem{Member: "/event_id", Rule: event.RuleConflict,
	Message: "this (event_id, timestamp) is already taken by an event of another platform, cloud, resource_type or resource_id; " +
		"an event_id identifies one event of one resource, so this item is not a duplicate and was not stored"})

// conflictRecord is the dead letter and audit row of ev refused as a
// conflict. The dead letter's Raw references raw (the store copies it).
func (r *run) conflictRecord(id string, ev event.Event, raw []byte) Conflict {
	dl := DeadLetter{RawSize: len(raw), Reason: conflictReason, EventID: id, ReceivedAt: r.now}
	if len(raw) <= r.s.maxDL {
		dl.Raw = raw
		if dl.Raw == nil {
			dl.Raw = []byte{}
		}
	}
	return Conflict{DeadLetter: dl, Audit: AuditEntry{
		At: r.now, Action: ActionConflict, Credential: r.caller.Credential,
		EventID: id, Platform: ev.Platform, Cloud: ev.Cloud,
	}}
}

// conflict refuses item i as a conflict within the batch: a rejection, a
// dead letter and an audit row.
func (r *run) conflict(i int, raw []byte, id string, ev event.Event) {
	r.reject(i, id, KindConflict, conflictReason, raw)
	c := r.conflictRecord(id, ev, raw)
	r.batch.Audit = append(r.batch.Audit, c.Audit)
}

// reject records a refused item: in the result, and as a dead letter
// unless it is a scope refusal (audited instead).
func (r *run) reject(i int, id string, kind Kind, reason string, raw []byte) {
	reason = cleanReason(reason)
	r.res.Rejected = append(r.res.Rejected, Rejection{Index: i, EventID: id, Reason: reason})
	r.rejByKind[kind]++
	if kind == KindScope {
		return
	}
	dl := DeadLetter{RawSize: len(raw), Reason: reason, EventID: id, ReceivedAt: r.now}
	if len(raw) <= r.s.maxDL {
		dl.Raw = bytes.Clone(raw)
		if dl.Raw == nil {
			dl.Raw = []byte{}
		}
	}
	r.batch.DeadLetters = append(r.batch.DeadLetters, dl)
}

// commit writes the batch in one transaction, then counts it.
func (r *run) commit() (Result, error) {
	committed, err := r.s.store.Commit(r.ctx, r.batch)
	if err != nil {
		return Result{}, fmt.Errorf("ingest: commit batch: %w", err)
	}
	if len(committed.Inserted) != len(r.batch.Events) {
		return Result{}, fmt.Errorf("ingest: commit batch: store reported %d results for %d events", len(committed.Inserted), len(r.batch.Events))
	}
	if c := committed.Expired; c != nil && len(c) != len(r.batch.Events) {
		return Result{}, fmt.Errorf("ingest: commit batch: store reported %d expired events for %d events", len(c), len(r.batch.Events))
	}
	if c := committed.Conflicted; c != nil && len(c) != len(r.batch.Events) {
		return Result{}, fmt.Errorf("ingest: commit batch: store reported %d conflicts for %d events", len(c), len(r.batch.Events))
	}
	r.runID = committed.SyncRunID
	unvalidated := map[pair]int{}
	byCloud := map[string]int{}
	conflicts := false
	for i, ok := range committed.Inserted {
		if !ok {
			if rej, kind, refused := r.refusedAtCommit(committed, i); refused {
				r.res.Rejected = append(r.res.Rejected, rej)
				r.rejByKind[kind]++
				conflicts = true
				continue
			}
			r.dups++
			continue
		}
		r.res.Accepted++
		byCloud[r.batch.Events[i].Cloud]++
		if p := r.unvalid[i]; p != nil {
			unvalidated[*p]++
		}
	}
	if conflicts {
		slices.SortStableFunc(r.res.Rejected, func(a, b Rejection) int { return cmp.Compare(a.Index, b.Index) })
	}
	r.res.Duplicates = r.dups
	if r.res.Accepted > 0 {
		r.s.feed.Notify()
		if c := r.s.opts.Feed.Committed; c != nil {
			c()
		}
	}
	r.observe(byCloud, unvalidated, committed.Replays)
	return r.res, nil
}

// refusedAtCommit reports whether the store refused event i of the batch
// at commit, not storing it, and why: it is older than the retention
// horizon (stored as a dead letter with the batch) or conflicts with a
// stored event (stored as the dead letter and audit row of entry i of
// r.batch.Conflicts). An event neither stored nor refused is a duplicate.
func (r *run) refusedAtCommit(c Committed, i int) (Rejection, Kind, bool) {
	switch {
	case c.Inserted[i]:
		return Rejection{}, "", false
	case c.Expired != nil && c.Expired[i]:
		return Rejection{Index: r.index[i], EventID: r.batch.Conflicts[i].DeadLetter.EventID, Reason: RetentionReason(c.Horizon)}, KindRetention, true
	case c.Conflicted != nil && c.Conflicted[i]:
		return Rejection{Index: r.index[i], EventID: r.batch.Conflicts[i].DeadLetter.EventID, Reason: conflictReason}, KindConflict, true
	}
	return Rejection{}, "", false
}

// observe reports a committed batch's counts to the Observer.
func (r *run) observe(ingested map[string]int, unvalidated map[pair]int, replays map[string]int) {
	o := r.s.observer
	for cloud, n := range ingested {
		o.Ingested(cloud, r.source, n)
	}
	if r.dups > 0 {
		o.Duplicates(r.dups)
	}
	for _, k := range Kinds() {
		if n := r.rejByKind[k]; n > 0 {
			o.Rejected(r.caller.Cloud, k, n)
		}
	}
	for p, n := range unvalidated {
		o.UnvalidatedSize(p.a, p.b, n)
	}
	for cloud, n := range replays {
		o.ProjectionReplays(cloud, n)
	}
}

// schemaLookup is the registry row of one pair (nil when none), its
// compiled schema and the sizes that schema is known to accept.
type schemaLookup struct {
	rt       *ResourceType
	schema   *jsonschema.Schema
	accepted *verdicts
}

// lookupSchema reads the registry row of a pair and returns it compiled
// (from the cache when its Version is the cached one), or a lookup with a nil
// rt when the pair has no row.
func (s *Service) lookupSchema(ctx context.Context, platform, resourceType string) (*schemaLookup, error) {
	rt, err := s.store.ResourceType(ctx, platform, resourceType)
	if errors.Is(err, store.ErrNotFound) {
		return &schemaLookup{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ingest: read size schema of (%s, %s): %w", platform, resourceType, err)
	}
	sch, accepted, err := s.reg.schema(rt)
	if err != nil {
		return nil, fmt.Errorf("ingest: size schema of (%s, %s) version %d does not compile: %w", platform, resourceType, rt.Version, err)
	}
	return &schemaLookup{rt: &rt, schema: sch, accepted: accepted}, nil
}

// withSizeAsReported returns provider with its size_as_reported member set to
// replaced (members sorted by name); a null or absent provider becomes a new
// object. Every other byte of provider is kept as it arrived (docs/decisions.md,
// Faithfulness): the member is inserted before the closing brace. Only when
// the item brought a size_as_reported of its own is the object rebuilt
// without it, each other member's name and value still byte for byte, the
// white space between members dropped.
func withSizeAsReported(provider jsontext.Value, replaced map[string]string) (jsontext.Value, error) {
	sar, err := json.Marshal(replaced, json.Deterministic(true))
	if err != nil {
		return nil, err
	}
	member := append([]byte(`"size_as_reported":`), sar...)
	if provider.Kind() != '{' {
		return jsontext.Value(append(append([]byte{'{'}, member...), '}')), nil
	}
	if !bytes.Contains(provider, sizeAsReported) && !bytes.Contains(provider, unicodeEscape) {
		// No member can be named size_as_reported: its name would be
		// spelled out, or hold a \u escape (no other escape gives a
		// letter or _). Skip reading the members (the performance rules: a tenth of
		// the pipeline's own Go time went to this function).
		return insertMember(provider, member, !isEmptyObject(provider)), nil
	}
	dec := jsontext.NewDecoder(bytes.NewReader(provider))
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	var rebuilt []byte // non-nil once a size_as_reported of the item's is met
	kept := []byte{'{'}
	empty := true
	for dec.PeekKind() == '"' {
		name, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		entry := append(bytes.Clone(name), ':')
		text, err := jsontext.AppendUnquote(nil, name)
		if err != nil {
			return nil, err
		}
		val, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		if string(text) == "size_as_reported" {
			rebuilt = kept
			continue
		}
		if len(kept) > 1 {
			kept = append(kept, ',')
		}
		kept = append(append(kept, entry...), val...)
		empty = false
	}
	if rebuilt != nil {
		if len(kept) > 1 {
			kept = append(kept, ',')
		}
		return jsontext.Value(append(append(kept, member...), '}')), nil
	}
	return insertMember(provider, member, !empty), nil
}

var (
	sizeAsReported = []byte("size_as_reported")
	unicodeEscape  = []byte(`\u`)
)

// insertMember returns the object obj with member (`"name":value`) inserted
// after its last member (after a comma when others is set), before the
// white space and brace that close it; every other byte as in obj.
func insertMember(obj jsontext.Value, member []byte, others bool) jsontext.Value {
	trimmed := bytes.TrimRight(obj, jsonSpace)
	body := bytes.TrimRight(trimmed[:len(trimmed)-1], jsonSpace) // up to the last member
	out := make([]byte, 0, len(obj)+len(member)+1)
	out = append(out, body...)
	if others {
		out = append(out, ',')
	}
	out = append(out, member...)
	out = append(out, obj[len(body):]...)
	return jsontext.Value(out)
}

// isEmptyObject reports whether the valid JSON object obj has no member.
func isEmptyObject(obj jsontext.Value) bool {
	inner := bytes.TrimLeft(bytes.TrimLeft(obj, jsonSpace)[1:], jsonSpace)
	return inner[0] == '}'
}

// jsonSpace is JSON's white space.
const jsonSpace = " \t\r\n"

// MaxReasonBytes bounds a refusal reason; a longer one is cut at a
// character boundary and ends in "…".
const MaxReasonBytes = 4096

// cleanReason makes a reason storable as text anywhere: valid UTF-8 (an
// invalid byte becomes U+FFFD), no NUL (written \u0000, as JSON would), and
// at most MaxReasonBytes. A reason can quote a member name from the item.
func cleanReason(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", `\u0000`)
	if len(s) > MaxReasonBytes {
		cut := MaxReasonBytes - len("…")
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// BestEffortEventID returns the event_id an item carries, read leniently
// from bytes that may not be a valid event: the first top-level "event_id"
// member holding a string. It returns "" when the item is not a JSON object,
// breaks off before such a member, or the id holds invalid UTF-8 or a NUL
// character (which no store could keep as text). A long id is returned
// whole, never cut (docs/decisions.md, Echoed event_id: "A truncated id matches
// nothing the client sent; the body cap bounds it").
func BestEffortEventID(raw []byte) string {
	dec := jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	tok, err := dec.ReadToken()
	if err != nil || tok.Kind() != '{' {
		return ""
	}
	for {
		name, err := dec.ReadToken()
		if err != nil || name.Kind() != '"' {
			return ""
		}
		if name.String() != "event_id" {
			if err := dec.SkipValue(); err != nil {
				return ""
			}
			continue
		}
		val, err := dec.ReadToken()
		if err != nil || val.Kind() != '"' {
			return ""
		}
		id := val.String()
		// With invalid UTF-8 allowed, an invalid byte reads as U+FFFD.
		if strings.IndexByte(id, 0) >= 0 || strings.ContainsRune(id, utf8.RuneError) && !utf8.Valid(raw) {
			return ""
		}
		return id
	}
}

// reason writes a refusal reason, "<kind>: <member>: <rule>: <message>"
// for each problem, joined by "; " (docs/decisions.md, Refusal reasons).
func reason(k Kind, ps ...event.Problem) string {
	return string(k) + ": " + (&event.ValidationError{Problems: ps}).Error()
}

// scopeReason names each member of ev outside the caller's scope, and the
// scope (docs/decisions.md, Refusal reasons: "A scope refusal names the member
// and the credential's scope"), such as
// `scope: /cloud: scope: cloud "os-demo" is outside this credential's openstack/os-dev`.
func scopeReason(caller Caller, ev event.Event) string {
	var ps []event.Problem
	for _, m := range [...]struct{ name, got, want string }{
		{"platform", ev.Platform, caller.Platform},
		{"cloud", ev.Cloud, caller.Cloud},
	} {
		if m.got != m.want {
			ps = append(ps, event.Problem{Member: "/" + m.name, Rule: event.RuleScope,
				Message: fmt.Sprintf("%s %q is outside this credential's %s/%s", m.name, m.got, caller.Platform, caller.Cloud)})
		}
	}
	return reason(KindScope, ps...)
}
