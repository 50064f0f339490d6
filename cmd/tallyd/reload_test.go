package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/cmd/tallyd/server"
)

// syncBuffer is a log sink safe for the reload goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// reloads returns tally_credentials_reloads_total by result.
func reloads(t *testing.T, m *server.Metrics) map[string]float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "tally_credentials_reloads_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			out[mt.GetLabel()[0].GetValue()] = mt.GetCounter().GetValue()
		}
	}
	return out
}

const (
	credsA   = `{"credentials":[{"name":"a","token":"token-of-a-0000001","roles":["admin"]}]}`
	credsB   = `{"credentials":[{"name":"b","token":"token-of-b-0000001","roles":["admin"]}]}`
	credsBad = `{"credentials":[{"name":"c","token":"token-of-c-0000001","roles":["root"]},{"token":"token-of-d-0000001","roles":["admin"]}]}`
)

// Credentials rotation: "SIGHUP reloads the file atomically. A
// broken file keeps the old set and logs every problem. A reload is visible
// in the log and in a metric."
func TestReloadCredentials(t *testing.T) {
	path := filepath.Join(t.TempDir(), "credentials.json")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(credsA)
	creds, err := readCredentials(path)
	if err != nil {
		t.Fatal(err)
	}
	auth, err := server.NewAuthenticator(creds, server.AuthenticatorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := server.NewMetrics(nil, server.MetricsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	valid := func() []string {
		var out []string
		for _, tok := range []string{"token-of-a-0000001", "token-of-b-0000001", "token-of-c-0000001", "token-of-d-0000001"} {
			if c, ok := auth.Lookup(tok); ok {
				out = append(out, c.Name)
			}
		}
		return out
	}

	steps := []struct {
		name      string
		file      string // "" removes the file
		wantOK    bool
		wantValid []string
		wantLog   []string
	}{
		{"a new set replaces the old one", credsB, true, []string{"b"}, []string{"credentials reloaded", "added=[b]", "removed=[a]"}},
		{"a broken file keeps the old set, every problem logged", credsBad, false, []string{"b"},
			[]string{`credentials[0] (\"c\"): member \"roles\"`, `credentials[1]: member \"name\"`, "the previous credentials stay in use", "problems=2"}},
		{"a missing file keeps the old set", "", false, []string{"b"}, []string{"read credentials file", "problems=1"}},
		// Reading a FIFO blocked the reload (and every later one) until a
		// writer came, with nothing logged.
		{"a FIFO is refused without blocking", "fifo", false, []string{"b"}, []string{"not a regular file (p---------)", "problems=1"}},
		{"a directory is refused", "dir", false, []string{"b"}, []string{"not a regular file (d---------)", "problems=1"}},
		{"a file over the size limit is refused", "huge", false, []string{"b"}, []string{"over the limit of 4194304 bytes", "problems=1"}},
		{"a valid file after them is applied", credsA, true, []string{"a"}, []string{"credentials reloaded", "added=[a]", "removed=[b]"}},
	}
	for _, st := range steps {
		_ = os.RemoveAll(path)
		switch st.file {
		case "":
		case "fifo":
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Fatal(err)
			}
		case "dir":
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		case "huge":
			write(credsA + strings.Repeat(" ", maxCredentialsBytes))
		default:
			write(st.file)
		}
		before := len(logs.String())
		if got := reloadCredentials(path, auth, m, log); got != st.wantOK {
			t.Errorf("%s: reload = %v, want %v", st.name, got, st.wantOK)
		}
		if diff := cmp.Diff(st.wantValid, valid()); diff != "" {
			t.Errorf("%s: valid credentials (-want +got):\n%s", st.name, diff)
		}
		logged := logs.String()[before:]
		for _, w := range st.wantLog {
			if !strings.Contains(logged, w) {
				t.Errorf("%s: the log does not say %q:\n%s", st.name, w, logged)
			}
		}
	}
	if diff := cmp.Diff(map[string]float64{"success": 2, "failure": 5}, reloads(t, m)); diff != "" {
		t.Errorf("tally_credentials_reloads_total (-want +got):\n%s", diff)
	}
}

// The signal itself: a SIGHUP to the process reloads the file.
func TestReloadOnSIGHUP(t *testing.T) {
	path := filepath.Join(t.TempDir(), "credentials.json")
	if err := os.WriteFile(path, []byte(credsA), 0o600); err != nil {
		t.Fatal(err)
	}
	creds, err := readCredentials(path)
	if err != nil {
		t.Fatal(err)
	}
	auth, _ := server.NewAuthenticator(creds, server.AuthenticatorOptions{})
	m, _ := server.NewMetrics(nil, server.MetricsOptions{})
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reloadOnSIGHUP(ctx, path, auth, nil, m, slog.New(slog.NewTextHandler(&logs, nil)))

	if err := os.WriteFile(path, []byte(credsB), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// Wait, bounded, for the reload goroutine.
	for i := 0; i < 200; i++ {
		if _, ok := auth.Lookup("token-of-b-0000001"); ok {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if _, ok := auth.Lookup("token-of-b-0000001"); !ok {
		t.Fatalf("after SIGHUP the new credential is not in use; log:\n%s", logs.String())
	}
	if _, ok := auth.Lookup("token-of-a-0000001"); ok {
		t.Error("after SIGHUP the removed credential still works")
	}
}
