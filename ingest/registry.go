package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/big"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/tallyhq/tally/event"
)

// schemaURL is the name a size schema is compiled under. It is never fetched.
const schemaURL = "urn:tally:size-schema"

// noLoader refuses every external reference, so a registered schema can make
// the server read neither files nor the network.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %s is not allowed in a size schema", url)
}

// compileSizeSchema compiles doc as a JSON Schema the way the registry does:
// draft 2020-12 unless doc names another with $schema, format assertions on,
// and no external reference ($ref to a URL or file) resolved. It is safe for
// concurrent use.
//
// A document that does not compile is refused with an
// [*event.ValidationError] (matching [event.ErrInvalid]), tally's one
// validation error, listing every problem the compiler reports. Each
// problem's Member is the JSON Pointer of the offending keyword in doc
// ("/properties/gb/minimum"; "" for the document as a whole), its Rule one
// of [event.RuleSyntax] (not JSON), [event.RuleDuplicateMember],
// [event.RuleUTF8], [event.RuleNumberRange] (below) or [event.RuleSchema]
// (doc is not a valid JSON Schema there: the meta-schema or the compiler
// refuses it), and its Message the compiler's.
//
// doc must be strict JSON as the events are (RFC 7493: no member given twice,
// valid UTF-8), so that the schema the registry keeps is the schema that
// validates: a duplicated member would otherwise be read as its last copy.
// Every number in doc must lie in the range the validator judges
// ([MaxNumberDigits], [MaxNumberExponent]): a bound such as
// "minimum": 1e1000001 could never be enforced, so it is refused, naming
// the keyword. So is a count keyword (maxLength, minItems, …) above
// math.MaxInt, which the validator would enforce as its low bits
// ("maxLength": 1e300 as 0).
//
// The cost of validating one size is bounded: a document whose $ref graph
// has a cycle ({"$ref":"#"}, which would refuse every size) is refused at
// the $ref, rule [event.RuleSchema]; so is one that nests subschemas deeper
// than [MaxSchemaDepth] (rule [event.RuleDepth]) or costs more than
// [MaxSchemaCost] subschemas once every $ref is unfolded (rule
// [event.RuleSchema], at the subschema that passes the bound), and one
// whose pattern is longer than [MaxRegexLength] bytes. In a size, a string
// of format "regex" longer than [MaxRegexLength] bytes is refused
// (rule format) rather than compiled.
func compileSizeSchema(doc jsontext.Value) (*jsonschema.Schema, error) {
	sch, costErr, err := compileSizeSchemaCost(doc)
	if err != nil {
		return nil, err
	}
	if costErr != nil {
		return nil, costErr
	}
	return sch, nil
}

