package reconcile

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/sizenames"
)

// MaxResources is the most resources, and the most deletes, one
// observation may list ([ingest.MaxSyncBatch] together).
const MaxResources = ingest.MaxSyncBatch / 2

// Observation is what a reconciler saw of one cloud at ObservedAt: the
// input of [Service.Run] and the body of POST /api/v1/clouds/{cloud}/sync.
// The cloud is the call's. [Decode] reads it from JSON; [Observation.Check]
// judges it.
type Observation struct {
	// Platform is the platform of every resource listed, such as
	// "openstack".
	Platform string `json:"platform"`
	// ObservedAt is when the listings were taken (before the first of
	// them); the synthetic creates and updates carry it as their timestamp.
	ObservedAt time.Time `json:"observed_at"`
	// CompleteTypes are the resource types the reconciler enumerated
	// completely (every resource of the cloud, whatever its project). Only
	// they yield a sync.delete for a resource not listed.
	CompleteTypes []string `json:"complete_types,omitempty"`
	// Resources are the resources seen, each once.
	Resources []Resource `json:"resources,omitempty"`
	// Deletes are the deletes the platform dated (nova's servers deleted
	// since a time), each of a complete type and not listed in Resources.
	Deletes []Delete `json:"deletes,omitempty"`
	// SizeNames, when not nil (an empty list included), is the cloud's
	// complete list of size names, which replaces its rows before the drift
	// is computed (canonical-event.md, Size names). nil (absent or null in
	// JSON) leaves the rows as they are; it encodes so (omitted when nil,
	// [] when empty).
	SizeNames []SizeName `json:"size_names,omitzero"`
}

// Resource is one resource as the platform lists it.
type Resource struct {
	ResourceType string `json:"resource_type"`
	ResourceID   string `json:"resource_id"`
	ProjectID    string `json:"project_id"`
	// State is the platform's state; never "deleted" (list it in
	// Observation.Deletes, or leave it out).
	State string `json:"state"`
	// Size is the complete size object as the listing gives it, exact
	// JSON; the size names apply to it as to a collector's event.
	Size jsontext.Value `json:"size"`
}

// Delete is a delete the platform dated.
type Delete struct {
	ResourceType string    `json:"resource_type"`
	ResourceID   string    `json:"resource_id"`
	DeletedAt    time.Time `json:"deleted_at"`
}

// SizeName is one size-name row of the observed cloud ([sizenames.Row]
// without the cloud).
type SizeName struct {
	ResourceType string `json:"resource_type"`
	Member       string `json:"member"`
	Value        string `json:"value"`
	Name         string `json:"name"`
}

// wire is the JSON form of an Observation, times as text so that every
// bad one is named.
type wire struct {
	Platform      string       `json:"platform"`
	ObservedAt    string       `json:"observed_at"`
	CompleteTypes []string     `json:"complete_types"`
	Resources     []Resource   `json:"resources"`
	Deletes       []wireDelete `json:"deletes"`
	SizeNames     []SizeName   `json:"size_names"`
}

type wireDelete struct {
	ResourceType string `json:"resource_type"`
	ResourceID   string `json:"resource_id"`
	DeletedAt    string `json:"deleted_at"`
}

// Decode reads an observation from JSON and checks it ([Observation.Check]).
// Member names are case-sensitive and an unknown one is refused, as is a
// member given twice, invalid JSON or UTF-8, and a value of the wrong JSON
// kind; times are RFC 3339 with a zone ([event.ParseTime]), kept in UTC to
// the microsecond. Every error is an [*event.ValidationError] naming the
// members (JSON Pointers) and the rules: for malformed JSON the first
// problem the decoder met, else every problem of Check (the first
// [MaxProblems], then their count). Decode is pure,
// its cost linear in len(b).
func Decode(b []byte) (Observation, error) {
	var w wire
	if err := json.Unmarshal(b, &w, json.RejectUnknownMembers(true)); err != nil {
		return Observation{}, &event.ValidationError{Problems: []event.Problem{decodeProblem(err)}}
	}
	obs := Observation{
		Platform: w.Platform, CompleteTypes: w.CompleteTypes, Resources: w.Resources, SizeNames: w.SizeNames,
	}
	var problems []event.Problem
	obs.ObservedAt, problems = parseTime(problems, "/observed_at", w.ObservedAt)
	if w.Deletes != nil {
		obs.Deletes = make([]Delete, len(w.Deletes))
	}
	for i, d := range w.Deletes {
		obs.Deletes[i] = Delete{ResourceType: d.ResourceType, ResourceID: d.ResourceID}
		obs.Deletes[i].DeletedAt, problems = parseTime(problems, "/deletes/"+strconv.Itoa(i)+"/deleted_at", d.DeletedAt)
	}
	problems = append(problems, obs.problems(len(problems) == 0)...)
	if problems != nil {
		return Observation{}, &event.ValidationError{Problems: bound(problems)}
	}
	return obs, nil
}

