package server

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// eventSource reads a stream as a browser's EventSource does (WHATWG HTML,
// "Interpreting an event stream"): lines end with CRLF, LF or CR; a field
// id without NUL sets the last event ID buffer, which becomes the last
// event ID string at each dispatch (a blank line), even one with no data;
// retry with only digits sets the reconnection time. It reads for d.
type eventSource struct {
	lastEventID string
	retry       string
	events      []string // the type of each event dispatched
}

func (es *eventSource) read(t *testing.T, url, tok string, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	if es.lastEventID != "" {
		req.Header.Set("Last-Event-ID", es.lastEventID)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("%s: %d", url, res.StatusCode)
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	idBuf, typ, data := es.lastEventID, "", ""
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "\r") {
			t.Errorf("a line holds a CR: %q", line)
		}
		if line == "" {
			es.lastEventID = idBuf
			if data != "" {
				if typ == "" {
					typ = "message"
				}
				es.events = append(es.events, typ)
			}
			typ, data = "", ""
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			if !strings.Contains(value, "\x00") {
				idBuf = value
			}
		case "event":
			typ = value
		case "data":
			data += value + "\n"
		case "retry":
			es.retry = value
		default:
			t.Errorf("a field a browser ignores: %q", line)
		}
	}
}

// A browser that subscribes from now and is cut off before its first item
// reconnects with no Last-Event-ID (none was ever sent), so from a new
// "now": whatever was stored between the two connections is lost. The same
// holds for a filtered subscription whose filter has matched nothing yet:
// its reconnect starts again from its first cursor.
func TestFeedAttackBrowserReconnectFromNow(t *testing.T) {
	a := newAtk(t, memStore(t), Options{})
	a.ingest("b", 0, 2)
	for _, c := range []struct {
		path, tok string
		store     func()
	}{
		{"/api/v1/events/feed?after=now", atkReadA, func() { a.ingest("b", 10, 1) }},
		{"/api/events/subscribe?after=now", atkEvAU, func() {
			a.do("POST", "/api/events", atkEvAU, `{"category":"c","action":"a","correlationKey":"b"}`, nil)
		}},
	} {
		var es eventSource
		es.read(t, a.srv.URL+c.path, c.tok, 500*time.Millisecond)
		if es.retry != "2000" {
			t.Errorf("%s: retry %q, want 2000", c.path, es.retry)
		}
		// The connection dropped; meanwhile an item is stored.
		c.store()
		// The browser reconnects after retry ms, to the same URL, with the
		// last event ID it holds.
		es.read(t, a.srv.URL+c.path, c.tok, 1500*time.Millisecond)
		if len(es.events) != 1 {
			t.Errorf("%s: %d events after a reconnect (%v, Last-Event-ID %q); want the one stored while disconnected", c.path, len(es.events), es.events, es.lastEventID)
		}
	}
}
