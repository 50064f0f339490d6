package server

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var budgetInUse = regexp.MustCompile(`(?m)^tally_http_body_budget_in_use_bytes (\S+)$`)

// inUse scrapes the body budget's bytes held now from /metrics.
func inUse(t *testing.T, h http.Handler) float64 {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	m := budgetInUse.FindStringSubmatch(w.Body.String())
	if m == nil {
		t.Fatalf("no budget gauge in /metrics")
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// the body budget is charged for the bytes a body has actually
// brought, not for the Content-Length it declares: uploads that declare
// the cap and then send nothing hold a few KiB each, so they cannot
// starve the other requests of the budget (which waited, then were
// answered 503). Over real sockets, against the server: four idle uploads
// declaring the cap, on a budget of twice the cap, and then a collector's
// batch and a createEvent are answered as usual.
func TestIdleUploadsDoNotStarveTheBodyBudget(t *testing.T) {
	const maxBody = 1 << 20
	st := memStore(t)
	h, err := New(st, Options{Authenticator: testAuthenticator(t), MaxBodyBytes: maxBody,
		BodyBudgetBytes: 2 * maxBody, BodyBudgetWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	const idle = 4
	for i := range idle {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		head := fmt.Sprintf("POST /api/v1/events HTTP/1.1\r\nHost: tally\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n[",
			tokIngest, maxBody)
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatalf("idle upload %d: %v", i, err)
		}
	}
	// Wait until every idle upload holds its share (with the declared
	// length charged up front, the first two hold the whole budget).
	deadline := time.Now().Add(5 * time.Second)
	for inUse(t, h) < idle*16<<10 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	held := inUse(t, h)
	if held > idle*64<<10 {
		t.Errorf("%d idle uploads hold %.0f bytes of the budget, want at most %d", idle, held, idle*64<<10)
	}

	for _, tc := range []struct {
		path, token, body string
		want              int
	}{
		{"/api/v1/events", tokIngest, string(batchOf(hostileEvent("slow-1", "", ""))()), http.StatusOK},
		{"/api/events", tokEvents, `{"category":"c","action":"a"}`, http.StatusCreated},
	} {
		req, _ := http.NewRequest("POST", srv.URL+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer "+tc.token)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("POST %s beside %d idle uploads: %d %s, want %d", tc.path, idle, resp.StatusCode, b, tc.want)
		}
	}
}
