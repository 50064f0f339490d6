package server

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A parameter given twice where the route takes one value, and the two
// spellings of getEvents' page size given with different values, are 400
// invalid_parameter naming the parameter: reading one of the values would
// answer as if the other were honoured. List parameters (category,
// action, severity, status) honour every value.
func TestRepeatedAndConflictingParameters(t *testing.T) {
	h := newTestHandler(t)
	type problem struct{ Member, Rule string }
	for _, tc := range []struct {
		target, token string
		status        int
		problems      []problem
	}{
		{"/api/v1/events?project_id=a&project_id=b", tokAdmin, 400, []problem{{"/project_id", "duplicateMember"}}},
		{"/api/v1/resources?cloud=a&cloud=a", tokAdmin, 400, []problem{{"/cloud", "duplicateMember"}}},
		{"/api/v1/rejected-events?limit=1&limit=2", tokAdmin, 400, []problem{{"/limit", "duplicateMember"}}},
		{"/api/events/list?pagesize=100&pageSize=5", tokEvents, 400, []problem{{"/pagesize", "const"}}},
		{"/api/events/list?pagesize=5&pageSize=5", tokEvents, 200, nil},
		{"/api/events/list?search=a&search=b", tokEvents, 400, []problem{{"/search", "duplicateMember"}}},
		{"/api/events/list?severity=error&severity=warning", tokEvents, 200, nil},
		{"/api/events/types?pagesize=10&pageSize=20", tokEvents, 400, []problem{{"/pagesize", "const"}}},
	} {
		t.Run(tc.target, func(t *testing.T) {
			r := httptest.NewRequest("GET", tc.target, nil)
			r.Header.Set("Authorization", "Bearer "+tc.token)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			if tc.status != 400 {
				return
			}
			var body struct {
				Code   string
				Errors []problem
			}
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.problems, body.Errors); diff != "" || body.Code != "invalid_parameter" {
				t.Errorf("code %q, problems (-want +got):\n%s", body.Code, diff)
			}
		})
	}
}
