package ingesthttp_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/internal/problem"
)

// Tampered listing cursors were a 500 on PostgreSQL ("a cursor with a NUL
// or a time before 4713 BC"); a cursor tally did not issue is answered 400
// invalid_parameter naming /cursor, the same on both stores, on every
// listing route.
func TestTamperedCursorHTTP(t *testing.T) {
	b64 := func(s string) string { return url.QueryEscape(base64.RawURLEncoding.EncodeToString([]byte(s))) }
	tests := []struct{ name, path string }{
		{"events, before 4713 BC", "/api/v1/events?cursor=" + b64(`["e1",-210895056000000000,"a"]`)},
		{"events, minimum time", "/api/v1/events?cursor=" + b64(`["e1",-9223372036854775808,"a"]`)},
		{"events, NUL in the id", "/api/v1/events?cursor=" + b64(`["e1",0,"a\u0000"]`)},
		{"resources, NUL in the cloud", "/api/v1/resources?cursor=" + b64(`["r1","c1\u0000","volume","v"]`)},
		{"rejected-events, before 4713 BC", "/api/v1/rejected-events?cursor=" + b64("v1.-210895056000000000.0")},
		{"rejected-events, maximum time", "/api/v1/rejected-events?cursor=" + b64("v1.9223372036854775807.0")},
		{"audit, before 4713 BC", "/api/v1/audit?cursor=" + b64("v1.-210895056000000000.0")},
		{"audit, minimum time", "/api/v1/audit?cursor=" + b64("v1.-9223372036854775808.0")},
	}
	bothStores(t, func(t *testing.T, st stores) {
		s := newServer(t, st, 0)
		if code, _, body := s.do(t, "POST", "/api/v1/events", "["+volume("a", "c1")+"]", true); code != 200 {
			t.Fatalf("ingest: %d %s", code, body)
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				status, _, body := s.do(t, "GET", tc.path, "", true)
				var p problem.Details
				_ = json.Unmarshal([]byte(body), &p)
				got := fmt.Sprint(status, " ", p.Code)
				want := []event.Problem{{Member: "/cursor", Rule: event.RuleFormat, Message: "must be the next_cursor of an earlier page"}}
				if diff := cmp.Diff(want, p.Errors); got != "400 invalid_parameter" || diff != "" {
					t.Errorf("GET %s: %s %s (-want +got):\n%s", tc.path, got, body, diff)
				}
			})
		}
	})
}
