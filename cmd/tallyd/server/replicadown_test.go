package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallyhq/tally/store"
	"github.com/tallyhq/tally/store/memstore"
)

// "replica stopped": a replica whose host vanished (no refusal, no answer)
// made every read wait its connection's timeout before the primary
// answered, request after request. After one unavailable answer the
// replica is skipped for replicaRetryAfter: the next reads go to the
// primary at once, without trying the replica (counted as fallbacks).
func TestReplicaDownIsSkipped(t *testing.T) {
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := memStore(t)
	var calls atomic.Int32
	const hang = 300 * time.Millisecond
	st.Replica = &Replica{Projection: db.Projection(), Usage: db.Ingest(), ReplayedAt: func(ctx context.Context) (time.Time, error) {
		calls.Add(1)
		time.Sleep(hang) // a connection to a vanished host, until its timeout
		return time.Time{}, errors.Join(store.ErrUnavailable, errors.New("no answer"))
	}}
	h, err := New(st, Options{Authenticator: testAuthenticator(t)})
	if err != nil {
		t.Fatal(err)
	}
	get := func() time.Duration {
		t.Helper()
		r := httptest.NewRequest("GET", "/api/v1/resources", nil)
		r.Header.Set("Authorization", "Bearer "+tokAdmin)
		w := httptest.NewRecorder()
		began := time.Now()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK || w.Header().Get(AsOfHeader) != "" {
			t.Fatalf("GET /api/v1/resources: %d %s, Tally-As-Of %q; want the primary's answer", w.Code, w.Body, w.Header().Get(AsOfHeader))
		}
		return time.Since(began)
	}
	if d := get(); d < hang {
		t.Fatalf("the first read took %v; the fake replica hangs %v", d, hang)
	}
	for i := range 5 {
		if d := get(); d >= hang {
			t.Errorf("read %d after the replica failed took %v: it waited for the replica again", i+2, d)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the replica was tried %d times within replicaRetryAfter, want 1", n)
	}
}
