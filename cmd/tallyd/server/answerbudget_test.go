package server

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// heapObjects is the bytes of live and not yet swept heap objects.
func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// peakHeapDuring runs fn and returns the largest heap growth over the heap
// before it (after a collection), sampled while fn runs. The collector
// runs at GOGC 10 meanwhile, so garbage cannot hide the live bytes' peak.
func peakHeapDuring(fn func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	base := heapObjects()
	var (
		peak uint64
		wg   sync.WaitGroup
		done = make(chan struct{})
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if h := heapObjects(); h > base && h-base > peak {
				peak = h - base
			}
			select {
			case <-done:
				return
			default:
				time.Sleep(100 * time.Microsecond)
			}
		}
	}()
	fn()
	close(done)
	wg.Wait()
	return peak
}

// Every answer is bounded by bytes as well as by items (ingest.MaxPageBytes
// of item bytes per page): serving the largest answer each route allows
// holds the heap within a stated budget, whatever the listing holds. Over a
// real socket, on both stores: 10 events of 4 MiB each (40 MiB;
// five creates and five updates of v-0), then each read route at its
// largest limit. Before the byte bound GET /api/v1/events?limit=1000
// answered all 40 MiB and grew the heap by several times that.
func TestLargestAnswersStayWithinTheirMemoryBudget(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) Store{
		"memstore": func(t *testing.T) Store { return memStore(t) },
		"pgstore":  func(t *testing.T) Store { return pgStore(pgtest.DB(t, pgstore.Options{})) },
	} {
		t.Run(name, func(t *testing.T) { largestAnswersWithinBudget(t, open(t)) })
	}
}

func largestAnswersWithinBudget(t *testing.T, st Store) {
	const (
		pad    = 4 << 20
		budget = 48 << 20 // the heap growth allowed while serving one answer
	)
	h, err := New(st, Options{Authenticator: testAuthenticator(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	do := func(method, path, token, body string) (int, int64) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, n
	}
	x := strings.Repeat("x", pad)
	for i := range 10 {
		typ, id := "volume.create.end", fmt.Sprintf("v-%d", i)
		if i >= 5 {
			typ, id = "volume.update.end", "v-0"
		}
		item := fmt.Sprintf(`{"event_id":"e%d","timestamp":"2026-03-01T00:%02d:00Z","event_type":%q,"platform":"openstack","cloud":"os-a",`+
			`"resource_type":"volume","resource_id":%q,"project_id":"p1","payload":{"state":"available","size":{"size_gb":1,"type":"ssd","pad":%q}}}`,
			i, i, typ, id, x)
		if code, _ := do("POST", "/api/v1/events", tokIngest, item); code != http.StatusOK {
			t.Fatalf("ingest %d: status %d", i, code)
		}
	}
	for _, path := range []string{
		"/api/v1/events?limit=1000",
		"/api/v1/resources?limit=1000&status=all",
		"/api/v1/resources/os-a/volume/v-0",
		"/api/v1/resources/os-a/volume/v-0/events",
	} {
		t.Run(path, func(t *testing.T) {
			var (
				code int
				n    int64
			)
			grew := peakHeapDuring(func() { code, n = do("GET", path, tokAdmin, "") })
			if code != http.StatusOK {
				t.Fatalf("status %d", code)
			}
			if n > ingest.MaxPageBytes+2*pad {
				t.Errorf("answer of %d bytes, want at most %d", n, ingest.MaxPageBytes+2*pad)
			}
			t.Logf("answer %d bytes, heap grew by at most %d bytes", n, grew)
			if grew > budget {
				t.Errorf("heap grew by %d bytes serving the answer, budget %d", grew, budget)
			}
		})
	}
}
