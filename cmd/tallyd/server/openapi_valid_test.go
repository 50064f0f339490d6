package server

import (
	"context"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// loadKinOpenAPI parses openapi.yaml with kin-openapi and validates it
// (issue 13, "The document is valid in kin-openapi").
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
	// "There is no fixed servers host": at most the relative "/".
	for _, s := range doc.Servers {
		if s.URL != "/" {
			t.Errorf("servers: %q pins a host; use the relative /", s.URL)
		}
	}
}
