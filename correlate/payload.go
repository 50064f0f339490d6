package correlate

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/event"
)

// Payload is what a create carries (Meshery's EventPayload with the fields
// of event-correlation.md): the members a client may set, plus
// idempotencyKey. Every correlation field is optional.
//
// A Go string field left "" counts as omitted; pointer fields are nil when
// omitted. Extra keeps every further member the payload carried, by name,
// each value exactly as sent; it is stored with the event (Event.Extra) and
// never returned at the top level.
//
// Decode one from JSON with [DecodePayload] (or json.Unmarshal, which calls
// it); it encodes back to the same members with json.Marshal.
type Payload struct {
	Owner       string
	SystemID    string
	ActedUpon   string
	OperationID string
	// Category and Action are required.
	Category string
	Action   string
	// Severity "" means omitted: a new event gets informational, a
	// resolution keeps the stored severity.
	Severity Severity
	// Description nil means omitted: a new event gets "", a resolution keeps
	// the stored description.
	Description *string
	// Metadata is a JSON object, kept byte for byte; nil when omitted.
	Metadata jsontext.Value

	CorrelationKey string
	// OccurrenceCount is how many occurrences this create reports (≥ 1).
	OccurrenceCount *int64
	FirstSeenAt     *time.Time
	LastSeenAt      *time.Time
	ResolvedAt      *time.Time
	Source          string
	Type            string
	Specversion     string
	TraceID         string
	ParentID        string

	// IdempotencyKey makes the create safe to retry (step 1 and step 5).
	IdempotencyKey string

	// Extra holds the members not listed above.
	Extra map[string]jsontext.Value
}

func sortedKeys(m map[string]jsontext.Value) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// DecodePayload decodes one payload from a JSON object strictly and
// validates it, returning every problem at once as an
// [*event.ValidationError] (which matches [event.ErrInvalid]):
//
//   - member names are case-sensitive; a member given twice, invalid JSON or
//     invalid UTF-8 refuses the payload, naming the member where it can;
//   - a listed member of the wrong JSON type is refused; null counts as
//     omitted;
//   - occurrenceCount must be written as an integer (no fraction, no
//     exponent: 1.0 and 1e3 are refused), at least 1, and fit in an int64;
//   - date-times are RFC 3339 with "Z" or an offset; they are normalized to
//     UTC and truncated to microseconds;
//   - a listed string member sent as "" is refused when the rule has a
//     minimum length of 1;
//   - metadata and the value of every other member (kept in Payload.Extra)
//     are kept byte for byte as sent: white space, string escapes and number
//     literals included (docs/decisions.md, Faithfulness; the hostile-input rules). An extra
//     member's name is kept as the string it spells (its escapes decoded);
//     the listed members are decoded, so they are written back the
//     encoder's way;
//   - meshkit's snake_case acted_upon, operation_id and system_id (what
//     Meshery Server sends its remote provider) fill ActedUpon, OperationID
//     and SystemID; given beside the camelCase member with another value,
//     the snake_case member is refused (rule const). meshkit's id,
//     user_id, status, created_at, updated_at and deleted_at stay in Extra:
//     they never set what the server owns;
//   - then every rule of [Payload.Validate].
//
// It never panics, whatever data holds.
func DecodePayload(data []byte) (Payload, error) {
	var p Payload
	var ps problems
	var snake []snakeMember
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	syntax := func(err error) (Payload, error) {
		member := ""
		var se *jsontext.SyntacticError
		if errors.As(err, &se) {
			member = string(se.JSONPointer)
		}
		rule := event.RuleSyntax
		if errors.Is(err, jsontext.ErrDuplicateName) {
			rule = event.RuleDuplicateMember
		}
		ps.add(member, rule, "%s", syntaxMessage(err))
		return Payload{}, ps.err()
	}
	if ptr, deep := event.DeepPointer(data, event.MaxDepth); deep {
		ps.add(ptr, event.RuleDepth, "must not nest objects and arrays more than %d levels deep", event.MaxDepth)
		return Payload{}, ps.err()
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return syntax(err)
	}
	if tok.Kind() != '{' {
		ps.add("", event.RuleType, "the payload must be a JSON object")
		return Payload{}, ps.err()
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return syntax(err)
		}
		name := tok.String()
		v, err := dec.ReadValue()
		if err != nil {
			return syntax(err)
		}
		if _, ok := meshkitMembers[name]; ok {
			snake = append(snake, snakeMember{name, v.Clone()})
			continue
		}
		p.set(&ps, name, v)
	}
	p.setMeshkit(&ps, snake)
	if _, err := dec.ReadToken(); err != nil {
		return syntax(err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		if err == nil {
			err = errors.New("unexpected data after the payload")
		}
		return syntax(err)
	}
	var vs problems
	p.validate(&vs)
	for _, v := range vs {
		if !ps.has(v.Member) {
			ps = append(ps, v)
		}
	}
	if len(ps) > 0 {
		slices.SortStableFunc(ps, func(a, b event.Problem) int { return memberIndex(a.Member) - memberIndex(b.Member) })
		return Payload{}, ps.err()
	}
	return p, nil
}

