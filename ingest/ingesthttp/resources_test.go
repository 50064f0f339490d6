package ingesthttp_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
)

func TestResources(t *testing.T) {
	s := newServer(t, memIngest(t), 0)
	del := `{"event_id":"d","timestamp":"2026-03-01T11:00:00Z","event_type":"volume.delete.end","platform":"openstack","cloud":"c1","resource_type":"volume","resource_id":"v-b","project_id":"p"}`
	if code, _, body := s.do(t, "POST", "/api/v1/events", "["+volume("a", "c1")+","+volume("b", "c1")+","+del+"]", true); code != 200 || !strings.Contains(body, `"accepted":3`) {
		t.Fatalf("ingest: %d %s", code, body)
	}
	tests := []struct {
		name, path string
		wantStatus int
		wantBody   string
	}{
		{"every resource", "/api/v1/resources?status=all", 200,
			`{"items":[{"cloud":"c1","resource_type":"volume","resource_id":"v-a","platform":"openstack","project_id":"p","state":"available","size":{"size_gb":1,"type":"ssd"},"created_at":"2026-03-01T10:00:00Z","deleted_at":null,"first_event_at":"2026-03-01T10:00:00Z","last_event_at":"2026-03-01T10:00:00Z","last_event_type":"volume.create.end","last_event_id":"a"},` +
				`{"cloud":"c1","resource_type":"volume","resource_id":"v-b","platform":"openstack","project_id":"p","state":"deleted","size":{"size_gb":1,"type":"ssd"},"created_at":"2026-03-01T10:00:00Z","deleted_at":"2026-03-01T11:00:00Z","first_event_at":"2026-03-01T10:00:00Z","last_event_at":"2026-03-01T11:00:00Z","last_event_type":"volume.delete.end","last_event_id":"d"}],"next_cursor":null}`},
		{"alive at noon", "/api/v1/resources?alive_at=2026-03-01T12:00:00Z", 200, `"resource_id":"v-a"`},
		{"by state", "/api/v1/resources?state=deleted&status=all", 200, `"resource_id":"v-b"`},
		// Status filters as the Reporting API does, active by
		// default; state and status are independent filters.
		{"active by default", "/api/v1/resources", 200, `{"items":[{"cloud":"c1","resource_type":"volume","resource_id":"v-a",`},
		{"status active", "/api/v1/resources?status=active", 200, `"last_event_id":"a"}],"next_cursor":null}`},
		{"status deleted", "/api/v1/resources?status=deleted", 200, `{"items":[{"cloud":"c1","resource_type":"volume","resource_id":"v-b",`},
		{"state deleted contradicts the default", "/api/v1/resources?state=deleted", 200, `{"items":[],"next_cursor":null}`},
		{"the vertical slice's walk", "/api/v1/resources?cloud=c1&project_id=p&resource_type=volume&status=all&limit=1000", 200, `"resource_id":"v-b"`},
		{"bad status", "/api/v1/resources?status=gone", 400, `"member":"/status","rule":"enum"`},
		{"empty status", "/api/v1/resources?status=", 400, `"member":"/status","rule":"enum"`},
		// An unknown query parameter is refused, naming it.
		{"unknown parameter", "/api/v1/resources?alive_at=2026-03-01T12:00:00Z&fields=x", 400, `"member":"/fields","rule":"additionalProperties"`},
		{"unknown parameter of a dead-letter listing", "/api/v1/rejected-events?sort=asc", 400, `"member":"/sort"`},
		{"unknown parameter of one resource", "/api/v1/resources/c1/volume/v-b?expand=1", 400, `"member":"/expand"`},
		// Errors: one answer lists every problem, an unknown
		// parameter among the others (it was answered alone).
		{"unknown parameter beside a bad one", "/api/v1/resources?limit=x&fields=x", 400,
			`"errors":[{"member":"/limit","rule":"type","message":"must be an integer from 1 to 1000","loc":"query.limit","msg":"must be an integer from 1 to 1000"},{"member":"/fields","rule":"additionalProperties",`},
		{"unknown parameter beside a bad one in a listing", "/api/v1/audit?from=noon&sort=asc", 400,
			`"errors":[{"member":"/from","rule":"format","message":"must be an RFC 3339 date-time with Z or an offset, such as 2026-03-01T12:00:00Z (\"noon\" is too short for date, time and zone)","loc":"query.from","msg":"must be an RFC 3339 date-time with Z or an offset, such as 2026-03-01T12:00:00Z (\"noon\" is too short for date, time and zone)"},{"member":"/sort","rule":"additionalProperties",`},
		{"bad alive_at", "/api/v1/resources?alive_at=noon", 400, `"member":"/alive_at"`},
		{"bad limit", "/api/v1/resources?limit=0", 400, `"member":"/limit"`},
		{"bad cursor", "/api/v1/resources?cursor=zzz", 400, `"member":"/cursor"`},
		{"one resource with its history", "/api/v1/resources/c1/volume/v-b", 200, `"events":[{"event_id":"b",`},
		{"unknown resource", "/api/v1/resources/c1/volume/v-x", 404, `"code":"not_found"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, body := s.do(t, "GET", tt.path, "", true)
			if code != tt.wantStatus || !strings.Contains(body, tt.wantBody) {
				t.Errorf("GET %s: %d %s\nwant %d containing %s", tt.path, code, body, tt.wantStatus, tt.wantBody)
			}
		})
	}
	t.Run("pages", func(t *testing.T) {
		var ids []string
		path := "/api/v1/resources?status=all&limit=1"
		for range 3 {
			_, _, body := s.do(t, "GET", path, "", true)
			var id, next string
			if i := strings.Index(body, `"resource_id":"`); i >= 0 {
				id = body[i+15 : i+15+strings.Index(body[i+15:], `"`)]
			}
			ids = append(ids, id)
			if i := strings.Index(body, `"next_cursor":"`); i >= 0 {
				next = body[i+15 : i+15+strings.Index(body[i+15:], `"`)]
			}
			if next == "" {
				break
			}
			path = fmt.Sprintf("/api/v1/resources?status=all&limit=1&cursor=%s", next)
		}
		if diff := cmp.Diff([]string{"v-a", "v-b"}, ids); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

// A parameter that cannot name anything stored (NUL, invalid UTF-8) is a
// client mistake: 400 naming it, on every read route, never a store error.
func TestTextParameters(t *testing.T) {
	s := newServer(t, memIngest(t), 0)
	for _, tt := range []struct{ method, path, param string }{
		{"GET", "/api/v1/resources?cloud=%00", "cloud"},
		{"GET", "/api/v1/resources?state=%ff", "state"},
		{"GET", "/api/v1/resources?project_id=a%00", "project_id"},
		{"GET", "/api/v1/resources/c1/volume/a%00b", "resource_id"},
		{"GET", "/api/v1/audit?action=%00", "action"},
		{"GET", "/api/v1/resource-types/x%ff/y", "platform"},
	} {
		code, _, body := s.do(t, tt.method, tt.path, "", true)
		if code != 400 || !strings.Contains(body, `"member":"/`+tt.param+`"`) {
			t.Errorf("%s %s: %d %s; want 400 naming %s", tt.method, tt.path, code, body, tt.param)
		}
	}
	code, _, body := s.do(t, "PUT", "/api/v1/resource-types/x%00/thing", `{"type":"object"}`, true)
	if code != 400 || !strings.Contains(body, "invalid_size_schema") || !strings.Contains(body, `"member":"/platform","rule":"nul"`) {
		t.Errorf("PUT with a NUL in the platform: %d %s; want 400", code, body)
	}
}

// TestPutResourceTypeRefusalNamesMemberInBody: the
// Reporting API shape ("PUT
// /api/v1/resource-types/{platform}/{resource_type} with the original's
// body {"size_schema": {…}} registers the inner schema") and the quality
// bar ("bad input gets a clear error (member + rule named)"): a refused
// schema is named by its JSON Pointer in the body that was sent, so inside
// the wrapper it starts /size_schema (found by X1: it said /maxLength).
func TestPutResourceTypeRefusalNamesMemberInBody(t *testing.T) {
	s := newServer(t, memIngest(t), 0)
	for _, tt := range []struct {
		name, body, want string
	}{
		{"wrapped count out of range", `{"size_schema":{"maxLength":1e300}}`, "/size_schema/maxLength: numberRange: "},
		{"bare count out of range", `{"maxLength":1e300}`, "/maxLength: numberRange: "},
		{"wrapped bound out of range", `{"size_schema":{"properties":{"gb":{"minimum":1e1000001}}}}`, "/size_schema/properties/gb/minimum: numberRange: "},
		{"wrapped keyword of the wrong type", `{"size_schema":{"maxLength":"x"}}`, "/size_schema/maxLength: type: must be integer, is string"},
		{"bare keyword of the wrong type", `{"maxLength":"x"}`, "/maxLength: type: must be integer, is string"},
		{"wrapped nested keyword", `{"size_schema":{"properties":{"gb":{"minimum":"a"}}}}`, "/size_schema/properties/gb/minimum: type: must be number, is string"},
		{"wrapped bad regex", `{"size_schema":{"pattern":"("}}`, "/size_schema/pattern: format: "},
		{"wrapped duplicate member", `{"size_schema":{"type":"object","type":"object"}}`, "/size_schema/type: duplicateMember: is given more than once"},
		{"wrapped external reference", `{"size_schema":{"$ref":"http://example.com/s"}}`, "/size_schema: "},
		{"wrapper with another member", `{"size_schema":{},"version":2}`, "/version: additionalProperties: "},
		{"wrapped $ref cycle", `{"size_schema":{"properties":{"a":{"$ref":"#"}}}}`, "/size_schema/properties/a/$ref: schema: reference \"#\" makes a cycle"},
		{"wrapped nesting too deep", `{"size_schema":` + strings.Repeat(`{"not":`, 40) + `{}` + strings.Repeat(`}`, 40) + `}`, "/size_schema/not/not/not/not/not/not/not/not/not/not/not/not/not/not/not/not/not/not/not/not/not/not/not/not/not/not/not/not/not/not/not/not/not: depth: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, body := s.do(t, "PUT", "/api/v1/resource-types/openstack/share", tt.body, true)
			var p struct {
				Code   string
				Errors []event.Problem
			}
			_ = json.Unmarshal([]byte(body), &p)
			type answer struct {
				Status      int
				Code        string
				NamesMember bool
			}
			names := false
			for _, e := range p.Errors {
				names = names || strings.HasPrefix(e.String(), tt.want)
			}
			want := answer{400, "invalid_size_schema", true}
			got := answer{code, p.Code, names}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("PUT %s: (-want +got):\n%s\nbody: %s", tt.body, d, body)
			}
		})
	}
}