// MaxProblems is how many problems a refusal of an observation lists
// ([Decode], [Observation.Check]): the first ones in document order, then
// one (member "", rule maximum) saying how many more there are, so that
// the answer to a body of any size stays small.
const MaxProblems = 100

// bound keeps the first MaxProblems of ps and counts the rest.
func bound(ps []event.Problem) []event.Problem {
	if len(ps) <= MaxProblems {
		return ps
	}
	more := len(ps) - MaxProblems
	return append(ps[:MaxProblems:MaxProblems], event.Problem{Member: "", Rule: event.RuleMaximum,
		Message: fmt.Sprintf("and %d more problems: a refusal lists the first %d", more, MaxProblems)})
}

func parseTime(problems []event.Problem, ptr, s string) (time.Time, []event.Problem) {
	if s == "" {
		return time.Time{}, problems // Check names it
	}
	t, err := event.ParseTime(s)
	if err != nil {
		return time.Time{}, append(problems, event.Problem{Member: ptr, Rule: event.RuleFormat, Message: event.TimeMessage(err)})
	}
	return event.Normalize(t), problems
}

// decodeProblem names what the JSON decoder refused.
func decodeProblem(err error) event.Problem {
	var se *json.SemanticError
	if errors.As(err, &se) {
		ptr := event.SafePointer(string(se.JSONPointer))
		switch {
		case errors.Is(err, json.ErrUnknownName):
			return event.Problem{Member: ptr, Rule: event.RuleAdditionalProperties, Message: "is not a member of an observation (names are case-sensitive)"}
		case se.JSONKind != 0:
			return event.Problem{Member: ptr, Rule: event.RuleType, Message: fmt.Sprintf("must not be a JSON %s here", se.JSONKind)}
		}
		return event.Problem{Member: ptr, Rule: event.RuleType, Message: "has the wrong JSON type"}
	}
	var sx *jsontext.SyntacticError
	if errors.As(err, &sx) {
		ptr := event.SafePointer(string(sx.JSONPointer))
		if errors.Is(err, jsontext.ErrDuplicateName) {
			return event.Problem{Member: ptr, Rule: event.RuleDuplicateMember, Message: "is given twice"}
		}
		if strings.Contains(sx.Err.Error(), "UTF-8") {
			return event.Problem{Member: ptr, Rule: event.RuleUTF8, Message: "must be valid UTF-8"}
		}
		return event.Problem{Member: ptr, Rule: event.RuleSyntax, Message: "is not valid JSON"}
	}
	return event.Problem{Member: "", Rule: event.RuleSyntax, Message: "is not valid JSON"}
}

// Check returns an [*event.ValidationError] naming every rule the
// observation breaks (each member a JSON Pointer into its JSON form; the
// first [MaxProblems], then their count), or nil:
//
//   - platform, and every resource_type, resource_id and project_id, is
//     required, at most [event.IdentifierMaxLen] bytes of UTF-8 without NUL;
//     platform is neither "meta" nor "partner" (rule reserved);
//   - observed_at is required;
//   - each complete type is non-empty and given once (duplicateMember);
//   - each resource has a state (at most [event.StateMaxLen] bytes, not
//     "deleted": rule reserved) and an object size (type), and names a
//     (resource_type, resource_id) no earlier resource names
//     (duplicateMember); at most [MaxResources] resources (maximum);
//   - each delete names a complete type (enum) and a resource not listed in
//     resources (duplicateMember), its deleted_at required and not after
//     observed_at (maximum); at most [MaxResources] deletes;
//   - the size names follow [sizenames.CheckRows].
func (o Observation) Check() error {
	if p := o.problems(true); p != nil {
		return &event.ValidationError{Problems: bound(p)}
	}
	return nil
}

// problems lists o's problems; times are judged only when timesRead (a
// time Decode could not read is zero).
func (o Observation) problems(timesRead bool) []event.Problem {
	var ps probs
	ps.text("/platform", o.Platform, event.IdentifierMaxLen)
	if o.Platform == "meta" || o.Platform == "partner" {
		ps.add("/platform", event.RuleReserved, fmt.Sprintf("must not be %q: meta and partner name the virtual projects, which own no resources", o.Platform))
	}
	if timesRead && o.ObservedAt.IsZero() {
		ps.add("/observed_at", event.RuleRequired, "is required")
	}
	complete := map[string]bool{}
	for i, t := range o.CompleteTypes {
		ptr := "/complete_types/" + strconv.Itoa(i)
		ps.text(ptr, t, event.IdentifierMaxLen)
		if complete[t] {
			ps.add(ptr, event.RuleDuplicateMember, "is listed twice")
		}
		complete[t] = true
	}
	seen := o.checkResources(&ps)
	o.checkDeletes(&ps, complete, seen, timesRead)
	rows := make([]sizenames.Row, len(o.SizeNames))
	for i, n := range o.SizeNames {
		rows[i] = sizenames.Row{Cloud: "-", ResourceType: n.ResourceType, Member: n.Member, Value: n.Value, Name: n.Name}
		for _, f := range [...]struct{ name, v string }{{"resource_type", n.ResourceType}, {"member", n.Member}, {"value", n.Value}, {"name", n.Name}} {
			ps.utf8("/size_names/"+strconv.Itoa(i)+"/"+f.name, f.v)
		}
	}
	ps = append(ps, sizenames.CheckRows("/size_names", "-", rows)...)
	return ps
}

