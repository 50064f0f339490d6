package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// listed is the part of a getEvents item the CloudEvents tests read.
type listed struct {
	Category        string `json:"category"`
	Source          string `json:"source"`
	Type            string `json:"type"`
	Specversion     string `json:"specversion"`
	TraceID         string `json:"traceId"`
	ParentID        string `json:"parentId"`
	LastSeenAt      string `json:"lastSeenAt"`
	OccurrenceCount int64  `json:"occurrenceCount"`
}

// issue 13, CloudEvents and trace context: "Test with the CloudEvents Go SDK
// as a real client", in binary and structured mode, on both stores.
// docs/decisions.md, CloudEvents HTTP binding: "Binary and structured mode
// accepted on createEvent; ce-id is the idempotency key; traceparent fills
// traceId/parentId when the body has none."
func TestCloudEventsSDK(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) Store{
		"memstore": func(t *testing.T) Store { return memStore(t) },
		"pgstore":  func(t *testing.T) Store { return pgStore(pgtest.DB(t, pgstore.Options{})) },
	} {
		t.Run(name, func(t *testing.T) {
			h, err := New(open(t), Options{Authenticator: testAuthenticator(t)})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			c, err := cloudevents.NewClientHTTP(
				cehttp.WithTarget(srv.URL+"/api/events"),
				cehttp.WithHeader("Authorization", "Bearer t-events-token-01"),
				cehttp.WithHeader("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
			if err != nil {
				t.Fatal(err)
			}
			at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			send := func(ctx context.Context, id, category string, data map[string]any) int {
				t.Helper()
				e := cloudevents.NewEvent()
				e.SetID(id)
				e.SetSource("meshery-server")
				e.SetType("io.meshery.k8s.unreachable")
				e.SetTime(at)
				e.SetSubject("prod-1")
				e.SetExtension("region", "eu-1")
				data["category"] = category
				data["action"] = "connect"
				if err := e.SetData(cloudevents.ApplicationJSON, data); err != nil {
					t.Fatal(err)
				}
				res := c.Send(ctx, e)
				var hr *cehttp.Result
				if !cloudevents.ResultAs(res, &hr) {
					t.Fatalf("send %s: %v", id, res)
				}
				return hr.StatusCode
			}
			modes := map[string]context.Context{
				"binary":     cloudevents.WithEncodingBinary(context.Background()),
				"structured": cloudevents.WithEncodingStructured(context.Background()),
			}
			for _, mode := range []string{"binary", "structured"} {
				ctx := modes[mode]
				key := map[string]any{"correlationKey": "k8s/prod-1/unreachable/" + mode}
				// A first delivery opens the condition, a second CloudEvent
				// (another id) counts, a redelivery of the first replays.
				got := []int{
					send(ctx, mode+"-1", mode, key),
					send(ctx, mode+"-2", mode, key),
					send(ctx, mode+"-1", mode, key),
				}
				if diff := cmp.Diff([]int{201, 200, 200}, got); diff != "" {
					t.Errorf("%s mode: statuses (-want +got):\n%s", mode, diff)
				}
			}
			r := httptest.NewRequest("GET", "/api/events/list?order=asc", nil)
			r.Header.Set("Authorization", "Bearer t-events-token-01")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			var page struct {
				Data []listed `json:"data"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &page); err != nil || w.Code != 200 {
				t.Fatalf("list: %d %s", w.Code, w.Body)
			}
			want := []listed{}
			for _, mode := range []string{"binary", "structured"} {
				want = append(want, listed{Category: mode, Source: "meshery-server", Type: "io.meshery.k8s.unreachable",
					Specversion: "1.0", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", ParentID: "00f067aa0ba902b7",
					LastSeenAt: "2026-03-01T12:00:00Z", OccurrenceCount: 2})
			}
			if diff := cmp.Diff(want, page.Data); diff != "" {
				t.Errorf("listed events (-want +got):\n%s", diff)
			}
		})
	}
}

// issue 13: "A conflict with the body is 400", naming the member, and a
// malformed traceparent is 400 naming the header; the SDK sees the refusal.
func TestCloudEventsSDKRefusals(t *testing.T) {
	h, err := New(memStore(t), Options{Authenticator: testAuthenticator(t)})
	if err != nil {
		t.Fatal(err)
	}
	// The SDK drops the body of a refusal; keep it to read the problem.
	var last []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		last = rec.Body.Bytes()
		w.WriteHeader(rec.Code)
		_, _ = w.Write(last)
	}))
	t.Cleanup(srv.Close)
	tests := []struct {
		name        string
		header      [2]string
		data        string
		ctx         context.Context
		wantMember  string
		wantMessage string
	}{
		{"binary: body source disagrees with ce-source", [2]string{},
			`{"category":"c","action":"a","source":"other"}`, cloudevents.WithEncodingBinary(context.Background()),
			"/source", "the ce-source header"},
		{"structured: data type disagrees with the CloudEvent's type", [2]string{},
			`{"category":"c","action":"a","type":"other"}`, cloudevents.WithEncodingStructured(context.Background()),
			"/data/type", "the CloudEvent's type"},
		{"binary: idempotencyKey other than ce-id", [2]string{},
			`{"category":"c","action":"a","idempotencyKey":"x"}`, cloudevents.WithEncodingBinary(context.Background()),
			"/idempotencyKey", "the ce-id header"},
		{"malformed traceparent", [2]string{"traceparent", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"},
			`{"category":"c","action":"a"}`, cloudevents.WithEncodingBinary(context.Background()),
			"/traceId", "traceparent header"},
		{"payload problem", [2]string{},
			`{"action":"a"}`, cloudevents.WithEncodingStructured(context.Background()),
			"/data/category", "required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := []cehttp.Option{cehttp.WithTarget(srv.URL + "/api/events"), cehttp.WithHeader("Authorization", "Bearer t-events-token-01")}
			if tt.header[0] != "" {
				opts = append(opts, cehttp.WithHeader(tt.header[0], tt.header[1]))
			}
			c, err := cloudevents.NewClientHTTP(opts...)
			if err != nil {
				t.Fatal(err)
			}
			e := cloudevents.NewEvent()
			e.SetID("id-1")
			e.SetSource("meshery-server")
			e.SetType("io.meshery.test")
			if err := e.SetData(cloudevents.ApplicationJSON, json.RawMessage(tt.data)); err != nil {
				t.Fatal(err)
			}
			var hr *cehttp.Result
			if res := c.Send(tt.ctx, e); !cloudevents.ResultAs(res, &hr) || hr.StatusCode != 400 {
				t.Fatalf("send: %v, want 400", res)
			}
			var p struct {
				Errors []struct {
					Member  string `json:"member"`
					Message string `json:"message"`
				} `json:"errors"`
			}
			if err := json.Unmarshal(last, &p); err != nil || len(p.Errors) == 0 {
				t.Fatalf("answer: %s", last)
			}
			if p.Errors[0].Member != tt.wantMember || !strings.Contains(p.Errors[0].Message, tt.wantMessage) {
				t.Errorf("problem %+v, want member %s and a message naming %q", p.Errors, tt.wantMember, tt.wantMessage)
			}
		})
	}
}
