package reconcile

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/sizenames"
)

// The synthetic event types (canonical-event.md, Sources and categories).
const (
	TypeCreate = "sync.create"
	TypeUpdate = "sync.update"
	TypeDelete = "sync.delete"
)

// MaxClockSkew is how far an observation's observed_at may be after the
// server's clock ([Service.Run] refuses a later one as /observed_at,
// rule maximum): a reconciler's clock that runs a little ahead is
// tolerated, an observation dated in the future is not, as its
// corrections would be dated there and outlive every later event.
const MaxClockSkew = 5 * time.Minute

// Action is what a run did with one resource: the label action of
// tally_sync_resources_reconciled_total and a count of [Outcome].
type Action string

// The values of [Action].
const (
	ActionCreated   Action = "created"
	ActionUpdated   Action = "updated"
	ActionDeleted   Action = "deleted"
	ActionUnchanged Action = "unchanged"
	ActionSkipped   Action = "skipped"
)

// Actions lists every [Action].
func Actions() []Action {
	return []Action{ActionCreated, ActionUpdated, ActionDeleted, ActionUnchanged, ActionSkipped}
}

// Observer receives the counters of reconciliation (the server backs them
// with Prometheus), once per run after it ended. Implementations must be
// safe for concurrent use.
type Observer interface {
	// Run counts one run of cloud that ended with status
	// (tally_sync_runs_total{cloud,status}).
	Run(cloud string, status ingest.SyncStatus)
	// Reconciled counts n resources of cloud a recorded run corrected with
	// action: [ActionCreated], [ActionUpdated] or [ActionDeleted] alone
	// (tally_sync_resources_reconciled_total{cloud,action}, which Tally's
	// drift alert sums as the resources corrected); n >= 0, each of the
	// three reported once per recorded run, so that the series exist.
	Reconciled(cloud string, action Action, n int)
	// Errors counts n errors of a run of cloud: each refused synthetic
	// event (n >= 0, reported once per recorded run), and one for a run
	// that failed or was invalid (tally_sync_errors_total{cloud}).
	Errors(cloud string, n int)
}

type nopObserver struct{}

func (nopObserver) Run(string, ingest.SyncStatus)  {}
func (nopObserver) Reconciled(string, Action, int) {}
func (nopObserver) Errors(string, int)             {}

// Options configures a [Service]. The zero value is valid.
type Options struct {
	// Observer receives the counters; nil counts nothing.
	Observer Observer
	// Now stamps a run's started_at and finished_at; nil means time.Now.
	Now func() time.Time
}

// Service runs reconciliations. It is safe for concurrent use.
type Service struct {
	ingest     *ingest.Service
	projection projection.Store
	store      Store
	observer   Observer
	now        func() time.Time
}