// compileSizeSchemaCost is compileSizeSchema returning the refusal by the
// bounds on evaluation cost (checkSchemaCost) apart, with the compiled
// schema, so that a row stored before those bounds still loads.
func compileSizeSchemaCost(doc jsontext.Value) (_ *jsonschema.Schema, costErr, err error) {
	if err := checkStrictJSON(doc); err != nil {
		return nil, nil, err
	}
	if ptrs, total, err := numbersOutOfRange(doc, 1); err != nil {
		return nil, nil, schemaProblem("", event.RuleSyntax, "not a JSON document: "+err.Error())
	} else if total > 0 {
		more := ""
		if total > 1 {
			more = fmt.Sprintf(" (and %d more numbers)", total-1)
		}
		return nil, nil, schemaProblem(ptrs[0], event.RuleNumberRange, msgNumberRange+", so it cannot be enforced"+more)
	}
	if ptr, total, err := countsOutOfRange(doc); err != nil {
		return nil, nil, schemaProblem("", event.RuleSyntax, "not a JSON document: "+err.Error())
	} else if total > 0 {
		more := ""
		if total > 1 {
			more = fmt.Sprintf(" (and %d more counts)", total-1)
		}
		return nil, nil, schemaProblem(ptr, event.RuleNumberRange, msgCountRange+", so it cannot be enforced"+more)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, nil, schemaProblem("", event.RuleSyntax, "not a JSON document: "+err.Error())
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(noLoader{})
	c.UseRegexpEngine(boundedRegexp)
	if err := c.AddResource(schemaURL, v); err != nil {
		return nil, nil, compileError(err)
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, nil, compileError(err)
	}
	return sch, checkSchemaCost(v), nil
}

// schemaProblem is the refusal of a size schema with one problem.
func schemaProblem(member, rule, msg string) error {
	return &event.ValidationError{Problems: []event.Problem{{Member: event.SafePointer(member), Rule: rule, Message: truncate(msg)}}}
}

// compileError turns an error of the compiler into the refusal of the
// document: a document the meta-schema refuses lists one problem per leaf
// error (leafProblems: at the keyword's JSON Pointer, the rule the
// meta-schema keyword that failed, such as type or format), at most
// maxSizeProblems of them; any other error of the compiler (an external
// reference, …) is one problem of the whole document, rule
// [event.RuleSchema], with the compiler's message.
func compileError(err error) error {
	var (
		sve  *jsonschema.SchemaValidationError
		verr *jsonschema.ValidationError
	)
	if !errors.As(err, &sve) || !errors.As(sve.Err, &verr) {
		msg := err.Error()
		var re *jsonschema.InvalidRegexError
		if errors.As(err, &re) {
			msg = fmt.Sprintf("invalid regular expression %q: %v", re.Regex, re.Err)
		}
		return schemaProblem("", event.RuleSchema, strings.ReplaceAll(msg, `"`+schemaURL+`"`, "the schema"))
	}
	ps := leafProblems(verr, "")
	if len(ps) > maxSizeProblems {
		ps = ps[:maxSizeProblems]
	}
	return &event.ValidationError{Problems: ps}
}

// registry caches compiled size schemas by (platform, resource_type),
// remembering the Version (and document) each was compiled from. A lookup
// with a row of another Version recompiles, so a put through any process
// sharing the store is seen at the next batch. Safe for concurrent use.
type registry struct {
	mu    sync.Mutex
	cache map[pair]compiled
}

type pair struct{ a, b string }

type compiled struct {
	version  int64
	doc      jsontext.Value
	schema   *jsonschema.Schema
	accepted *verdicts
}

// schema returns the compiled schema of rt and the sizes it is known to
// accept, from the cache when rt's Version and document are the cached
// ones. A recompiled schema starts with no known sizes.
func (r *registry) schema(rt ResourceType) (*jsonschema.Schema, *verdicts, error) {
	k := pair{rt.Platform, rt.ResourceType}
	r.mu.Lock()
	c, ok := r.cache[k]
	r.mu.Unlock()
	if ok && c.version == rt.Version && bytes.Equal(c.doc, rt.SizeSchema) {
		return c.schema, c.accepted, nil
	}
	sch, costErr, err := compileSizeSchemaCost(rt.SizeSchema)
	if err != nil {
		return nil, nil, err
	}
	c = compiled{version: rt.Version, doc: bytes.Clone(rt.SizeSchema), schema: sch, accepted: newVerdicts()}
	if costErr != nil {
		// A row stored before the bounds on evaluation cost: its sizes are
		// refused, each item a dead letter naming the bound, rather than
		// evaluated at unbounded cost or failing the whole batch.
		c.accepted.all = []string{fmt.Sprintf("/payload/size: %s: the registered size schema of (%s, %s) version %d is over this server's bounds on evaluation cost (%v); put it again within them",
			event.RuleSchema, rt.Platform, rt.ResourceType, rt.Version, costErr)}
	}
	r.mu.Lock()
	if r.cache == nil {
		r.cache = make(map[pair]compiled)
	}
	r.cache[k] = c
	r.mu.Unlock()
	return sch, c.accepted, nil
}

// Bounds of one compiled schema's verdicts: how many sizes it remembers
// and the longest size it remembers, in bytes (at most about 1.5 MiB per
// registered pair).
const (
	maxVerdicts    = 4096
	maxVerdictSize = 256
)

// verdicts are the sizes (their exact bytes, after size names) that one
// compiled schema judged, with its verdict, remembered across batches
// (sizes repeat, a flavor's or a volume type's in every batch). Validation
// is a pure function of the schema's document and the size's bytes (no
// loader, no clock), so a remembered size is judged again without being
// read: an accepted one is accepted, a refused one refused with the
// problems it was refused with (a batch of 1000 equal refused sizes costs
// one validation, not 1000). A put of the pair's schema changes its
// Version, which recompiles it with empty verdicts. When full, it forgets
// everything and starts over. Safe for concurrent use.
type verdicts struct {
	mu    sync.RWMutex
	sizes map[string][]string // nil: accepted; else the refusal's problems
	all   []string            // when set, every size is refused with these problems
}

func newVerdicts() *verdicts { return &verdicts{sizes: make(map[string][]string)} }

// has reports whether size was accepted.
func (v *verdicts) has(size []byte) bool {
	problems, ok := v.get(size)
	return ok && problems == nil
}

// get returns the verdict on size: ok false when size was not judged,
// else problems nil when it was accepted, or the problems it was refused
// with.
func (v *verdicts) get(size []byte) (problems []string, ok bool) {
	if v.all != nil {
		return v.all, true
	}
	v.mu.RLock()
	problems, ok = v.sizes[string(size)]
	v.mu.RUnlock()
	return problems, ok
}

// add remembers that size was accepted, unless it is longer than
// maxVerdictSize.
func (v *verdicts) add(size []byte) { v.put(size, nil) }

// put remembers the verdict on size (problems nil: accepted), unless size
// is longer than maxVerdictSize.
func (v *verdicts) put(size []byte, problems []string) {
	if len(size) > maxVerdictSize {
		return
	}
	v.mu.Lock()
	if len(v.sizes) >= maxVerdicts {
		clear(v.sizes)
	}
	v.sizes[string(size)] = problems
	v.mu.Unlock()
}

// invalidate drops the cached schema of one pair.
func (r *registry) invalidate(platform, resourceType string) {
	r.mu.Lock()
	delete(r.cache, pair{platform, resourceType})
	r.mu.Unlock()
}

var printer = message.NewPrinter(language.English)

// maxSizeProblems bounds how many problems one size_schema reason lists.
const maxSizeProblems = 10

// validateSize validates size against sch and returns nil, or the problems,
// one per leaf error, each "<member path>: <rule>: <message>" with the path a
// JSON Pointer from the event (/payload/size/vcpus), sorted, at most
// maxSizeProblems of them followed by a count of the rest.
func validateSize(sch *jsonschema.Schema, size jsontext.Value) ([]string, error) {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(size))
	if err != nil {
		return nil, fmt.Errorf("ingest: read size for its schema: %w", err)
	}
	err = sch.Validate(inst)
	if err == nil {
		return nil, nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return nil, fmt.Errorf("ingest: validate size: %w", err)
	}
	ps := leafProblems(verr, "/payload/size")
	out := make([]string, 0, len(ps)+1)
	for _, p := range ps {
		out = append(out, p.String())
	}
	if len(out) > maxSizeProblems {
		rest := len(out) - maxSizeProblems
		out = append(out[:maxSizeProblems], fmt.Sprintf("and %d more", rest))
	}
	return out, nil
}

