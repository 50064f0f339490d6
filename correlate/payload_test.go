package correlate_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/store/memstore"
)

// problems returns "member rule" for each problem of err, or nil when err
// is nil; any other error fails the test.
func problems(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var ve *event.ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, event.ErrInvalid) {
		t.Fatalf("error %v is not a *ValidationError matching ErrInvalid", err)
	}
	var out []string
	for _, p := range ve.Problems {
		if p.Message == "" {
			t.Errorf("problem %+v has no message", p)
		}
		out = append(out, p.Member+" "+p.Rule)
	}
	return out
}

func TestDecodePayloadFieldRules(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	tests := []struct {
		name string
		body string // members after "category" and "action"
		want []string
	}{
		{"valid minimal", ``, nil},
		// "correlationKey | string, 1-255"
		{"correlationKey 255 bytes", `"correlationKey":"` + long(255) + `"`, nil},
		{"correlationKey 256 bytes", `"correlationKey":"` + long(256) + `"`, []string{"/correlationKey maxLength"}},
		{"correlationKey empty", `"correlationKey":""`, []string{"/correlationKey minLength"}},
		// docs/decisions.md, Length bounds of correlated events: "Counted in
		// characters (Unicode code points), as maxLength in Meshery's event
		// schema counts them".
		{"correlationKey of 255 characters of 2 bytes each", `"correlationKey":"` + strings.Repeat("é", 255) + `"`, nil},
		{"correlationKey of 256 characters of 2 bytes each", `"correlationKey":"` + strings.Repeat("é", 256) + `"`, []string{"/correlationKey maxLength"}},
		{"category of 200 CJK characters (600 bytes)", `"category":"` + strings.Repeat("分", 200) + `"`, nil},
		{"category of 501 CJK characters", `"category":"` + strings.Repeat("分", 501) + `"`, []string{"/category maxLength"}},
		{"description of 2600 é (5200 bytes)", `"description":"` + strings.Repeat("é", 2600) + `"`, nil},
		{"description of 5000 4-byte characters", `"description":"` + strings.Repeat("😀", 5000) + `"`, nil},
		{"description of 5001 characters", `"description":"` + strings.Repeat("é", 5001) + `"`, []string{"/description maxLength"}},
		{"source of 255 characters", `"source":"` + long(255) + `"`, nil},
		{"idempotencyKey of 255 characters of 3 bytes each", `"idempotencyKey":"` + strings.Repeat("分", 255) + `"`, nil},
		{"type of 256 characters", `"type":"` + strings.Repeat("分", 256) + `"`, []string{"/type maxLength"}},
		// docs/decisions.md, source: "A real RFC 3986 URI-reference (brackets only
		// around an IP literal, a port of digits), checked as the CloudEvents
		// SDKs would parse it."
		{"source with an unclosed IP literal", `"source":"http://[bad"`, []string{"/source format"}},
		{"source with brackets in a path", `"source":"a[b]"`, []string{"/source format"}},
		{"source with a port that is not digits", `"source":"//host:port/x"`, []string{"/source format"}},
		{"source with brackets after the host", `"source":"http://h/a[b]"`, []string{"/source format"}},
		{"source with brackets in the query", `"source":"/x?q=[1]"`, []string{"/source format"}},
		{"source with an IPv4 address in brackets", `"source":"http://[1.2.3.4]/"`, []string{"/source format"}},
		{"source with a colon first", `"source":":x"`, []string{"/source format"}},
		{"source IPv6 literal", `"source":"http://[::1]/x"`, nil},
		{"source IPv6 literal and port", `"source":"http://[::1]:8080/x"`, nil},
		{"source absolute path", `"source":"/apicurio-registry"`, nil},
		{"source relative name", `"source":"meshery-adapter-istio"`, nil},
		{"source URN", `"source":"urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66"`, nil},
		{"source mailto (CloudEvents spec example)", `"source":"mailto:cncf-wg-serverless@lists.cncf.io"`, nil},
		{"source https with user, port, query and fragment", `"source":"https://u@github.com:443/cloudevents/spec/pull/123?a=b#c"`, nil},
		{"source network-path reference", `"source":"//layer5.io/cloud"`, nil},
		{"source with an empty port", `"source":"http://h:/x"`, nil},
		{"source percent-escaped", `"source":"/sensors/tn-1234567%2Falerts"`, nil},
		// docs/decisions.md, Times that contradict each other in one payload:
		// "lastSeenAt before firstSeenAt ...: 400 naming the later member".
		{"lastSeenAt before firstSeenAt", `"firstSeenAt":"2026-03-01T12:00:00Z","lastSeenAt":"2026-03-01T11:59:59.999999Z"`, []string{"/lastSeenAt minimum"}},
		{"lastSeenAt equal to firstSeenAt", `"firstSeenAt":"2026-03-01T12:00:00Z","lastSeenAt":"2026-03-01T13:00:00+01:00"`, nil},
		{"lastSeenAt after firstSeenAt", `"firstSeenAt":"2026-03-01T12:00:00Z","lastSeenAt":"2026-03-01T12:00:01Z"`, nil},
		{"lastSeenAt before firstSeenAt across offsets", `"firstSeenAt":"2026-03-01T12:00:00+01:00","lastSeenAt":"2026-03-01T11:30:00+02:00"`, []string{"/lastSeenAt minimum"}},
		// "occurrenceCount | integer, minimum 1"
		{"occurrenceCount 1", `"occurrenceCount":1`, nil},
		{"occurrenceCount beyond 2^31", `"occurrenceCount":2147483648000`, nil},
		{"occurrenceCount 0", `"occurrenceCount":0`, []string{"/occurrenceCount minimum"}},
		{"occurrenceCount negative", `"occurrenceCount":-3`, []string{"/occurrenceCount minimum"}},
		{"occurrenceCount fraction", `"occurrenceCount":1.5`, []string{"/occurrenceCount type"}},
		{"occurrenceCount 1.0 is not written as an integer", `"occurrenceCount":1.0`, []string{"/occurrenceCount type"}},
		{"occurrenceCount exponent", `"occurrenceCount":1e3`, []string{"/occurrenceCount type"}},
		{"occurrenceCount beyond int64", `"occurrenceCount":9223372036854775808`, []string{"/occurrenceCount maximum"}},
		{"occurrenceCount string", `"occurrenceCount":"2"`, []string{"/occurrenceCount type"}},
		// "source | string, uri-reference, 1-255"
		{"source name", `"source":"meshery-adapter-istio"`, nil},
		{"source URI", `"source":"https://layer5.io/cloud?x=1#f"`, nil},
		{"source with a space", `"source":"meshery server"`, []string{"/source format"}},
		{"source bad escape", `"source":"a%zz"`, []string{"/source format"}},
		{"source too long", `"source":"` + long(256) + `"`, []string{"/source maxLength"}},
		// "type | string, 1-255"
		{"type", `"type":"io.meshery.user.signup"`, nil},
		{"type too long", `"type":"` + long(256) + `"`, []string{"/type maxLength"}},
		// "specversion | "1.0""
		{"specversion 1.0", `"specversion":"1.0"`, nil},
		{"specversion 1.1", `"specversion":"1.1"`, []string{"/specversion enum"}},
		// "traceId | 32 lowercase hex", "not all zeros"
		{"traceId", `"traceId":"4bf92f3577b34da6a3ce929d0e0e4736"`, nil},
		{"traceId upper case", `"traceId":"4BF92F3577B34DA6A3CE929D0E0E4736"`, []string{"/traceId format"}},
		{"traceId all zeros", `"traceId":"00000000000000000000000000000000"`, []string{"/traceId format"}},
		{"traceId short", `"traceId":"4bf92f3577b34da6"`, []string{"/traceId format"}},
		// "parentId | 16 lowercase hex", "not all zeros"
		{"parentId", `"parentId":"00f067aa0ba902b7"`, nil},
		{"parentId all zeros", `"parentId":"0000000000000000"`, []string{"/parentId format"}},
		{"parentId non-hex", `"parentId":"00f067aa0ba902bg"`, []string{"/parentId format"}},
		// "severity stays a first-class field on the eight-level ladder"
		{"severity success", `"severity":"success"`, nil},
		{"severity unknown", `"severity":"fatal"`, []string{"/severity enum"}},
		{"severity mis-cased", `"severity":"Error"`, []string{"/severity enum"}},
		// category and action required, ≤ 500; description ≤ 5000
		{"description 5000", `"description":"` + long(5000) + `"`, nil},
		{"description 5001", `"description":"` + long(5001) + `"`, []string{"/description maxLength"}},
		{"category 501", `"category":"` + long(501) + `"`, []string{"/category maxLength"}},
		{"category null", `"category":null`, []string{"/category required"}},
		// date-times RFC 3339 with an offset
		{"date-time with offset", `"firstSeenAt":"2026-03-01T12:00:00+05:30"`, nil},
		{"date-time without zone", `"lastSeenAt":"2026-03-01T12:00:00"`, []string{"/lastSeenAt format"}},
		{"date-time not a date", `"resolvedAt":"yesterday"`, []string{"/resolvedAt format"}},
		{"date-time year 0", `"resolvedAt":"0000-01-01T00:00:00Z"`, []string{"/resolvedAt format"}},
		{"date-time with a one-digit hour (found by FuzzDecodePayload)", `"resolvedAt":"2026-03-01T1:00:00+01:00"`, []string{"/resolvedAt format"}},
		{"date-time at the zero instant, indistinguishable from absent", `"resolvedAt":"0001-01-01T01:00:00+01:00"`, []string{"/resolvedAt format"}},
		{"date-time just after the zero instant", `"resolvedAt":"0001-01-01T00:00:01Z"`, nil},
		// idempotencyKey 1..255
		{"idempotencyKey", `"idempotencyKey":"` + long(255) + `"`, nil},
		{"idempotencyKey too long", `"idempotencyKey":"` + long(256) + `"`, []string{"/idempotencyKey maxLength"}},
		{"metadata not an object", `"metadata":[1]`, []string{"/metadata type"}},
		{"NUL in a string", `"description":"a\u0000b"`, []string{"/description nul"}},
		{"every problem at once, in member order", `"traceId":"x","severity":"x","occurrenceCount":0.5,"specversion":"2","parentId":"y","correlationKey":""`,
			[]string{"/severity enum", "/correlationKey minLength", "/occurrenceCount type", "/specversion enum", "/traceId format", "/parentId format"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"category":"c","action":"a"`
			if tt.body != "" {
				// A later category replaces the first only in the test text.
				if strings.HasPrefix(tt.body, `"category"`) {
					body = `{"action":"a"`
				}
				body += "," + tt.body
			}
			body += "}"
			_, err := correlate.DecodePayload([]byte(body))
			if diff := cmp.Diff(tt.want, problems(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodePayloadStrict(t *testing.T) {
	tests := []struct {
		name, body string
		want       []string
	}{
		{"a member given twice is refused, naming it", `{"category":"c","action":"a","category":"d"}`, []string{"/category duplicateMember"}},
		{"invalid JSON", `{"category":"c",`, []string{" syntax"}},
		{"trailing data", `{"category":"c","action":"a"} {}`, []string{" syntax"}},
		{"not an object", `["category"]`, []string{" type"}},
		{"invalid UTF-8", "{\"category\":\"c\xff\",\"action\":\"a\"}", []string{"/category syntax"}},
		{"category and action missing", `{}`, []string{"/category required", "/action required"}},
		{"an extra member named like a listed one is kept, names are case-sensitive", `{"category":"c","action":"a","Category":1}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := correlate.DecodePayload([]byte(tt.body))
			if diff := cmp.Diff(tt.want, problems(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodePayloadValues(t *testing.T) {
	body := `{"category":"c","action":"a","description":"","severity":null,"metadata":{"big": 12345678901234567890.50},
		"occurrenceCount":3000000000,"firstSeenAt":"2026-03-01T12:00:00.1234567+02:00","x-unknown":[1, {"a":null}],"owner":"o"}`
	got, err := correlate.DecodePayload([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	first := time.Date(2026, 3, 1, 10, 0, 0, 123456000, time.UTC)
	count := int64(3000000000)
	desc := ""
	want := correlate.Payload{
		Category: "c", Action: "a", Description: &desc, Owner: "o",
		Metadata:        jsontext.Value(`{"big": 12345678901234567890.50}`), // byte for byte as sent
		OccurrenceCount: &count, FirstSeenAt: &first,
		Extra: map[string]jsontext.Value{"x-unknown": jsontext.Value(`[1, {"a":null}]`)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("payload (-want +got):\n%s", diff)
	}
	if got.FirstSeenAt.Location() != time.UTC {
		t.Errorf("firstSeenAt location %v, want UTC", got.FirstSeenAt.Location())
	}
	// It encodes back to the same members, metadata and extra values byte for
	// byte (json.Marshal would compact what MarshalJSON writes), and decodes
	// equal.
	b, err := got.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	again, err := correlate.DecodePayload(b)
	if err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	if diff := cmp.Diff(got, again); diff != "" {
		t.Errorf("round trip (-first +second):\n%s", diff)
	}
}

func TestValidateGoPayload(t *testing.T) {
	tests := []struct {
		name string
		p    correlate.Payload
		want []string
	}{
		{"valid", correlate.Payload{Category: "c", Action: "a"}, nil},
		{"extra named like a listed member", correlate.Payload{Category: "c", Action: "a",
			Extra: map[string]jsontext.Value{"traceId": jsontext.Value(`"x"`)}}, []string{"/traceId reserved"}},
		{"extra not JSON", correlate.Payload{Category: "c", Action: "a",
			Extra: map[string]jsontext.Value{"x": jsontext.Value(`{`)}}, []string{"/x syntax"}},
		{"invalid UTF-8", correlate.Payload{Category: "c\xff", Action: "a"}, []string{"/category utf8"}},
		{"time out of range", correlate.Payload{Category: "c", Action: "a", ResolvedAt: new(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))}, []string{"/resolvedAt format"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, problems(t, tt.p.Validate())); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewValidatesOptions(t *testing.T) {
	if _, err := correlate.New(nil, correlate.Options{IdempotencyRetention: -1}); err == nil ||
		!strings.Contains(err.Error(), "store is nil") || !strings.Contains(err.Error(), "negative") {
		t.Errorf("New(nil, negative retention) error = %v, want both problems", err)
	}
}

// Service.StatusCode is the one way to the status of a create
// (event-correlation.md, `Event-Disposition`; docs/decisions.md: "201 by default;
// 200 behind an option"): every disposition, for a legacy and a keyed
// payload, with the legacy-200 option off and on.
func TestServiceStatusCode(t *testing.T) {
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	legacy := correlate.Payload{Category: "c", Action: "a"}
	keyed := correlate.Payload{Category: "c", Action: "a", CorrelationKey: "k"}
	got := map[string]int{}
	for _, option := range []bool{false, true} {
		svc, err := correlate.New(db.Correlate(), correlate.Options{LegacyCreate200: option})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range correlate.Dispositions() {
			got[fmt.Sprintf("%s legacy option=%t", d, option)] = svc.StatusCode(legacy, d)
			got[fmt.Sprintf("%s keyed option=%t", d, option)] = svc.StatusCode(keyed, d)
		}
	}
	want := map[string]int{
		"created legacy option=false": 201, "created keyed option=false": 201,
		"created legacy option=true": 200, "created keyed option=true": 201,
	}
	for _, d := range []string{"replayed", "incremented", "resolved"} {
		for _, k := range []string{"legacy", "keyed"} {
			for _, o := range []string{"false", "true"} {
				want[d+" "+k+" option="+o] = 200
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status codes (-want +got):\n%s", diff)
	}
}

// A Go caller's raw metadata and extra members get the rules DecodePayload
// applies to a body, so no store keeps what the other would refuse (found by
// embedding the library: memstore used to keep broken metadata that then
// failed every listing).
func TestValidateRawMembersOfAGoPayload(t *testing.T) {
	base := func() correlate.Payload { return correlate.Payload{Category: "c", Action: "a"} }
	tests := []struct {
		name   string
		mutate func(*correlate.Payload)
		want   string // "member rule", or "" for valid
	}{
		{"broken metadata", func(p *correlate.Payload) { p.Metadata = jsontext.Value(`{"a":`) }, "/metadata syntax"},
		{"invalid UTF-8 in metadata", func(p *correlate.Payload) { p.Metadata = jsontext.Value("{\"bad\":\"\xff\"}") }, "/metadata syntax"},
		{"duplicate member in metadata", func(p *correlate.Payload) { p.Metadata = jsontext.Value(`{"a":1,"a":2}`) }, "/metadata syntax"},
		// metadata is stored as json text, which keeps the escape \u0000.
		{"an escaped NUL in metadata is kept", func(p *correlate.Payload) { p.Metadata = jsontext.Value(`{"a":"\u0000"}`) }, ""},
		{"metadata not an object", func(p *correlate.Payload) { p.Metadata = jsontext.Value(`[1]`) }, "/metadata type"},
		{"broken extra member", func(p *correlate.Payload) { p.Extra = map[string]jsontext.Value{"x": jsontext.Value(`{"a":`)} }, "/x syntax"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := base()
			tt.mutate(&p)
			err := p.Validate()
			if tt.want == "" {
				if err != nil {
					t.Errorf("Validate: %v, want nil", err)
				}
				return
			}
			var ve *event.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate: %v, want a *ValidationError", err)
			}
			var got []string
			for _, pr := range ve.Problems {
				got = append(got, pr.Member+" "+pr.Rule)
			}
			if !slices.Contains(got, tt.want) {
				t.Errorf("problems %v lack %q", got, tt.want)
			}
		})
	}
}

// docs/decisions.md, Meshery snake_case members: "meshkit's acted_upon,
// operation_id, system_id are recorded as actedUpon, operationId,
// systemId; server-owned members in a body (id, status, timestamps,
// user_id) never override the server's values" (they stay in Extra).
func TestDecodePayloadMeshkitMembers(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		want       correlate.Payload
		problems   []event.Problem
	}{
		{"snake_case recorded as the fields they name",
			`{"category":"c","action":"a","acted_upon":"s","operation_id":"op","system_id":"sys","id":"x","user_id":"u","status":"read","created_at":"2020-01-01T00:00:00Z"}`,
			correlate.Payload{Category: "c", Action: "a", ActedUpon: "s", OperationID: "op", SystemID: "sys",
				Extra: map[string]jsontext.Value{"id": jsontext.Value(`"x"`), "user_id": jsontext.Value(`"u"`),
					"status": jsontext.Value(`"read"`), "created_at": jsontext.Value(`"2020-01-01T00:00:00Z"`)}}, nil},
		{"both spellings agreeing", `{"category":"c","action":"a","actedUpon":"s","acted_upon":"s"}`,
			correlate.Payload{Category: "c", Action: "a", ActedUpon: "s"}, nil},
		{"null counts as omitted", `{"category":"c","action":"a","system_id":null}`,
			correlate.Payload{Category: "c", Action: "a"}, nil},
		{"both spellings disagreeing", `{"category":"c","action":"a","acted_upon":"s","actedUpon":"t"}`, correlate.Payload{},
			[]event.Problem{{Member: "/acted_upon", Rule: event.RuleConst, Message: "must equal actedUpon when both are given"}}},
		{"wrong type", `{"category":"c","action":"a","operation_id":7}`, correlate.Payload{},
			[]event.Problem{{Member: "/operation_id", Rule: event.RuleType, Message: "must be a string"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := correlate.DecodePayload([]byte(tt.body))
			var ve *event.ValidationError
			if errors.As(err, &ve) {
				if diff := cmp.Diff(tt.problems, ve.Problems); diff != "" {
					t.Errorf("problems (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil || tt.problems != nil {
				t.Fatalf("err %v, want problems %v", err, tt.problems)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("payload (-want +got):\n%s", diff)
			}
		})
	}
}
