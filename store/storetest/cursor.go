package storetest

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
)

// Tampered listing cursors: "a cursor with a NUL or a time before 4713 BC
// is 500 on events, resources, rejected-events and audit" on PostgreSQL,
// and "a cursor at the minimum time lists 0 rows on PostgreSQL and all in
// memory". A cursor tally did not issue is refused as /cursor (rule
// format) on every store; the earliest time tally issues lists every row
// on every store.
func testTamperedCursors(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	ctx := context.Background()
	for i := range 3 {
		e.ingest(collector, volumeCreate(fmt.Sprintf("v%d", i), t0).bytes(), []byte(fmt.Sprintf(`{"event_id":"bad%d"}`, i)),
			volumeCreate(fmt.Sprintf("s%d", i), t0).set("cloud", "c2").bytes())
	}
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	yearZero := time.Date(0, time.January, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	beforePG := time.Date(-4713, time.January, 1, 0, 0, 0, 0, time.UTC).UnixMicro() // before 4713 BC
	pos := func(us int64) string { return b64(fmt.Sprintf("v1.%d.0", us)) }
	ev := func(us int64, id string) string { return b64(fmt.Sprintf(`["e1",%d,%q]`, us, id)) }
	key := func(c, ty, id string) string { return b64(fmt.Sprintf(`["r1",%q,%q,%q]`, c, ty, id)) }

	type listing struct {
		name string
		list func(cursor string) (int, error)
	}
	listings := []listing{
		{"events", func(c string) (int, error) {
			p, err := e.svc.Events(ctx, ingest.EventFilter{Cursor: c})
			return len(p.Items), err
		}},
		{"resources", func(c string) (int, error) {
			p, err := projService(t, e.st, e.svc).List(ctx, projection.Filter{Cursor: c})
			return len(p.Items), err
		}},
		{"rejected-events", func(c string) (int, error) {
			p, err := e.svc.DeadLetters(ctx, ingest.Page{Cursor: c})
			return len(p.Items), err
		}},
		{"audit", func(c string) (int, error) {
			p, err := e.svc.Audit(ctx, "", ingest.Page{Cursor: c})
			return len(p.Items), err
		}},
	}
	bad := map[string][]string{
		"events": {ev(beforePG, "v0"), ev(math.MinInt64, "v0"), ev(math.MaxInt64, "v0"), ev(yearZero-1, "v0"),
			ev(yearZero, "v\x00"), b64("[\"e1\",0,\"v\xff\"]")},
		"resources": {key("c1\x00", "volume", "v"), key("c1", "vol\x00ume", "v"), key("c1", "volume", "v\x00"),
			b64("[\"r1\",\"c\xff\",\"volume\",\"v\"]")},
		"rejected-events": {pos(beforePG), pos(math.MinInt64), pos(math.MaxInt64), pos(yearZero - 1)},
		"audit":           {pos(beforePG), pos(math.MinInt64), pos(math.MaxInt64), pos(yearZero - 1)},
	}
	// The earliest cursor tally could have issued lists every row.
	earliest := map[string]string{
		"events": ev(yearZero, ""), "resources": key("", "", ""),
		"rejected-events": pos(yearZero), "audit": pos(yearZero),
	}
	want := map[string]int{"events": 3, "resources": 3, "rejected-events": 3, "audit": 3}
	for _, l := range listings {
		t.Run(l.name, func(t *testing.T) {
			for _, c := range bad[l.name] {
				n, err := l.list(c)
				var ve *event.ValidationError
				if !errors.As(err, &ve) {
					t.Errorf("cursor %q: %d rows, %v; want a /cursor problem", c, n, err)
					continue
				}
				wantPs := []event.Problem{{Member: "/cursor", Rule: event.RuleFormat, Message: "must be the next_cursor of an earlier page"}}
				if diff := cmp.Diff(wantPs, ve.Problems); diff != "" {
					t.Errorf("cursor %q problems (-want +got):\n%s", c, diff)
				}
			}
			n, err := l.list(earliest[l.name])
			if err != nil {
				t.Fatalf("earliest cursor: %v", err)
			}
			if diff := cmp.Diff(want[l.name], n); diff != "" {
				t.Errorf("rows after the earliest cursor (-want +got):\n%s", diff)
			}
		})
	}
}
