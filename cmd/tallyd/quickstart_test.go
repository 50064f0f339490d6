package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// quickstartScript holds the README's quickstart commands after the server
// start. TestQuickstart runs them, as written, against the real binary
// started with --dev.
const quickstartScript = "testdata/quickstart.sh"

// The README quickstart works as written: `go run ./cmd/tallyd --dev`, export the
// two lines it prints, run the collector on the real notifications, list
// rejected events, send correlated events with curl and see
// Event-Disposition (Acceptance).
func TestQuickstart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary and the collector")
	}
	for _, tool := range []string{"go", "bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("the quickstart needs %s: %v", tool, err)
			}
			t.Skipf("the quickstart needs %s: %v", tool, err)
		}
	}
	corpusPath(t) // fails without the repository's corpus

	// The README's command exactly, on a free port through the environment.
	start := exec.Command("go", "run", "./cmd/tallyd", "--dev")
	start.Dir = repoRoot(t)
	start.Env = append(os.Environ(), "TALLY_LISTEN=127.0.0.1:0")
	d := startCommand(t, start)
	var server, token string
	deadline := time.Now().Add(10 * time.Second)
	re := regexp.MustCompile(`(?m)^  export TALLY_SERVER=(\S+)\n  export TALLY_TOKEN=(tly_[0-9a-f]{64})$`)
	for {
		if m := re.FindStringSubmatch(d.stdout.String()); m != nil {
			server, token = m[1], m[2]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tallyd --dev printed no export lines:\n%s", d.stdout.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if server != d.base {
		t.Errorf("--dev printed TALLY_SERVER=%s, but tallyd listens on %s", server, d.base)
	}
	if strings.Count(d.stdout.String(), token) != 1 {
		t.Errorf("the --dev token is printed %d times, want once", strings.Count(d.stdout.String(), token))
	}

	script, err := filepath.Abs(quickstartScript)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-euo", "pipefail", script)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "TALLY_SERVER="+server, "TALLY_TOKEN="+token)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("quickstart: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	t.Logf("quickstart output:\n%s", out.String())

	for _, want := range []string{
		// The collector's summary over the 30 notifications.
		"summary: notifications 30, mapped 28, unmappable 2, invalid 0; sent 28 in 1 batches (1 requests): accepted 27, duplicates 0, rejected 1",
		// The refused item, then its dead letter.
		`"event_id":"broken-1","reason":"schema: `,
		`"raw":{"event_id":"broken-1","platform":"openstack"}`,
		// The list: one event, counted twice, resolved.
		`"totalCount":1`,
		`"occurrenceCount":2`,
		`"resolvedAt":"20`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("quickstart output lacks %s", want)
		}
	}
	var got []string
	for _, m := range regexp.MustCompile(`(?mi)^(HTTP/\S+ \d+).*\r?\n(?:.*\r?\n)*?event-disposition: (\w+)`).FindAllStringSubmatch(out.String(), -1) {
		got = append(got, m[1]+" "+m[2])
	}
	want := []string{"HTTP/1.1 201 created", "HTTP/1.1 200 incremented", "HTTP/1.1 200 resolved"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("createEvent answers (-want +got):\n%s", d)
	}

	// The README shows the same commands: when it points at this script,
	// every command of the script must appear in it verbatim.
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil || !bytes.Contains(readme, []byte("cmd/tallyd/"+quickstartScript)) {
		t.Logf("README.md does not refer to cmd/tallyd/%s yet; not comparing", quickstartScript)
		return
	}
	src, err := os.ReadFile(quickstartScript)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(src), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") && !bytes.Contains(readme, []byte(line)) {
			t.Errorf("README.md lacks the quickstart command %s", line)
		}
	}
}
