package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// creds are the tokens of a run: one ingest credential per cloud, one
// events credential per user, one read credential. The tokens derive from
// the seed, so `tally-bench --print-credentials` gives a server started by
// hand the same ones.
type creds struct {
	Ingest map[string]string // cloud → token
	Events []string          // user index → token
	Read   string
}

func makeCreds(seed uint64, clouds []string, cc corrConfig) creds {
	c := creds{Ingest: map[string]string{}, Read: fmt.Sprintf("tally-bench-read-%016x", seed)}
	for _, cl := range clouds {
		c.Ingest[cl] = fmt.Sprintf("tally-bench-ingest-%s-%016x", cl, seed)
	}
	for u := range cc.Users {
		c.Events = append(c.Events, fmt.Sprintf("tally-bench-events-%d-%016x", u+1, seed))
	}
	return c
}

// file returns tallyd's credentials file for c.
func (c creds) file(clouds []string, cc corrConfig) []byte {
	type entry struct {
		Name         string   `json:"name"`
		Token        string   `json:"token"`
		Roles        []string `json:"roles"`
		Platform     string   `json:"platform,omitempty"`
		Cloud        string   `json:"cloud,omitempty"`
		Organization string   `json:"organization,omitempty"`
		User         string   `json:"user,omitempty"`
	}
	var es []entry
	for _, cl := range clouds {
		es = append(es, entry{Name: "bench-" + cl, Token: c.Ingest[cl], Roles: []string{"ingest"}, Platform: "openstack", Cloud: cl})
	}
	for u, t := range c.Events {
		es = append(es, entry{Name: "bench-" + cc.user(u), Token: t, Roles: []string{"events"}, Organization: cc.Org, User: cc.user(u)})
	}
	es = append(es, entry{Name: "bench-read", Token: c.Read, Roles: []string{"read"}})
	b, _ := json.MarshalIndent(map[string]any{"credentials": es}, "", "  ")
	return append(b, '\n')
}

// server is tallyd as the bench runs it (pid 0 when given by --url).
type server struct {
	URL  string
	cmd  *exec.Cmd
	dir  string
	done chan error
}

// startTallyd runs the tallyd binary at path on a free loopback port with
// the run's credentials, on databaseURL ("" for the in-memory store), and
// waits until it says where it listens.
func startTallyd(ctx context.Context, path, databaseURL string, credFile []byte, extra []string) (*server, error) {
	dir, err := os.MkdirTemp("", "tally-bench-")
	if err != nil {
		return nil, err
	}
	cf := dir + "/credentials.json"
	if err := os.WriteFile(cf, credFile, 0o600); err != nil {
		return nil, err
	}
	args := []string{"--listen", "127.0.0.1:0", "--credentials-file", cf, "--log-level", "warn", "--log-format", "text"} // it reads the text "listening on" line
	if databaseURL != "" {
		args = append(args, "--database-url", databaseURL)
	} else {
		args = append(args, "--store", "memory")
	}
	args = append(args, extra...)
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), "TALLY_DATABASE_URL=") // only the flag decides the store
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	s := &server{cmd: cmd, dir: dir, done: make(chan error, 1)}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			if i := strings.Index(line, "listening on http://"); i >= 0 && !sent {
				addr <- strings.Fields(line[i+len("listening on "):])[0]
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	go func() { s.done <- cmd.Wait() }()
	select {
	case a := <-addr:
		s.URL = a
	case err := <-s.done:
		os.RemoveAll(dir)
		return nil, fmt.Errorf("tallyd exited before listening: %v", err)
	case <-time.After(60 * time.Second):
		s.stop()
		return nil, errors.New("tallyd did not say where it listens within 60s")
	case <-ctx.Done():
		s.stop()
		return nil, ctx.Err()
	}
	return s, nil
}

// stop ends tallyd (SIGINT, then SIGKILL after 10s) and removes its files.
func (s *server) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	}
	os.RemoveAll(s.dir)
}

// rss reads the child's resident set size and its peak (VmRSS, VmHWM) in
// bytes from /proc; 0, 0 when there is no child.
func (s *server) rss() (cur, peak int64) {
	if s == nil || s.cmd == nil || s.cmd.Process == nil {
		return 0, 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0, 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			cur = kb << 10
		case "VmHWM:":
			peak = kb << 10
		}
	}
	return cur, peak
}

func newClient(conns int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost, t.MaxConnsPerHost = conns, conns
	t.Proxy = nil // loopback or the given URL, never a proxy
	return &http.Client{Transport: t, Timeout: 2 * time.Minute}
}

// ingestAnswer is the body of POST /api/v1/events.
type ingestAnswer struct {
	Accepted   int `json:"accepted"`
	Duplicates int `json:"duplicates"`
	Rejected   []struct {
		Index  int    `json:"index"`
		Reason string `json:"reason"`
	} `json:"rejected"`
}