// meshkitMembers maps the snake_case members of meshkit's events.Event,
// which Meshery Server sends to its remote provider, to the listed members
// they name (docs/decisions.md, Meshery snake_case members): "meshkit's
// acted_upon, operation_id, system_id are recorded as actedUpon,
// operationId, systemId". meshkit's server-owned members (id, user_id,
// status, created_at, updated_at, deleted_at) are not listed: like any
// other unlisted member they are kept in Extra as sent, and never set the
// event's id, user, status or times.
var meshkitMembers = map[string]string{
	"acted_upon":   "actedUpon",
	"operation_id": "operationId",
	"system_id":    "systemId",
}

// snakeMember is one meshkit member of a payload, decoded after the others
// so that it can be compared with the camelCase member it names.
type snakeMember struct {
	name  string
	value jsontext.Value
}

// setMeshkit records each meshkit snake_case member as the member it names.
// When the camelCase member was sent too, the two must agree: a
// disagreement is refused naming the snake_case member (rule const), as
// neither value can be preferred silently.
func (p *Payload) setMeshkit(ps *problems, snake []snakeMember) {
	for _, m := range snake {
		camel := meshkitMembers[m.name]
		if m.value.Kind() == 'n' {
			continue // null counts as omitted
		}
		var q Payload
		var qs problems
		members[memberIndexes[camel]].decode(&q, &qs, "/"+m.name, m.value)
		if len(qs) > 0 {
			*ps = append(*ps, qs...)
			continue
		}
		field := map[string]*string{"actedUpon": &p.ActedUpon, "operationId": &p.OperationID, "systemId": &p.SystemID}[camel]
		got := map[string]string{"actedUpon": q.ActedUpon, "operationId": q.OperationID, "systemId": q.SystemID}[camel]
		if *field != "" && *field != got {
			ps.add("/"+m.name, event.RuleConst, "must equal %s when both are given", camel)
			continue
		}
		*field = got
	}
}

// memberIndex orders problems: the payload as a whole first, then the
// listed members in the order of members, then every other member.
func memberIndex(pointer string) int {
	if pointer == "" {
		return -1
	}
	if i, ok := memberIndexes[pointer[1:]]; ok {
		return i
	}
	return len(members)
}

func syntaxMessage(err error) string {
	var se *jsontext.SyntacticError
	if errors.As(err, &se) && se.Err != nil {
		return "invalid JSON: " + se.Err.Error()
	}
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return "invalid JSON: unexpected end of input"
	}
	return "invalid JSON: " + err.Error()
}

// member is one listed member of a payload: its JSON name and how its
// value is decoded into a [Payload]. The decoders add a problem, naming
// the member by its pointer m, when the value has the wrong type or form;
// null never reaches them (it counts as omitted).
type member struct {
	name   string
	decode func(p *Payload, ps *problems, m string, v jsontext.Value)
}

