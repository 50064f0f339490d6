package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// A graceful shutdown ends the change-feed streams (Handler.EndStreams,
// registered with http.Server.RegisterOnShutdown), so that it does not
// wait for them; a stream that starts after it ends at once.
func TestEndStreamsEndsEveryStream(t *testing.T) {
	h := contractHandler(t, memStore(t))
	srv := httptest.NewServer(h)
	defer srv.Close()
	open := func(path, token string) *http.Response {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Accept", "text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", path, res.StatusCode)
		}
		return res
	}
	streams := []*http.Response{open("/api/v1/events/feed", tRead), open("/api/events/subscribe", tEvents)}
	h.EndStreams()
	for i, res := range streams {
		done := make(chan error, 1)
		go func() { _, err := io.Copy(io.Discard, res.Body); done <- err }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("stream %d ended with %v, want a clean end", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("stream %d still open 10s after EndStreams", i)
		}
	}
	late := open("/api/v1/events/feed", tRead)
	if _, err := io.Copy(io.Discard, late.Body); err != nil {
		t.Errorf("a stream started after EndStreams: %v, want it ended at once", err)
	}
}
