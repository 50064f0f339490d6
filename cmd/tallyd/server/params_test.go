package server

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
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

// A query string net/url cannot parse (more than 10,000 parameters, a
// malformed escape) is 400 invalid_parameter: url.URL.Query drops the
// error with every parameter, which answered a filtered listing
// unfiltered and a createEvent with stray parameters 201. Unknown
// parameters are listed up to a bound, so the problem body stays small.
func TestUnparsableAndHugeQueries(t *testing.T) {
	h := newTestHandler(t)
	junk := strings.Repeat("&j=1", 10001)
	many := ""
	for i := range 3000 {
		many += fmt.Sprintf("&junk-%05d-%s=1", i, strings.Repeat("x", 100))
	}
	for _, tc := range []struct {
		method, target, token, body string
		status                      int
		maxBody                     int
	}{
		{"GET", "/api/v1/events?cloud=no-such-cloud" + junk, tokAdmin, "", 400, 2048},
		{"GET", "/api/v1/events?cloud=%zz", tokAdmin, "", 400, 2048},
		{"POST", "/api/events?x=1" + junk, tokEvents, `{"category":"c","action":"a"}`, 400, 2048},
		{"GET", "/api/events/list?a=1" + junk, tokEvents, "", 400, 2048},
		// Each entry names its member twice (member, and loc for Tally) and its message twice (message, msg).
		{"GET", "/api/v1/events?cloud=a" + many, tokAdmin, "", 400, 16384},
	} {
		t.Run(tc.method+" "+tc.target[:min(len(tc.target), 40)], func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.target, strings.NewReader(tc.body))
			r.Header.Set("Authorization", "Bearer "+tc.token)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.status || !strings.Contains(w.Body.String(), `"invalid_parameter"`) {
				t.Fatalf("status %d, want %d invalid_parameter: %.300s", w.Code, tc.status, w.Body)
			}
			if w.Body.Len() > tc.maxBody {
				t.Errorf("problem body %d bytes, want at most %d", w.Body.Len(), tc.maxBody)
			}
		})
	}
}