func (o Observation) checkResources(ps *probs) map[key]int {
	if len(o.Resources) > MaxResources {
		ps.add("/resources", event.RuleMaximum, fmt.Sprintf("lists %d resources; an observation lists at most %d", len(o.Resources), MaxResources))
	}
	seen := make(map[key]int, len(o.Resources))
	for i, r := range o.Resources {
		ptr := "/resources/" + strconv.Itoa(i)
		ps.text(ptr+"/resource_type", r.ResourceType, event.IdentifierMaxLen)
		ps.text(ptr+"/resource_id", r.ResourceID, event.IdentifierMaxLen)
		ps.text(ptr+"/project_id", r.ProjectID, event.IdentifierMaxLen)
		ps.text(ptr+"/state", r.State, event.StateMaxLen)
		if r.State == "deleted" {
			ps.add(ptr+"/state", event.RuleReserved, `must not be "deleted": a deleted resource is left out of resources (or listed in deletes)`)
		}
		switch r.Size.Kind() {
		case '{':
		case 0, 'n':
			ps.add(ptr+"/size", event.RuleRequired, "is required: the complete size object")
		default:
			ps.add(ptr+"/size", event.RuleType, "must be an object")
		}
		k := key{r.ResourceType, r.ResourceID}
		if j, dup := seen[k]; dup {
			ps.add(ptr, event.RuleDuplicateMember, fmt.Sprintf("names the resource /resources/%d names", j))
		} else {
			seen[k] = i
		}
	}
	return seen
}

func (o Observation) checkDeletes(ps *probs, complete map[string]bool, seen map[key]int, timesRead bool) {
	if len(o.Deletes) > MaxResources {
		ps.add("/deletes", event.RuleMaximum, fmt.Sprintf("lists %d deletes; an observation lists at most %d", len(o.Deletes), MaxResources))
	}
	dated := make(map[key]int, len(o.Deletes))
	for i, d := range o.Deletes {
		ptr := "/deletes/" + strconv.Itoa(i)
		ps.text(ptr+"/resource_type", d.ResourceType, event.IdentifierMaxLen)
		ps.text(ptr+"/resource_id", d.ResourceID, event.IdentifierMaxLen)
		if d.ResourceType != "" && !complete[d.ResourceType] {
			ps.add(ptr+"/resource_type", event.RuleEnum, "must be one of complete_types: a type not enumerated completely never yields a delete")
		}
		k := key{d.ResourceType, d.ResourceID}
		if j, listed := seen[k]; listed {
			ps.add(ptr, event.RuleDuplicateMember, fmt.Sprintf("names the resource /resources/%d lists as present", j))
		}
		if j, dup := dated[k]; dup {
			ps.add(ptr, event.RuleDuplicateMember, fmt.Sprintf("names the resource /deletes/%d names", j))
		} else {
			dated[k] = i
		}
		switch {
		case !timesRead:
		case d.DeletedAt.IsZero():
			ps.add(ptr+"/deleted_at", event.RuleRequired, "is required")
		case !o.ObservedAt.IsZero() && d.DeletedAt.After(o.ObservedAt):
			ps.add(ptr+"/deleted_at", event.RuleMaximum, "must not be after observed_at")
		}
	}
}

// key names a resource of the observed cloud.
type key struct{ resourceType, resourceID string }

// probs collects problems in order.
type probs []event.Problem

func (ps *probs) add(member, rule, msg string) {
	*ps = append(*ps, event.Problem{Member: member, Rule: rule, Message: msg})
}

// text checks a required string of at most max bytes.
func (ps *probs) text(ptr, v string, max int) {
	switch {
	case v == "":
		ps.add(ptr, event.RuleRequired, "is required")
	case len(v) > max:
		ps.add(ptr, event.RuleMaxLength, fmt.Sprintf("is %d bytes; at most %d bytes of UTF-8", len(v), max))
	}
	ps.utf8(ptr, v)
}

func (ps *probs) utf8(ptr, v string) {
	switch {
	case !utf8.ValidString(v):
		ps.add(ptr, event.RuleUTF8, "must be valid UTF-8")
	case strings.IndexByte(v, 0) >= 0:
		ps.add(ptr, event.RuleNUL, "must not hold NUL")
	}
}
