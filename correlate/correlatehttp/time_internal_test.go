package correlatehttp

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/event"
)

// One RFC 3339 grammar (event.ParseTime) on every correlation member that
// takes a time: the payload's firstSeenAt, lastSeenAt and resolvedAt, the
// structured CloudEvent's time and the binary ce-time header all accept and
// refuse the same strings, and read the same instant.
func TestTimeGrammarAgrees(t *testing.T) {
	inputs := []string{
		"2026-03-01T12:00:00Z",
		"2026-03-01t12:00:00z",
		"2026-03-01T12:00:00.123456789+01:00",
		"2026-03-01T12:00:00-00:00",
		"2026-03-01T12:00:00+24:00",
		"2026-03-01T12:00:00+0100",
		"2026-03-01 12:00:00Z",
		"2026-03-01T1:00:00Z",
		"2026-03-01T12:00:00",
		"2026-02-29T12:00:00Z",
		"2024-02-29T12:00:00Z",
		"2026-03-01T23:59:60Z",
		"0000-01-01T00:00:00+01:00",
	}
	type result struct {
		OK bool
		At time.Time
	}
	for _, in := range inputs {
		t.Run(in, func(t *testing.T) {
			want := result{}
			if at, err := event.ParseTime(in); err == nil {
				want = result{true, event.Normalize(at)}
			}
			got := map[string]result{}
			for _, m := range []string{"firstSeenAt", "lastSeenAt", "resolvedAt"} {
				p, err := correlate.DecodePayload([]byte(`{"category":"c","action":"a","source":"s","` + m + `":"` + in + `"}`))
				r := result{}
				if err == nil {
					at := map[string]*time.Time{"firstSeenAt": p.FirstSeenAt, "lastSeenAt": p.LastSeenAt, "resolvedAt": p.ResolvedAt}[m]
					r = result{true, *at}
				}
				got[m] = r
			}
			sr := httptest.NewRequest("POST", "/api/events", strings.NewReader(
				`{"specversion":"1.0","id":"1","source":"s","type":"t","time":"`+in+`","data":{"category":"c","action":"a"}}`))
			sr.Header.Set("Content-Type", "application/cloudevents+json")
			ok, at := ceResult(t, sr)
			got["structured time"] = result{ok, at}
			br := httptest.NewRequest("POST", "/api/events", strings.NewReader(`{"category":"c","action":"a"}`))
			br.Header.Set("Content-Type", "application/json")
			for k, v := range map[string]string{"ce-specversion": "1.0", "ce-id": "1", "ce-source": "s", "ce-type": "t", "ce-time": in} {
				br.Header.Set(k, v)
			}
			ok, at = ceResult(t, br)
			got["binary ce-time"] = result{ok, at}
			for member, r := range got {
				if diff := cmp.Diff(want, r); diff != "" {
					t.Errorf("%s disagrees with event.ParseTime (-want +got):\n%s", member, diff)
				}
			}
		})
	}
}

// ceResult decodes the create r carries and returns whether it was
// accepted and the lastSeenAt its time filled.
func ceResult(t *testing.T, r *http.Request) (ok bool, at time.Time) {
	t.Helper()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	p, _, ps, err := decodeCreate(r, body)
	if err != nil {
		t.Fatalf("decodeCreate: %v", err)
	}
	if len(ps) > 0 || p.LastSeenAt == nil {
		return false, time.Time{}
	}
	return true, *p.LastSeenAt
}

// The CloudEvents JSON event format, 3.1: "a datacontenttype declares
// JSON-formatted content if its media type, when stripped of parameters,
// has the form */json or */*+json".
func TestDataContentTypeJSON(t *testing.T) {
	for _, ct := range []string{"application/json", "text/json", "text/json; charset=utf-8", "application/vnd.x+json",
		"Application/JSON", "x-custom/json", "text/vnd.y+JSON; v=1"} {
		r := httptest.NewRequest("POST", "/api/events", strings.NewReader(
			`{"specversion":"1.0","id":"1","source":"s","type":"t","datacontenttype":"`+ct+`","data":{"category":"c","action":"a"}}`))
		r.Header.Set("Content-Type", "application/cloudevents+json")
		body, _ := io.ReadAll(r.Body)
		_, _, ps, err := decodeCreate(r, body)
		if err != nil || len(ps) > 0 {
			t.Errorf("datacontenttype %q: %v %v", ct, err, ps)
		}
	}
	for _, ct := range []string{"text/plain", "application/json-seq", "application/+json", "json", "application/xml"} {
		r := httptest.NewRequest("POST", "/api/events", strings.NewReader(
			`{"specversion":"1.0","id":"1","source":"s","type":"t","datacontenttype":"`+ct+`","data":{"category":"c","action":"a"}}`))
		r.Header.Set("Content-Type", "application/cloudevents+json")
		body, _ := io.ReadAll(r.Body)
		_, _, ps, err := decodeCreate(r, body)
		if err != nil || len(ps) != 1 || ps[0].Member != "/datacontenttype" {
			t.Errorf("datacontenttype %q: %v %v, want one problem naming /datacontenttype", ct, err, ps)
		}
	}
}