// members lists the members of a payload, in the order [Payload.Validate]
// reports them. A name not listed here is kept in Payload.Extra.
var members = []member{
	{"owner", stringMember(func(p *Payload) *string { return &p.Owner }, false)},
	{"systemId", stringMember(func(p *Payload) *string { return &p.SystemID }, false)},
	{"actedUpon", stringMember(func(p *Payload) *string { return &p.ActedUpon }, false)},
	{"operationId", stringMember(func(p *Payload) *string { return &p.OperationID }, false)},
	{"category", stringMember(func(p *Payload) *string { return &p.Category }, false)},
	{"action", stringMember(func(p *Payload) *string { return &p.Action }, false)},
	{"severity", decodeSeverity},
	{"description", decodeDescription},
	{"metadata", decodeMetadata},
	{"correlationKey", stringMember(func(p *Payload) *string { return &p.CorrelationKey }, true)},
	{"occurrenceCount", decodeOccurrenceCount},
	{"firstSeenAt", timeMember(func(p *Payload) **time.Time { return &p.FirstSeenAt })},
	{"lastSeenAt", timeMember(func(p *Payload) **time.Time { return &p.LastSeenAt })},
	{"resolvedAt", timeMember(func(p *Payload) **time.Time { return &p.ResolvedAt })},
	{"source", stringMember(func(p *Payload) *string { return &p.Source }, true)},
	{"type", stringMember(func(p *Payload) *string { return &p.Type }, true)},
	{"specversion", stringMember(func(p *Payload) *string { return &p.Specversion }, true)},
	{"traceId", stringMember(func(p *Payload) *string { return &p.TraceID }, true)},
	{"parentId", stringMember(func(p *Payload) *string { return &p.ParentID }, true)},
	{"idempotencyKey", stringMember(func(p *Payload) *string { return &p.IdempotencyKey }, true)},
}

// memberIndexes maps a listed member's name to its index in members.
var memberIndexes = func() map[string]int {
	m := make(map[string]int, len(members))
	for i, mb := range members {
		m[mb.name] = i
	}
	return m
}()

func isMember(name string) bool {
	_, ok := memberIndexes[name]
	return ok
}

// set decodes the value of one member into p: a listed member through its
// decoder, any other into Extra as sent.
func (p *Payload) set(ps *problems, name string, v jsontext.Value) {
	i, ok := memberIndexes[name]
	if !ok {
		if p.Extra == nil {
			p.Extra = make(map[string]jsontext.Value)
		}
		p.Extra[name] = v.Clone()
		return
	}
	if v.Kind() == 'n' {
		return // null counts as omitted
	}
	members[i].decode(p, ps, "/"+name, v)
}

// decodeString decodes a JSON string, adding a problem when v is not one,
// or is "" and nonEmpty is set.
func decodeString(ps *problems, m string, v jsontext.Value, nonEmpty bool) (string, bool) {
	if v.Kind() != '"' {
		ps.add(m, event.RuleType, "must be a string")
		return "", false
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		ps.add(m, event.RuleUTF8, "must be a valid string")
		return "", false
	}
	if nonEmpty && s == "" {
		ps.add(m, event.RuleMinLength, "must not be empty")
		return "", false
	}
	return s, true
}

func stringMember(field func(*Payload) *string, nonEmpty bool) func(*Payload, *problems, string, jsontext.Value) {
	return func(p *Payload, ps *problems, m string, v jsontext.Value) {
		if s, ok := decodeString(ps, m, v, nonEmpty); ok {
			*field(p) = s
		}
	}
}

func timeMember(field func(*Payload) **time.Time) func(*Payload, *problems, string, jsontext.Value) {
	return func(p *Payload, ps *problems, m string, v jsontext.Value) {
		s, ok := decodeString(ps, m, v, true)
		if !ok {
			return
		}
		t, err := event.ParseTime(s)
		if err != nil {
			ps.add(m, event.RuleFormat, "%s", event.TimeMessage(err))
			return
		}
		t = event.Normalize(t)
		*field(p) = &t
	}
}

func decodeSeverity(p *Payload, ps *problems, m string, v jsontext.Value) {
	if s, ok := decodeString(ps, m, v, true); ok {
		p.Severity = Severity(s) // Validate checks it is one of Severities
	}
}

func decodeDescription(p *Payload, ps *problems, m string, v jsontext.Value) {
	if s, ok := decodeString(ps, m, v, false); ok {
		p.Description = &s
	}
}

func decodeMetadata(p *Payload, ps *problems, m string, v jsontext.Value) {
	if v.Kind() != '{' {
		ps.add(m, event.RuleType, "must be a JSON object")
		return
	}
	p.Metadata = v.Clone()
}

