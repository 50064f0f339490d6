package server

import (
	"context"
	"encoding/json"
	"maps"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"

	"github.com/tallyhq/tally/correlate"
)

// loadKinOpenAPI parses openapi.yaml with kin-openapi and validates it
// ("The document is valid in kin-openapi").
func loadKinOpenAPI(t testing.TB) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI)
	if err != nil {
		t.Fatalf("openapi.yaml does not load in kin-openapi: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml is not valid in kin-openapi: %v", err)
	}
	return doc
}

func TestOpenAPIValidInKinOpenAPI(t *testing.T) {
	doc := loadKinOpenAPI(t)
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi: %q, want 3.1.0", doc.OpenAPI)
	}
	// "There is no fixed servers host": the relative "/", and a URL whose
	// host is a variable.
	for _, s := range doc.Servers {
		if s.URL != "/" && s.URL != "{scheme}://{host}" {
			t.Errorf("servers: %q pins a host; use the relative / or {scheme}://{host}", s.URL)
		}
	}
	// "Every documented request, sent to any base URL, matches": kin-openapi's
	// router finds the operation of a request as a server sees it (a path
	// alone) and as a client sends it, to any scheme, host and port.
	r, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"/api/v1/events", "http://127.0.0.1:8080/api/v1/events", "https://tally.example.org/api/v1/events", "http://[::1]:9/api/v1/events"} {
		if rt, _, err := r.FindRoute(httptest.NewRequest("POST", target, nil)); err != nil || rt.Path != "/api/v1/events" {
			t.Errorf("POST %s: the router finds %v (%v), want /api/v1/events", target, rt, err)
		}
	}
}

// The OpenAPI document: "Every accepted member is declared." The
// members createEvent reads are those correlate.Payload encodes to, with
// every field set, and meshkit's snake_case spellings that Meshery Server
// sends (docs/decisions.md, Meshery snake_case members). EventPayload declares
// exactly these: a member the decoder reads but the document omits would
// leave generated clients without it, and a declared member the decoder
// does not read would be kept as an opaque extra.
func TestOpenAPIDeclaresEveryCreateEventMember(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	declared := slices.Sorted(maps.Keys(doc.Components.Schemas["EventPayload"].Properties))

	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	one, desc := int64(1), "d"
	full := correlate.Payload{
		Owner: "o", SystemID: "s", ActedUpon: "a", OperationID: "op", Category: "c", Action: "x",
		Severity: correlate.SeverityError, Description: &desc, Metadata: jsontext.Value(`{"k":1}`),
		CorrelationKey: "k", OccurrenceCount: &one, FirstSeenAt: &at, LastSeenAt: &at, ResolvedAt: &at,
		Source: "/s", Type: "t", Specversion: "1.0", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
		ParentID: "00f067aa0ba902b7", IdempotencyKey: "i",
	}
	b, err := json.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		t.Fatal(err)
	}
	// meshkit's spellings, each with the value of the member it names.
	for snake, camel := range map[string]string{"acted_upon": "actedUpon", "operation_id": "operationId", "system_id": "systemId"} {
		members[snake] = members[camel]
	}
	body, err := json.Marshal(members)
	if err != nil {
		t.Fatal(err)
	}
	p, err := correlate.DecodePayload(body)
	if err != nil {
		t.Fatalf("DecodePayload(%s): %v", body, err)
	}
	if len(p.Extra) > 0 {
		t.Errorf("members read as opaque extras, not as the members they name: %v", slices.Sorted(maps.Keys(p.Extra)))
	}
	accepted := slices.Sorted(maps.Keys(members))
	if diff := cmp.Diff(accepted, declared); diff != "" {
		t.Errorf("EventPayload's properties in openapi.yaml disagree with the members createEvent reads (-read +declared):\n%s", diff)
	}
}
