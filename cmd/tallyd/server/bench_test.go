package server

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
	"github.com/tallyhq/tally/store/storetest"
)

// BenchmarkPostEvents posts 1000-event batches of new events through the
// whole handler (authentication, body cap, metrics, logging middleware,
// ingesthttp, the pipeline and the store), in process, and reports
// events/s.
func BenchmarkPostEvents(b *testing.B) {
	for _, s := range []struct {
		name  string
		store func(b *testing.B) Store
	}{
		{"memstore", func(b *testing.B) Store { return memStore(b) }},
		{"pgstore", func(b *testing.B) Store { return pgStore(pgtest.DB(b, pgstore.Options{})) }},
	} {
		b.Run(s.name, func(b *testing.B) {
			creds, err := ParseCredentials([]byte(`{"credentials":[{"name":"bench","token":"t-bench-token-0001","roles":["ingest"],"platform":"openstack","cloud":"bench"}]}`))
			if err != nil {
				b.Fatal(err)
			}
			a, _ := NewAuthenticator(creds, AuthenticatorOptions{})
			h, err := New(s.store(b), Options{Authenticator: a})
			if err != nil {
				b.Fatal(err)
			}
			const n = 1000
			bodies := make([][]byte, b.N)
			for i := range bodies {
				bodies[i] = append(append([]byte("["), bytes.Join(storetest.GenerateBatch(i*n, n), []byte(","))...), ']')
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				r := httptest.NewRequest("POST", "/api/v1/events", bytes.NewReader(bodies[i]))
				r.Header.Set("Authorization", "Bearer t-bench-token-0001")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != 200 || !bytes.Contains(w.Body.Bytes(), []byte(`"accepted":1000`)) {
					b.Fatalf("%d %s", w.Code, w.Body.String()[:200])
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkHostileInput serves each body of TestHostileInput (the rules
// "Validating one item costs time bounded by its bytes, whatever its
// numbers"; "answered in time proportional to its size") through the whole
// handler, on a fresh in-memory store each time, and reports the time per
// byte of body (ns/B) beside the same figure for a valid 1000-event batch,
// sub-benchmark "baseline": a hostile body that bought more CPU than its
// bytes would show a ns/B far above the baseline's. Bodies that break their
// transfer are left out (their cost is the read timeout's, tested in
// internal/httpbody).
func BenchmarkHostileInput(b *testing.B) {
	// The attack: 1000 items whose sizes hold 1e999999 (140 KB
	// that bought about 30 s of CPU), against 1000 valid items and two.
	valid, huge := make([]string, 1000), make([]string, 1000)
	for i := range valid {
		valid[i] = hostileEvent(fmt.Sprintf("baseline-%d", i), "", "")
		huge[i] = hostileEvent(fmt.Sprintf("huge-%d", i), `,"x":1e999999`, "")
	}
	cases := []hostileCase{
		{name: "baseline/1000 valid items", body: batchOf(valid...)},
		{name: "baseline/two valid items", body: batchOf(valid[0], valid[1])},
		{name: "ingest/1000 items with a size number 1e999999", body: batchOf(huge...)},
	}
	for _, tc := range hostileCases() {
		if tc.readErr == nil {
			cases = append(cases, tc)
		}
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			body := tc.body()
			tc.body = func() []byte { return body }
			// A fresh store for every iteration, made with the timer
			// stopped: on one store, the second iteration of a batch
			// would be answered as duplicates, and an idempotent create
			// as a replay, cheaper paths than the one measured. One event
			// of another resource warms it first, as a running server is
			// (the size schema compiled), so that the first request's
			// costs are not counted against every body.
			warmUp := hostileCase{body: batchOf(hostileEvent("warm-up", "", ""))}
			handler := func() *Handler {
				h, err := New(memStore(b), Options{Authenticator: testAuthenticator(b)})
				if err != nil {
					b.Fatal(err)
				}
				if w := serveHostile(h, warmUp); w.Code != 200 || !bytes.Contains(w.Body.Bytes(), []byte(`"accepted":1,`)) {
					b.Fatalf("warm-up: %d %s", w.Code, w.Body)
				}
				return h
			}
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			var first *httptest.ResponseRecorder
			for range b.N {
				b.StopTimer()
				h := handler()
				b.StartTimer()
				w := serveHostile(h, tc)
				if w.Code >= 500 {
					b.Fatalf("%d: %s", w.Code, w.Body)
				}
				// Every iteration measures the same request on the same
				// state: the same status, and for a batch the same result.
				if first == nil {
					first = w
				} else if w.Code != first.Code || (tc.path == "" && !bytes.Equal(w.Body.Bytes(), first.Body.Bytes())) {
					b.Fatalf("iteration answered %d %.300s, the first %d %.300s", w.Code, w.Body, first.Code, first.Body)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(max(len(body), 1)), "ns/B")
		})
	}
}
