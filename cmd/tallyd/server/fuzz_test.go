package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/reconcile"
)

// fuzzServer is one handler on the in-memory store, shared by a fuzz
// target's inputs (so later inputs meet what earlier ones stored, such as
// duplicates) and replaced every fuzzServerInputs inputs, so the store, and
// the cost of counting it, stay bounded over a long run. mu serialises the
// inputs so the store's counts before and after an input are that input's.
type fuzzServer struct {
	mu   sync.Mutex
	auth *Authenticator
	h    *Handler
	st   Store
	n    int
}

const fuzzServerInputs = 200

func newFuzzServer(f *testing.F) *fuzzServer {
	return &fuzzServer{auth: testAuthenticator(&testing.T{})}
}

func (s *fuzzServer) post(t *testing.T, path, token string, body []byte) (*httptest.ResponseRecorder, counts) {
	if s.n%fuzzServerInputs == 0 {
		s.st = memStore(t)
		h, err := New(s.st, Options{Authenticator: s.auth})
		if err != nil {
			t.Fatal(err)
		}
		s.h = h
	}
	s.n++
	r := httptest.NewRequest("POST", path, bytes.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+token)
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	before := countStore(t, s.st)
	s.h.ServeHTTP(w, r)
	return w, countStore(t, s.st).sub(before)
}

func fuzzSeeds(f *testing.F) {
	for _, c := range hostileCases() {
		if b := c.body(); len(b) < 4096 {
			f.Add(b)
		}
	}
	f.Add([]byte(hostileEvent("seed", "", `,"provider":{"a":[1,"\u0041\/"]}`)))
	f.Add(batchOf(hostileEvent("s1", "", ""), hostileEvent("s1", "", ""), strings.Replace(hostileEvent("s2", "", ""), `"os-a"`, `"os-b"`, 1))())
	f.Add([]byte(`{"category":"c","action":"a","correlationKey":"k","metadata":{"x": [1, 2]}}`))
}

// Proof: "Fuzz POST /api/v1/events … bodies on the in-memory
// store. Each input must never get a 5xx and never panic; … have every item
// accounted for: accepted + duplicates + rejected = items, and each rejected
// item is dead-lettered or audited." Nothing is stored for a refused body.
// (The time an input takes is not asserted: no timed assertions.)
func FuzzPostEvents(f *testing.F) {
	fuzzSeeds(f)
	s := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		s.mu.Lock()
		defer s.mu.Unlock()
		w, stored := s.post(t, "/api/v1/events", tokIngest, body)
		if w.Code >= 500 {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		items, splitErr := ingest.SplitBatch(body)
		if w.Code != 200 {
			// Only a body that cannot be split is refused whole: 400, or 413
			// for more than 1000 items.
			if splitErr == nil || (w.Code == 413) != errors.Is(splitErr, ingest.ErrBatchTooLarge) {
				t.Fatalf("status %d for a body SplitBatch answers %d items, %v: %s", w.Code, len(items), splitErr, w.Body)
			}
			if stored != (counts{}) {
				t.Fatalf("status %d but stored %+v", w.Code, stored)
			}
			return
		}
		if splitErr != nil {
			t.Fatalf("200 for a body SplitBatch refuses (%v): %s", splitErr, w.Body)
		}
		var res ingest.Result
		if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil {
			t.Fatalf("result %s: %v", w.Body, err)
		}
		if n := res.Accepted + res.Duplicates + len(res.Rejected); n != len(items) {
			t.Fatalf("accepted %d + duplicates %d + rejected %d = %d, want %d items", res.Accepted, res.Duplicates, len(res.Rejected), n, len(items))
		}
		// A scope violation is audited instead of dead-lettered; a conflict
		// (a key stored for another resource) is both.
		scope, conflict := 0, 0
		for _, r := range res.Rejected {
			switch {
			case strings.HasPrefix(r.Reason, "scope:"):
				scope++
			case strings.HasPrefix(r.Reason, "conflict:"):
				conflict++
			}
		}
		want := counts{Events: res.Accepted, DeadLetters: len(res.Rejected) - scope, Audit: scope + conflict}
		if stored != want {
			t.Fatalf("stored %+v, want %+v for %s", stored, want, w.Body)
		}
	})
}

