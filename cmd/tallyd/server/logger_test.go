package server

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/sizenames"
)

// panicSizeNames panics while reading size names, standing in for a bug in
// one item's checks.
type panicSizeNames struct{ ingest.Store }

func (panicSizeNames) SizeNames(context.Context, string, string) ([]sizenames.Row, error) {
	panic("boom")
}

// Every Options.Logger of the module discards when nil (one
// meaning per idea), so the server hands its Logger to the ingest service:
// a panic in one item's checks is refused as that item and still logged.
func TestConfigLoggerReceivesIngestPanics(t *testing.T) {
	var logs bytes.Buffer
	st := memStore(t)
	st.Ingest = panicSizeNames{st.Ingest}
	h, err := New(st, Options{Authenticator: testAuthenticator(t), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/api/v1/events", strings.NewReader("["+hostileEvent("p1", "", "")+"]"))
	req.Header.Set("Authorization", "Bearer "+tokIngest)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "internal: ") {
		t.Errorf("answer %d %s, want 200 with the item refused internal", w.Code, w.Body)
	}
	if !strings.Contains(logs.String(), "checks panicked") {
		t.Errorf("the server's logger did not receive the panic:\n%s", logs.String())
	}
}