// postBatch posts one body of items and decodes the answer.
func postBatch(ctx context.Context, c *http.Client, base, token string, body []byte) (ingestAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/api/v1/events", bytes.NewReader(body))
	if err != nil {
		return ingestAnswer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return ingestAnswer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return ingestAnswer{}, err
	}
	if resp.StatusCode != 200 {
		return ingestAnswer{}, fmt.Errorf("POST /api/v1/events: %d %.300s", resp.StatusCode, b)
	}
	var a ingestAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return ingestAnswer{}, fmt.Errorf("POST /api/v1/events: %w", err)
	}
	return a, nil
}

// postCreate posts one createEvent and returns its disposition and id.
func postCreate(ctx context.Context, c *http.Client, base, token string, body []byte) (disp, id string, err error) {
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/api/events", bytes.NewReader(body))
	if err != nil {
		return "", "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", "", err
	}
	if resp.StatusCode != 200 && resp.StatusCode != 201 {
		return "", "", fmt.Errorf("POST /api/events: %d %.300s", resp.StatusCode, b)
	}
	var e struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(b, &e); err != nil {
		return "", "", fmt.Errorf("POST /api/events: %w", err)
	}
	return resp.Header.Get("Event-Disposition"), e.ID, nil
}

// httpReader reads what a run stored through the server's read routes (for
// the in-memory store, whose tables live inside tallyd, and for --url).
type httpReader struct {
	c     *http.Client
	base  string
	creds creds
}

func (r httpReader) get(ctx context.Context, path, token string, v any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", r.base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := r.c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %d %.300s", path, resp.StatusCode, b)
	}
	return json.Unmarshal(b, v)
}

// resources lists the projection rows of clouds.
func (r httpReader) resources(ctx context.Context, clouds []string) (map[resKey]row, error) {
	out := map[resKey]row{}
	for _, cloud := range clouds {
		cursor := ""
		for {
			var page struct {
				Items []struct {
					Cloud         string          `json:"cloud"`
					ResourceType  string          `json:"resource_type"`
					ResourceID    string          `json:"resource_id"`
					Platform      string          `json:"platform"`
					ProjectID     string          `json:"project_id"`
					State         string          `json:"state"`
					Size          json.RawMessage `json:"size"`
					CreatedAt     *time.Time      `json:"created_at"`
					DeletedAt     *time.Time      `json:"deleted_at"`
					FirstEventAt  time.Time       `json:"first_event_at"`
					LastEventAt   time.Time       `json:"last_event_at"`
					LastEventType string          `json:"last_event_type"`
					LastEventID   string          `json:"last_event_id"`
				} `json:"items"`
				NextCursor *string `json:"next_cursor"`
			}
			q := url.Values{"cloud": {cloud}, "status": {"all"}, "limit": {"1000"}}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			if err := r.get(ctx, "/api/v1/resources?"+q.Encode(), r.creds.Read, &page); err != nil {
				return nil, err
			}
			for _, it := range page.Items {
				v := row{Platform: it.Platform, ProjectID: it.ProjectID, State: it.State, CreatedAt: it.CreatedAt, DeletedAt: it.DeletedAt,
					FirstEventAt: it.FirstEventAt, LastEventAt: it.LastEventAt, LastEventType: it.LastEventType, LastEventID: it.LastEventID}
				if len(it.Size) > 0 && string(it.Size) != "null" {
					v.Size = it.Size
				}
				out[resKey{it.Cloud, it.ResourceType, it.ResourceID}] = v
			}
			if page.NextCursor == nil {
				break
			}
			cursor = *page.NextCursor
		}
	}
	return out, nil
}

// correlation aggregates every user's events by correlationKey.
func (r httpReader) correlation(ctx context.Context, cc corrConfig) (map[corrPair]corrAgg, error) {
	out := map[corrPair]corrAgg{}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for u, token := range r.creds.Events {
		wg.Go(func() {
			for page := 0; ; page++ {
				var p struct {
					TotalCount int `json:"totalCount"`
					Data       []struct {
						CorrelationKey  string     `json:"correlationKey"`
						OccurrenceCount *int64     `json:"occurrenceCount"`
						ResolvedAt      *time.Time `json:"resolvedAt"`
					} `json:"data"`
				}
				if err := r.get(ctx, fmt.Sprintf("/api/events/list?page=%d&pageSize=100&order=asc", page), token, &p); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				mu.Lock()
				for _, e := range p.Data {
					k := corrPair{cc.user(u), e.CorrelationKey}
					a := out[k]
					a.Events++
					if e.ResolvedAt == nil {
						a.Open++
					} else {
						a.Resolved++
					}
					if e.OccurrenceCount != nil {
						a.SumCount += *e.OccurrenceCount
					}
					out[k] = a
				}
				mu.Unlock()
				if len(p.Data) == 0 || (page+1)*100 >= p.TotalCount {
					return
				}
			}
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}
