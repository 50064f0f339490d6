package server

import (
	"bytes"
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
