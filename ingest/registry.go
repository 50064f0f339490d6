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

// ErrInvalidSchema is matched (errors.Is) by every [*SchemaError].
var ErrInvalidSchema = errors.New("ingest: invalid size schema")

// SchemaError refuses a resource type put through [Service.PutResourceType]
// (canonical-event.md, Size schemas): its names are empty or too long, or its
// size schema does not compile. Message is the compiler's message (or the
// rule broken); it matches [ErrInvalidSchema]. The HTTP layer answers 400.
type SchemaError struct {
	Platform     string
	ResourceType string
	Message      string
}

// Error renders "ingest: size schema of (platform, resource_type): message".
func (e *SchemaError) Error() string {
	return fmt.Sprintf("ingest: size schema of (%s, %s): %s", e.Platform, e.ResourceType, e.Message)
}

// Is reports whether target is [ErrInvalidSchema].
func (e *SchemaError) Is(target error) bool { return target == ErrInvalidSchema }

// schemaURL is the name a size schema is compiled under. It is never fetched.
const schemaURL = "urn:tally:size-schema"

// noLoader refuses every external reference, so a registered schema can make
// the server read neither files nor the network.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %s is not allowed in a size schema", url)
}

// CompileSizeSchema compiles doc as a JSON Schema the way the registry does:
// draft 2020-12 unless doc names another with $schema, format assertions on,
// and no external reference ($ref to a URL or file) resolved. It returns the
// compiler's message as the error when doc does not compile. It is safe for
// concurrent use.
//
// doc must be strict JSON as the events are (RFC 7493: no member given twice,
// valid UTF-8), so that the schema the registry keeps is the schema that
// validates: a duplicated member would otherwise be read as its last copy.
// Every number in doc must lie in the range the validator judges
// ([MaxNumberDigits], [MaxNumberExponent]): a bound such as
// "minimum": 1e1000001 could never be enforced, so it is refused, the error
// naming the keyword by its JSON Pointer ("/properties/gb/minimum"). So is
// a count keyword (maxLength, minItems, …) above math.MaxInt, which the
// validator would enforce as its low bits ("maxLength": 1e300 as 0).
func CompileSizeSchema(doc jsontext.Value) (*jsonschema.Schema, error) {
	return compileSizeSchema(doc, "")
}

// compileSizeSchema is [CompileSizeSchema] for a doc found at the JSON
// Pointer base of a larger document: every member its error names is
// prefixed with base, so that it points into what the client sent
// (/size_schema/maxLength inside the wrapper of PUT
// /api/v1/resource-types).
func compileSizeSchema(doc jsontext.Value, base string) (*jsonschema.Schema, error) {
	if err := checkStrictJSON(doc, base); err != nil {
		return nil, err
	}
	if ptrs, total, err := numbersOutOfRange(doc, 1); err != nil {
		return nil, fmt.Errorf("not a JSON document: %v", err)
	} else if total > 0 {
		more := ""
		if total > 1 {
			more = fmt.Sprintf(" (and %d more numbers)", total-1)
		}
		return nil, fmt.Errorf("%s%s: %s: %s, so it cannot be enforced%s", base, ptrs[0], event.RuleNumberRange, msgNumberRange, more)
	}
	if ptr, total, err := countsOutOfRange(doc); err != nil {
		return nil, fmt.Errorf("not a JSON document: %v", err)
	} else if total > 0 {
		more := ""
		if total > 1 {
			more = fmt.Sprintf(" (and %d more counts)", total-1)
		}
		return nil, fmt.Errorf("%s%s: %s: %s, so it cannot be enforced%s", base, ptr, event.RuleNumberRange, msgCountRange, more)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("not a JSON document: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, v); err != nil {
		return nil, err
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		// A document the metaschema refuses: one problem per leaf error,
		// "<member>: <keyword>: <message>", the member a JSON Pointer into
		// what was sent, instead of the compiler's indented tree.
		var meta *jsonschema.SchemaValidationError
		var verr *jsonschema.ValidationError
		if errors.As(err, &meta) && errors.As(meta.Err, &verr) {
			return nil, errors.New(strings.Join(capProblems(leafProblems(verr, base)), "; "))
		}
		if base != "" {
			return nil, fmt.Errorf("%s: %w", base, err)
		}
		return nil, err
	}
	return sch, nil
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
	version int64
	doc     jsontext.Value
	schema  *jsonschema.Schema
}

// schema returns the compiled schema of rt, from the cache when rt's Version
// and document are the cached ones.
func (r *registry) schema(rt ResourceType) (*jsonschema.Schema, error) {
	k := pair{rt.Platform, rt.ResourceType}
	r.mu.Lock()
	c, ok := r.cache[k]
	r.mu.Unlock()
	if ok && c.version == rt.Version && bytes.Equal(c.doc, rt.SizeSchema) {
		return c.schema, nil
	}
	sch, err := CompileSizeSchema(rt.SizeSchema)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if r.cache == nil {
		r.cache = make(map[pair]compiled)
	}
	r.cache[k] = compiled{version: rt.Version, doc: bytes.Clone(rt.SizeSchema), schema: sch}
	r.mu.Unlock()
	return sch, nil
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
	return capProblems(leafProblems(verr, "/payload/size")), nil
}

// leafProblems renders the leaf errors of verr, one per problem, each
// "<member path>: <rule>: <message>" with the path base followed by the
// instance location (a JSON Pointer), sorted; a verr without leaves is
// one problem at base.
func leafProblems(verr *jsonschema.ValidationError, base string) []string {
	var out []string
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
				out = append(out, path+pointer([]string{m})+": required: is required")
			}
			return
		}
		rule := "schema"
		if kp := e.ErrorKind.KeywordPath(); len(kp) > 0 {
			rule = kp[len(kp)-1]
		}
		out = append(out, path+": "+rule+": "+problemMessage(e.ErrorKind, rule))
	}
	walk(verr)
	sort.Strings(out)
	if len(out) == 0 {
		out = []string{base + ": schema: " + verr.ErrorKind.LocalizedString(printer)}
	}
	return out
}

// capProblems keeps the first maxSizeProblems problems followed by a count
// of the rest.
func capProblems(out []string) []string {
	if len(out) > maxSizeProblems {
		rest := len(out) - maxSizeProblems
		out = append(out[:maxSizeProblems], fmt.Sprintf("and %d more", rest))
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
func checkStrictJSON(doc jsontext.Value, base string) error {
	dec := jsontext.NewDecoder(bytes.NewReader(doc))
	if _, err := dec.ReadValue(); err != nil {
		var se *jsontext.SyntacticError
		if errors.As(err, &se) && errors.Is(se.Err, jsontext.ErrDuplicateName) {
			return fmt.Errorf("not strict JSON: member %s%s is given more than once", base, se.JSONPointer)
		}
		return fmt.Errorf("not a JSON document: %v", err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return errors.New("not a JSON document: data after the schema")
	}
	return nil
}