// leafProblems lists the leaf errors of verr, one problem per leaf (one per
// missing member of a required), each at base followed by the instance
// location (a JSON Pointer), its rule the failing keyword and its message
// in words, sorted by [event.Problem.String]; a verr without leaves is one
// problem at base, rule [event.RuleSchema].
func leafProblems(verr *jsonschema.ValidationError, base string) []event.Problem {
	var out []event.Problem
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		path := base + pointer(e.InstanceLocation)
		if req, ok := e.ErrorKind.(*kind.Required); ok {
			for _, m := range req.Missing {
				out = append(out, event.Problem{Member: event.SafePointer(path + pointer([]string{m})), Rule: event.RuleRequired, Message: "is required"})
			}
			return
		}
		rule := event.RuleSchema
		if kp := e.ErrorKind.KeywordPath(); len(kp) > 0 {
			rule = kp[len(kp)-1]
		}
		out = append(out, event.Problem{Member: event.SafePointer(path), Rule: rule, Message: problemMessage(e.ErrorKind, rule)})
	}
	walk(verr)
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	if len(out) == 0 {
		out = []event.Problem{{Member: event.SafePointer(base), Rule: event.RuleSchema, Message: truncate(verr.ErrorKind.LocalizedString(printer))}}
	}
	return out
}

// maxProblemMessage bounds one problem's message in bytes, so a long value
// is never quoted back whole.
const maxProblemMessage = 200

// problemMessage says what a leaf error asks for, in words; numbers exactly.
func problemMessage(k jsonschema.ErrorKind, rule string) string {
	var msg string
	switch k := k.(type) {
	case *kind.Minimum:
		msg = "must be at least " + ratText(k.Want) + ", is " + ratText(k.Got)
	case *kind.ExclusiveMinimum:
		msg = "must be greater than " + ratText(k.Want) + ", is " + ratText(k.Got)
	case *kind.Maximum:
		msg = "must be at most " + ratText(k.Want) + ", is " + ratText(k.Got)
	case *kind.ExclusiveMaximum:
		msg = "must be less than " + ratText(k.Want) + ", is " + ratText(k.Got)
	case *kind.Type:
		msg = "must be " + strings.Join(k.Want, " or ") + ", is " + k.Got
	default:
		msg = strings.TrimPrefix(k.LocalizedString(printer), rule+": ")
	}
	return truncate(msg)
}

// truncate bounds msg to maxProblemMessage bytes, cut at a rune boundary.
func truncate(msg string) string {
	if len(msg) > maxProblemMessage {
		cut := maxProblemMessage
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}

// ratText writes r as a decimal, exactly when it terminates within 30
// digits.
func ratText(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	s := strings.TrimRight(r.FloatString(30), "0")
	return strings.TrimSuffix(s, ".")
}

// pointer renders tokens as a JSON Pointer suffix ("" for none).
func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		t = strings.ReplaceAll(t, "~", "~0")
		b.WriteString(strings.ReplaceAll(t, "/", "~1"))
	}
	return b.String()
}

// checkStrictJSON refuses a document with a member given twice, invalid
// UTF-8 or trailing data, naming where (a JSON Pointer).
func checkStrictJSON(doc jsontext.Value) error {
	dec := jsontext.NewDecoder(bytes.NewReader(doc))
	if _, err := dec.ReadValue(); err != nil {
		var se *jsontext.SyntacticError
		if errors.As(err, &se) {
			ptr := event.SafePointer(string(se.JSONPointer))
			if errors.Is(se.Err, jsontext.ErrDuplicateName) {
				return schemaProblem(ptr, event.RuleDuplicateMember, "is given more than once (the schema must be strict JSON)")
			}
			return schemaProblem(ptr, event.RuleSyntax, "invalid JSON: "+se.Err.Error())
		}
		return schemaProblem("", event.RuleSyntax, "not a JSON document: "+err.Error())
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return schemaProblem("", event.RuleSyntax, "not a JSON document: data after the schema")
	}
	return nil
}