func decodeOccurrenceCount(p *Payload, ps *problems, m string, v jsontext.Value) {
	if v.Kind() != '0' {
		ps.add(m, event.RuleType, "must be an integer")
		return
	}
	if bytes.ContainsAny(v, ".eE") {
		ps.add(m, event.RuleType, "must be an integer written without a fraction or exponent")
		return
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	switch {
	case err != nil && v[0] == '-':
		ps.add(m, event.RuleMinimum, "must be an integer of at least 1")
	case err != nil:
		ps.add(m, event.RuleMaximum, "must be at most 9223372036854775807")
	default:
		p.OccurrenceCount = &n
	}
}

// UnmarshalJSON decodes with [DecodePayload].
func (p *Payload) UnmarshalJSON(data []byte) error {
	d, err := DecodePayload(data)
	if err != nil {
		return err
	}
	*p = d
	return nil
}

// payloadWire is the JSON shape of the listed members.
type payloadWire struct {
	Owner           string     `json:"owner,omitzero"`
	SystemID        string     `json:"systemId,omitzero"`
	ActedUpon       string     `json:"actedUpon,omitzero"`
	OperationID     string     `json:"operationId,omitzero"`
	Category        string     `json:"category"`
	Action          string     `json:"action"`
	Severity        Severity   `json:"severity,omitzero"`
	Description     *string    `json:"description,omitzero"`
	CorrelationKey  string     `json:"correlationKey,omitzero"`
	OccurrenceCount *int64     `json:"occurrenceCount,omitzero"`
	FirstSeenAt     *time.Time `json:"firstSeenAt,omitzero"`
	LastSeenAt      *time.Time `json:"lastSeenAt,omitzero"`
	ResolvedAt      *time.Time `json:"resolvedAt,omitzero"`
	Source          string     `json:"source,omitzero"`
	Type            string     `json:"type,omitzero"`
	Specversion     string     `json:"specversion,omitzero"`
	TraceID         string     `json:"traceId,omitzero"`
	ParentID        string     `json:"parentId,omitzero"`
	IdempotencyKey  string     `json:"idempotencyKey,omitzero"`
}

// MarshalJSON encodes p as a JSON object: the listed members that are set,
// then metadata and the Extra members in name order, each value byte for
// byte as stored.
func (p Payload) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(payloadWire{
		Owner: p.Owner, SystemID: p.SystemID, ActedUpon: p.ActedUpon, OperationID: p.OperationID,
		Category: p.Category, Action: p.Action, Severity: p.Severity, Description: p.Description,
		CorrelationKey: p.CorrelationKey, OccurrenceCount: p.OccurrenceCount,
		FirstSeenAt: p.FirstSeenAt, LastSeenAt: p.LastSeenAt, ResolvedAt: p.ResolvedAt,
		Source: p.Source, Type: p.Type, Specversion: p.Specversion, TraceID: p.TraceID,
		ParentID: p.ParentID, IdempotencyKey: p.IdempotencyKey,
	})
	if err != nil {
		return nil, err
	}
	// json.Marshal would compact metadata and the extra values; splice them
	// in byte for byte instead. b is a non-empty object ending in '}'.
	out := b[: len(b)-1 : len(b)-1]
	if p.Metadata != nil {
		out = append(out, `,"metadata":`...)
		out = append(out, p.Metadata...)
	}
	if len(p.Extra) > 0 {
		extra, err := EncodeExtra(p.Extra)
		if err != nil {
			return nil, err
		}
		out = append(out, ',')
		out = append(out, extra[1:len(extra)-1]...)
	}
	return append(out, '}'), nil
}

// EncodeExtra encodes extra members as one JSON object, names in order and
// each value byte for byte; nil or empty gives "{}". Stores use it to keep
// Event.Extra in one column; [DecodeExtra] reverses it.
func EncodeExtra(extra map[string]jsontext.Value) ([]byte, error) {
	b := []byte{'{'}
	for i, k := range sortedKeys(extra) {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = jsontext.AppendQuote(b, k); err != nil {
			return nil, err
		}
		b = append(b, ':')
		b = append(b, extra[k]...)
	}
	return append(b, '}'), nil
}

// DecodeExtra decodes what [EncodeExtra] wrote; "{}" gives nil.
func DecodeExtra(data []byte) (map[string]jsontext.Value, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	var m map[string]jsontext.Value
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		name := tok.String() // before the next read voids tok
		v, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		if m == nil {
			m = make(map[string]jsontext.Value)
		}
		m[name] = v.Clone()
	}
	return m, nil
}
