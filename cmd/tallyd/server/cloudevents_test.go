package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/extensions"
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

// CloudEvents and trace context: "Test with the CloudEvents Go SDK
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

// "A conflict with the body is 400", naming the member, and a
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

// percentEncodeHeaders is the encoding the CloudEvents HTTP binding (section
// 3.1.3.2) asks of a sender, which sdk-go v2.16.2 leaves out (it writes ce-*
// header values unencoded): "The following characters MUST be
// percent-encoded: Space (U+0020), Double-quote (U+0022), Percent (U+0025),
// Any characters outside the printable ASCII range of U+0021-U+007E
// inclusive", each byte of the character's UTF-8 as %XY, upper-case hex.
type percentEncodeHeaders struct{ next http.RoundTripper }

func (p percentEncodeHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range r.Header {
		if !strings.HasPrefix(k, "Ce-") {
			continue
		}
		for i, v := range vs {
			var b strings.Builder
			for _, c := range []byte(v) {
				if c <= ' ' || c == '"' || c == '%' || c >= 0x7f {
					fmt.Fprintf(&b, "%%%02X", c)
				} else {
					b.WriteByte(c)
				}
			}
			vs[i] = b.String()
		}
	}
	return p.next.RoundTrip(r)
}

// CloudEvents HTTP binding 3.1.3.2: "When decoding an HTTP message into a
// CloudEvent, any HTTP header value MUST first be unescaped with respect to
// double-quoted strings [...]. A single round of percent-decoding MUST then
// be performed". One event delivered in binary mode and redelivered in
// structured mode, its id and subject holding characters the binding
// percent-encodes, has one idempotency key: the redelivery replays, whether
// the binary-mode sender percent-encodes its headers (as the binding says)
// or, like sdk-go v2.16.2, sends them raw (without a '%', the raw value
// decodes to itself; a raw '%' that starts no escape stays a '%').
func TestCloudEventsSDKBinaryThenStructuredOneKey(t *testing.T) {
	tests := []struct {
		name, id string
		encode   bool
		want     []string
	}{
		{"percent-encoded by the sender", `ev 1 "50%" ü€😀`, true, []string{"created", "replayed"}},
		{"raw, as sdk-go sends it", `ev 2 "quoted" ü€😀`, false, []string{"created", "replayed"}},
		{"raw with a percent, as sdk-go sends it", `ev 3 50% done`, false, []string{"created", "replayed"}},
	}
	for name, open := range map[string]func(t *testing.T) Store{
		"memstore": func(t *testing.T) Store { return memStore(t) },
		"pgstore":  func(t *testing.T) Store { return pgStore(pgtest.DB(t, pgstore.Options{})) },
	} {
		t.Run(name, func(t *testing.T) {
			h, err := New(open(t), Options{Authenticator: testAuthenticator(t)})
			if err != nil {
				t.Fatal(err)
			}
			// The SDK's result has no headers; keep each answer's
			// disposition (or problem) to tell a replay from an occurrence.
			var answers []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, r)
				a := rec.Header().Get("Event-Disposition")
				if rec.Code >= 400 {
					var p struct {
						Errors []struct{ Member, Rule string }
					}
					_ = json.Unmarshal(rec.Body.Bytes(), &p)
					a = fmt.Sprint(rec.Code, p.Errors)
				}
				answers = append(answers, a)
				w.WriteHeader(rec.Code)
				_, _ = w.Write(rec.Body.Bytes())
			}))
			t.Cleanup(srv.Close)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					opts := []cehttp.Option{cehttp.WithTarget(srv.URL + "/api/events"),
						cehttp.WithHeader("Authorization", "Bearer t-events-token-01")}
					if tt.encode {
						opts = append(opts, cehttp.WithRoundTripper(percentEncodeHeaders{http.DefaultTransport}))
					}
					c, err := cloudevents.NewClientHTTP(opts...)
					if err != nil {
						t.Fatal(err)
					}
					e := cloudevents.NewEvent()
					e.SetID(tt.id)
					e.SetSource("/meshery/prod-1")
					e.SetType("io.meshery.k8s.unreachable")
					e.SetSubject(tt.id)
					e.SetExtension("region", "eu west ü")
					data := map[string]any{"category": "cluster", "action": "connect", "correlationKey": "k/" + tt.id}
					if err := e.SetData("text/json", data); err != nil {
						t.Fatal(err)
					}
					answers = nil
					for _, ctx := range []context.Context{
						cloudevents.WithEncodingBinary(context.Background()),
						cloudevents.WithEncodingStructured(context.Background()),
					} {
						var hr *cehttp.Result
						if res := c.Send(ctx, e); !cloudevents.ResultAs(res, &hr) {
							t.Fatalf("send: %v", res)
						}
					}
					if diff := cmp.Diff(tt.want, answers); diff != "" {
						t.Errorf("binary then structured: answers (-want +got):\n%s", diff)
					}
				})
			}
		})
	}
}

// The CloudEvents Distributed Tracing extension, as the SDK adds it
// (extensions.DistributedTracingExtension: ce-traceparent in binary mode, a
// traceparent member in structured mode), fills traceId and parentId, ahead
// of the request's own traceparent header (docs/decisions.md, CloudEvents
// HTTP binding); a malformed one is 400 naming it. Both stores.
func TestCloudEventsSDKTracingExtension(t *testing.T) {
	const (
		eventTrace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" // the extension: the trace the event was made in
		hopTrace   = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" // the header: the hop that delivered it
	)
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
				cehttp.WithHeader("traceparent", hopTrace))
			if err != nil {
				t.Fatal(err)
			}
			send := func(ctx context.Context, id, tp string) (int, string) {
				t.Helper()
				e := cloudevents.NewEvent()
				e.SetID(id)
				e.SetSource("meshery-server")
				e.SetType("io.meshery.k8s.unreachable")
				extensions.DistributedTracingExtension{TraceParent: tp, TraceState: "rojo=00f067aa0ba902b7"}.AddTracingAttributes(&e)
				if err := e.SetData(cloudevents.ApplicationJSON, map[string]any{"category": id, "action": "connect", "correlationKey": id}); err != nil {
					t.Fatal(err)
				}
				var hr *cehttp.Result
				if res := c.Send(ctx, e); !cloudevents.ResultAs(res, &hr) {
					t.Fatalf("send %s: %v", id, res)
				}
				return hr.StatusCode, fmt.Sprint(hr.Format, hr.Args)
			}
			for _, mode := range []string{"binary", "structured"} {
				ctx := cloudevents.WithEncodingBinary(context.Background())
				if mode == "structured" {
					ctx = cloudevents.WithEncodingStructured(context.Background())
				}
				if code, msg := send(ctx, mode, eventTrace); code != 201 {
					t.Errorf("%s mode: %d %s, want 201", mode, code, msg)
				}
				if code, msg := send(ctx, mode+"-bad", "00-not-a-trace"); code != 400 || !strings.Contains(msg, "traceparent") {
					t.Errorf("%s mode, a malformed traceparent extension: %d %s, want 400 naming it", mode, code, msg)
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
			got := map[string][2]string{}
			for _, e := range page.Data {
				got[e.Category] = [2]string{e.TraceID, e.ParentID}
			}
			want := map[string][2]string{
				"binary":     {"0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"},
				"structured": {"0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("traceId, parentId by mode (-want +got):\n%s", diff)
			}
		})
	}
}