// New returns a Service that feeds its synthetic events through ing (the
// ordinary pipeline), reads the drift from proj and runs on st. ing, proj
// and st are required (every missing one named in the joined error); they
// must share one database (the memstore or pgstore DB of ing's store).
func New(ing *ingest.Service, proj projection.Store, st Store, opts Options) (*Service, error) {
	var errs []error
	if ing == nil {
		errs = append(errs, errors.New("reconcile: an ingest service is required"))
	}
	if proj == nil {
		errs = append(errs, errors.New("reconcile: a projection store is required"))
	}
	if st == nil {
		errs = append(errs, errors.New("reconcile: a store is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s := &Service{ingest: ing, projection: proj, store: st, observer: opts.Observer, now: opts.Now}
	if s.observer == nil {
		s.observer = nopObserver{}
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// Outcome is the answer of one run (POST /api/v1/clouds/{cloud}/sync).
type Outcome struct {
	// RunID is the recorded run's ID.
	RunID int64 `json:"run_id"`
	// The counts per [Action] and of refused synthetic events, as recorded
	// in the run ([ingest.SyncRun]).
	Created   int `json:"created"`
	Updated   int `json:"updated"`
	Deleted   int `json:"deleted"`
	Unchanged int `json:"unchanged"`
	Skipped   int `json:"skipped"`
	Refused   int `json:"refused"`
	// EventIDs are the ids of the synthetic events of the run that were not
	// refused (stored now, or stored before by an identical run), in the
	// order of the observation; never nil.
	EventIDs []string `json:"event_ids"`
	// Rejected lists the refused synthetic events, as ingest reports them
	// (index into the run's events, event_id, reason); never nil.
	Rejected []ingest.Rejection `json:"rejected"`
}

// Run reconciles cloud with obs (docs/reconciliation.md), holding the
// cloud's turn ([Store.Exclusive]) so that runs of one cloud, in any
// replica, follow each other:
//
//  1. obs is checked ([Observation.Check]); a broken rule returns the
//     [*event.ValidationError] and changes nothing;
//  2. the sizes observed are resolved with obs.SizeNames when given, else
//     with the cloud's stored rows, and each observed resource is compared
//     with its projection row: absent or deleted → sync.create; alive with
//     another state, size (exact JSON, member order aside) or project →
//     sync.update carrying the observed values; equal → nothing
//     (unchanged);
//  3. each alive row of a type of obs.CompleteTypes that obs does not list
//     → sync.delete, dated by obs.Deletes where given (unless that date is
//     before the row's last event), else obs.ObservedAt;
//  4. a resource whose row has an event later than obs.ObservedAt is left
//     alone (skipped; docs/decisions.md, A sync run and newer collector
//     events);
//  5. the synthetic events, with source reconciliation and the
//     deterministic event id ([event.DeterministicID]), go through
//     [ingest.Service.Sync], which commits them, the size names and the
//     run's record in one transaction.
//
// credential names the caller in audit rows. It returns the outcome, an
// [*event.ValidationError] (for obs, for an obs.ObservedAt more than
// [MaxClockSkew] after the clock, or for a cloud that is empty, longer
// than [event.IdentifierMaxLen] bytes, not UTF-8, holds NUL, or is meta or
// partner: member /cloud), an error wrapping [ingest.ErrSyncTooLarge] when
// the drift is more than [ingest.MaxSyncBatch] events, or the error of the
// store or the pipeline (then nothing was written and the run is counted
// failed).
func (s *Service) Run(ctx context.Context, credential, cloud string, obs Observation) (Outcome, error) {
	if err := obs.Check(); err != nil {
		s.Invalid(cloud)
		return Outcome{}, err
	}
	var ps probs
	ps.text("/cloud", cloud, event.IdentifierMaxLen)
	if cloud == "meta" || cloud == "partner" {
		ps.add("/cloud", event.RuleReserved, fmt.Sprintf("must not be %q: meta and partner name the virtual projects, which own no resources", cloud))
	}
	if limit := event.Normalize(s.now()).Add(MaxClockSkew); obs.ObservedAt.After(limit) {
		ps.add("/observed_at", event.RuleMaximum, fmt.Sprintf("must not be after the server's clock by more than %s (at most %s): a listing cannot be taken in the future, and its corrections would be dated there",
			MaxClockSkew, limit.Format(time.RFC3339Nano)))
	}
	if ps != nil {
		s.Invalid(cloud)
		return Outcome{}, &event.ValidationError{Problems: ps}
	}
	var out Outcome
	err := s.store.Exclusive(ctx, cloud, func(ctx context.Context) error {
		var err error
		out, err = s.run(ctx, credential, cloud, obs)
		return err
	})
	if err != nil {
		s.observer.Run(cloud, ingest.SyncFailed)
		s.observer.Errors(cloud, 1)
		var ve *event.ValidationError
		if errors.As(err, &ve) {
			return Outcome{}, err
		}
		return Outcome{}, fmt.Errorf("reconcile: run of cloud %q: %w", cloud, err)
	}
	status := ingest.SyncCompleted
	if out.Refused > 0 {
		status = ingest.SyncPartial
	}
	s.observer.Run(cloud, status)
	s.observer.Errors(cloud, out.Refused)
	// The corrections alone: unchanged and skipped resources are in the
	// run's record, not in the series Tally's drift alert sums.
	for _, a := range []Action{ActionCreated, ActionUpdated, ActionDeleted} {
		s.observer.Reconciled(cloud, a, out.count(a))
	}
	return out, nil
}

// Invalid counts a run of cloud whose observation was refused (status
// invalid, and one error): [Service.Run] counts so the observations it refuses,
// and a caller that refuses one before Run (as the HTTP route does, whose
// [Decode] fails) calls Invalid.
func (s *Service) Invalid(cloud string) {
	s.observer.Run(cloud, ingest.SyncInvalid)
	s.observer.Errors(cloud, 1)
}

func (o *Outcome) count(a Action) int {
	switch a {
	case ActionCreated:
		return o.Created
	case ActionUpdated:
		return o.Updated
	case ActionDeleted:
		return o.Deleted
	case ActionUnchanged:
		return o.Unchanged
	default:
		return o.Skipped
	}
}

func (o *Outcome) add(a Action, n int) {
	switch a {
	case ActionCreated:
		o.Created += n
	case ActionUpdated:
		o.Updated += n
	case ActionDeleted:
		o.Deleted += n
	case ActionUnchanged:
		o.Unchanged += n
	default:
		o.Skipped += n
	}
}

// synthetic is one event a run emits.
type synthetic struct {
	action Action
	id     string
	raw    []byte
}

// run is Run within the cloud's turn.
func (s *Service) run(ctx context.Context, credential, cloud string, obs Observation) (Outcome, error) {
	started := event.Normalize(s.now())
	var set *ingest.SizeNameSet
	if obs.SizeNames != nil {
		set = &ingest.SizeNameSet{Cloud: cloud, Rows: make([]sizenames.Row, len(obs.SizeNames))}
		for i, n := range obs.SizeNames {
			set.Rows[i] = sizenames.Row{Cloud: cloud, ResourceType: n.ResourceType, Member: n.Member, Value: n.Value, Name: n.Name}
		}
	}
	d := drift{cloud: cloud, obs: obs, names: s.namesOf(ctx, cloud, set)}
	if err := d.read(ctx, s.projection); err != nil {
		return Outcome{}, err
	}
	evs, err := d.events()
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{EventIDs: []string{}, Rejected: []ingest.Rejection{}}
	for _, a := range []Action{ActionUnchanged, ActionSkipped} {
		out.add(a, d.counts[a])
	}
	items := make([][]byte, len(evs))
	for i, e := range evs {
		items[i] = e.raw
	}
	record := func(rejected []ingest.Rejection) *ingest.SyncRun {
		refused := make(map[int]bool, len(rejected))
		for _, r := range rejected {
			refused[r.Index] = true
		}
		run := &ingest.SyncRun{Cloud: cloud, Platform: obs.Platform, ObservedAt: obs.ObservedAt, StartedAt: started,
			FinishedAt: event.Normalize(s.now()), Status: ingest.SyncCompleted, Errors: []string{}}
		for i, e := range evs {
			if !refused[i] {
				out.add(e.action, 1)
				out.EventIDs = append(out.EventIDs, e.id)
			}
		}
		out.Refused = len(rejected)
		for _, r := range rejected {
			if len(run.Errors) < ingest.MaxSyncErrors {
				run.Errors = append(run.Errors, r.EventID+": "+r.Reason)
			}
		}
		if out.Refused > 0 {
			run.Status = ingest.SyncPartial
		}
		run.Created, run.Updated, run.Deleted = out.Created, out.Updated, out.Deleted
		run.Unchanged, run.Skipped, run.Refused = out.Unchanged, out.Skipped, out.Refused
		return run
	}
	caller := ingest.Caller{Credential: credential, Platform: obs.Platform, Cloud: cloud, Source: event.SourceReconciliation}
	res, id, err := s.ingest.Sync(ctx, caller, items, ingest.SyncWrite{SizeNames: set, Run: record})
	if err != nil {
		return Outcome{}, err
	}
	out.RunID = id
	out.Rejected = res.Rejected
	return out, nil
}

// namesOf returns a function giving the size-name rows of one resource
// type of cloud: set's when given, else the stored ones (read once per
// type). A read error is kept and returned by the drift.
func (s *Service) namesOf(ctx context.Context, cloud string, set *ingest.SizeNameSet) func(rt string) ([]sizenames.Row, error) {
	memo := map[string][]sizenames.Row{}
	return func(rt string) ([]sizenames.Row, error) {
		if rows, ok := memo[rt]; ok {
			return rows, nil
		}
		var rows []sizenames.Row
		if set != nil {
			for _, r := range set.Rows {
				if r.ResourceType == rt {
					rows = append(rows, r)
				}
			}
		} else {
			var err error
			if rows, err = s.store.SizeNames(ctx, cloud, rt); err != nil {
				return nil, fmt.Errorf("read size names of (%s, %s): %w", cloud, rt, err)
			}
		}
		memo[rt] = rows
		return rows, nil
	}
}

// drift is the comparison of one observation with the projection.
type drift struct {
	cloud   string
	obs     Observation
	names   func(rt string) ([]sizenames.Row, error)
	current map[key]projection.Resource
	counts  map[Action]int
}

// listPage is how many projection rows one read takes.
const listPage = 1000

// read loads the projection rows of the observed cloud and platform.
func (d *drift) read(ctx context.Context, ps projection.Store) error {
	d.current = map[key]projection.Resource{}
	var after *projection.Key
	for {
		rows, err := ps.List(ctx, projection.Query{Cloud: d.cloud, Platform: d.obs.Platform, After: after, Limit: listPage})
		if err != nil {
			return fmt.Errorf("read the projection: %w", err)
		}
		for _, r := range rows {
			d.current[key{r.ResourceType, r.ResourceID}] = r
		}
		if len(rows) < listPage {
			return nil
		}
		after = &rows[len(rows)-1].Key
	}
}

// events returns the synthetic events of the drift, in the observation's
// order (resources, then the deletes in key order), counting the
// resources left alone.
func (d *drift) events() ([]synthetic, error) {
	d.counts = map[Action]int{}
	var out []synthetic
	listed := make(map[key]bool, len(d.obs.Resources))
	for _, r := range d.obs.Resources {
		k := key{r.ResourceType, r.ResourceID}
		listed[k] = true
		e, err := d.compare(r)
		if err != nil {
			return nil, err
		}
		if e != nil {
			out = append(out, *e)
		}
	}
	deletes, err := d.deletes(listed)
	if err != nil {
		return nil, err
	}
	return append(out, deletes...), nil
}

// compare is the drift of one observed resource: nil when none.
func (d *drift) compare(r Resource) (*synthetic, error) {
	row, ok := d.current[key{r.ResourceType, r.ResourceID}]
	if ok && row.LastEventAt.After(d.obs.ObservedAt) {
		d.counts[ActionSkipped]++
		return nil, nil
	}
	if !ok || row.DeletedAt != nil {
		return d.emit(ActionCreated, TypeCreate, r.ResourceType, r.ResourceID, r.ProjectID, d.obs.ObservedAt, r.State, r.Size)
	}
	rows, err := d.names(r.ResourceType)
	if err != nil {
		return nil, err
	}
	size, _, err := sizenames.Resolve(rows, r.Size)
	if err != nil {
		return nil, fmt.Errorf("resolve the size of %s %s: %w", r.ResourceType, r.ResourceID, err)
	}
	same, err := sameJSON(size, row.Size)
	if err != nil {
		return nil, fmt.Errorf("compare the size of %s %s: %w", r.ResourceType, r.ResourceID, err)
	}
	if same && row.State == r.State && row.ProjectID == r.ProjectID {
		d.counts[ActionUnchanged]++
		return nil, nil
	}
	return d.emit(ActionUpdated, TypeUpdate, r.ResourceType, r.ResourceID, r.ProjectID, d.obs.ObservedAt, r.State, r.Size)
}

// deletes is the drift of the complete types: a delete for each alive row
// the observation does not list.
func (d *drift) deletes(listed map[key]bool) ([]synthetic, error) {
	complete := make(map[string]bool, len(d.obs.CompleteTypes))
	for _, t := range d.obs.CompleteTypes {
		complete[t] = true
	}
	dated := make(map[key]time.Time, len(d.obs.Deletes))
	for _, del := range d.obs.Deletes {
		dated[key{del.ResourceType, del.ResourceID}] = del.DeletedAt
	}
	keys := make([]key, 0)
	for k, row := range d.current {
		if complete[k.resourceType] && !listed[k] && row.DeletedAt == nil {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.resourceType, b.resourceType), cmp.Compare(a.resourceID, b.resourceID))
	})
	var out []synthetic
	for _, k := range keys {
		row := d.current[k]
		if row.LastEventAt.After(d.obs.ObservedAt) {
			d.counts[ActionSkipped]++
			continue
		}
		at := d.obs.ObservedAt
		if t, ok := dated[k]; ok && !t.Before(row.LastEventAt) {
			at = t
		}
		e, err := d.emit(ActionDeleted, TypeDelete, k.resourceType, k.resourceID, row.ProjectID, at, "", nil)
		if err != nil {
			return nil, err
		}
		out = append(out, *e)
	}
	return out, nil
}

// syntheticEvent is the JSON form of a synthetic event.
type syntheticEvent struct {
	EventID      string         `json:"event_id"`
	Timestamp    string         `json:"timestamp"`
	EventType    string         `json:"event_type"`
	Platform     string         `json:"platform"`
	Cloud        string         `json:"cloud"`
	ResourceType string         `json:"resource_type"`
	ResourceID   string         `json:"resource_id"`
	ProjectID    string         `json:"project_id"`
	Source       event.Source   `json:"source"`
	Payload      syntheticState `json:"payload"`
}

type syntheticState struct {
	State string         `json:"state,omitempty"`
	Size  jsontext.Value `json:"size,omitempty"`
}

// emit builds one synthetic event.
func (d *drift) emit(a Action, typ, rt, id, project string, at time.Time, state string, size jsontext.Value) (*synthetic, error) {
	at = event.Normalize(at)
	e := syntheticEvent{
		EventID: event.DeterministicID(d.obs.Platform, d.cloud, id, typ, at), Timestamp: at.Format(time.RFC3339Nano),
		EventType: typ, Platform: d.obs.Platform, Cloud: d.cloud, ResourceType: rt, ResourceID: id,
		ProjectID: project, Source: event.SourceReconciliation, Payload: syntheticState{State: state, Size: size},
	}
	raw, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode the %s of %s %s: %w", typ, rt, id, err)
	}
	return &synthetic{action: a, id: e.EventID, raw: raw}, nil
}

// sameJSON reports whether a and b are the same JSON value: objects equal
// member by member whatever their order, arrays element by element,
// strings by their value, numbers by their exact text (no float64 round
// trip: 100 and 100.0 differ), white space aside. A nil value equals only
// a nil one. Its cost is linear in len(a)+len(b), however deep they nest.
func sameJSON(a, b jsontext.Value) (bool, error) {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == 0 && len(b) == 0, nil
	}
	na, err := readNode(jsontext.NewDecoder(bytes.NewReader(a)))
	if err != nil {
		return false, err
	}
	nb, err := readNode(jsontext.NewDecoder(bytes.NewReader(b)))
	if err != nil {
		return false, err
	}
	return na.equal(nb), nil
}

// node is a JSON value read once: an object's members by name, an array's
// elements, or a string's value, a number's text or a literal's.
type node struct {
	kind    jsontext.Kind
	text    string
	members map[string]*node
	elems   []*node
}

// readNode reads the next value of dec.
func readNode(dec *jsontext.Decoder) (*node, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	n := &node{kind: tok.Kind()}
	switch n.kind {
	case '{':
		n.members = map[string]*node{}
		for dec.PeekKind() != '}' {
			name, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			k := name.String() // before the next read voids the token
			v, err := readNode(dec)
			if err != nil {
				return nil, err
			}
			n.members[k] = v
		}
		_, err = dec.ReadToken()
	case '[':
		for dec.PeekKind() != ']' {
			v, err := readNode(dec)
			if err != nil {
				return nil, err
			}
			n.elems = append(n.elems, v)
		}
		_, err = dec.ReadToken()
	default:
		n.text = tok.String()
	}
	return n, err
}

func (n *node) equal(o *node) bool {
	if n.kind != o.kind || n.text != o.text || len(n.members) != len(o.members) || len(n.elems) != len(o.elems) {
		return false
	}
	for k, v := range n.members {
		w, ok := o.members[k]
		if !ok || !v.equal(w) {
			return false
		}
	}
	for i, v := range n.elems {
		if !v.equal(o.elems[i]) {
			return false
		}
	}
	return true
}