// POST /api/v1/clouds/{cloud}/sync (docs/reconciliation.md): any body on the
// in-memory store gets no 5xx and no panic; a body reconcile.Decode refuses
// is 400 and changes nothing; a 200 lists one event id per create, update
// and delete, stores no more events than that, and dead-letters exactly the
// refused ones.
func FuzzPostSync(f *testing.F) {
	f.Add([]byte(`{"platform":"openstack","observed_at":"2026-03-01T12:00:00Z","complete_types":["instance"],` +
		`"resources":[{"resource_type":"instance","resource_id":"vm-1","project_id":"p","state":"active","size":{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"f"}}],` +
		`"deletes":[{"resource_type":"instance","resource_id":"vm-2","deleted_at":"2026-03-01T11:00:00Z"}],` +
		`"size_names":[{"resource_type":"volume","member":"type","value":"id","name":"ssd"}]}`))
	f.Add([]byte(`{"platform":"openstack","observed_at":"2026-03-01T12:00:00Z","resources":[{"resource_type":"instance","resource_id":"vm-1","project_id":"p","state":"active","size":{"vcpus":1e999}}]}`))
	f.Add([]byte(`{"platform":"vmware","observed_at":"2026-03-01T12:00:00Z"}`))
	// An id listed under two types gets one deterministic event id: with
	// the seed above stored, the instance's create is a conflict.
	f.Add([]byte(`{"platform":"openstack","observed_at":"2026-03-01T12:00:00Z","resources":[{"resource_type":"volume","resource_id":"vm-1","project_id":"p","state":"available","size":{"size_gb":1,"type":"ssd"}},{"resource_type":"instance","resource_id":"vm-1","project_id":"p","state":"active","size":{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"f"}}]}`))
	f.Add([]byte(`{"platform":"openstack","observed_at":"2026-03-01T12:00:00+01:00","size_names":null}`))
	f.Add([]byte(`{"platform":"openstack","observed_at":"2026-03-01T12:00:00Z","resources":[{"resource_type":"x","resource_id":"\u0000","project_id":"p","state":"s","size":{}}]}`))
	s := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		s.mu.Lock()
		defer s.mu.Unlock()
		w, stored := s.post(t, "/api/v1/clouds/os-a/sync", tokSync, body)
		if w.Code >= 500 {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		obs, decodeErr := reconcile.Decode(body)
		switch {
		case decodeErr != nil:
			if w.Code != 400 {
				t.Fatalf("status %d for an observation Decode refuses (%v): %s", w.Code, decodeErr, w.Body)
			}
		case obs.ObservedAt.After(time.Now().Add(reconcile.MaxClockSkew)):
			// The one rule Decode cannot judge: the server's clock.
			if w.Code != 403 && (w.Code != 400 || !strings.Contains(w.Body.String(), `"member":"/observed_at","rule":"maximum"`)) {
				t.Fatalf("status %d for an observation dated after the clock: %s", w.Code, w.Body)
			}
		case w.Code == 200:
			var out reconcile.Outcome
			if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
				t.Fatalf("outcome %s: %v", w.Body, err)
			}
			if n := out.Created + out.Updated + out.Deleted; len(out.EventIDs) != n || stored.Events > n {
				t.Fatalf("%d event ids, %d stored, for %d creates, updates and deletes: %s", len(out.EventIDs), stored.Events, n, w.Body)
			}
			if stored.DeadLetters != out.Refused {
				t.Fatalf("%d dead letters for %d refused: %s", stored.DeadLetters, out.Refused, w.Body)
			}
			return
		case w.Code != 403:
			t.Fatalf("status %d for an observation Decode accepts: %s", w.Code, w.Body)
		}
		if stored != (counts{}) {
			t.Fatalf("status %d but stored %+v", w.Code, stored)
		}
	})
}

// The same for createEvent (POST /api/events): never a 5xx, never a panic;
// a 2xx carries Event-Disposition, a refusal stores nothing, and at most one
// event is opened.
func FuzzCreateEvent(f *testing.F) {
	fuzzSeeds(f)
	s := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		s.mu.Lock()
		defer s.mu.Unlock()
		w, stored := s.post(t, "/api/events", tokEvents, body)
		switch {
		case w.Code >= 500:
			t.Fatalf("status %d: %s", w.Code, w.Body)
		case w.Code >= 400:
			if stored != (counts{}) {
				t.Fatalf("status %d but stored %+v", w.Code, stored)
			}
			if w.Header().Get("Content-Type") != "application/problem+json" {
				t.Fatalf("status %d without a problem body", w.Code)
			}
		default:
			if w.Header().Get("Event-Disposition") == "" {
				t.Fatalf("status %d without Event-Disposition", w.Code)
			}
			if stored.Events != 0 || stored.DeadLetters != 0 || stored.Audit != 0 || stored.Correlated > 1 || stored.Correlated < 0 {
				t.Fatalf("stored %+v", stored)
			}
		}
	})
}
