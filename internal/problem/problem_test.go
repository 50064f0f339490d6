package problem_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/internal/problem"
)

func TestWrite(t *testing.T) {
	w := httptest.NewRecorder()
	problem.Write(w, problem.New(400, "invalid_parameter", "Invalid parameter", "limit: too big",
		problem.Member{Member: "limit", Rule: "range", Message: "too big"}))
	if w.Code != 400 || w.Header().Get("Content-Type") != problem.ContentType {
		t.Fatalf("status %d, content type %q", w.Code, w.Header().Get("Content-Type"))
	}
	var got map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"type": "urn:tally:problem:invalid_parameter", "title": "Invalid parameter", "status": 400.0,
		"detail": "limit: too big", "code": "invalid_parameter",
		"errors": []any{map[string]any{"member": "limit", "rule": "range", "message": "too big"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
	// Without member problems, there is no errors member at all.
	w = httptest.NewRecorder()
	problem.Write(w, problem.New(404, "not_found", "Not found", ""))
	if b := w.Body.String(); b != `{"type":"urn:tally:problem:not_found","title":"Not found","status":404,"code":"not_found"}`+"\n" {
		t.Errorf("body %s", b)
	}
}
