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
)

// sizeNamesScript holds docs/operations.md's commands for size names and
// sync runs.
const sizeNamesScript = "testdata/sizenames.sh"

// Issue "Operating tallyd", point 7: "Size names and sync runs need no SQL
// by hand: an operator can see and load what a run would load, documented
// in the operations guide with the commands." The guide's commands, run as
// written against the real binary with the --dev token: the registry and
// one schema are listed, a run with size_names only is recorded completed
// with nothing changed, the runs are listed, and a volume event then
// carries the name with the id kept as reported. Every command of the
// script is in the guide verbatim.
func TestOperationsSizeNamesCommands(t *testing.T) {
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("the commands need %s: %v", tool, err)
			}
			t.Skipf("the commands need %s: %v", tool, err)
		}
	}
	d := startTallyd(t, "--dev")
	var token string
	re := regexp.MustCompile(`(?m)^  export TALLY_TOKEN=(tly_[0-9a-f]{64})$`)
	for deadline := time.Now().Add(10 * time.Second); token == ""; time.Sleep(20 * time.Millisecond) {
		if m := re.FindStringSubmatch(d.stdout.String()); m != nil {
			token = m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("tallyd --dev printed no token:\n%s", d.stdout.String())
		}
	}
	script, err := filepath.Abs(sizeNamesScript)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-euo", "pipefail", script)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "TALLY_SERVER="+d.base, "TALLY_TOKEN="+token)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", sizeNamesScript, err, out.String(), errOut.String())
	}
	for _, want := range []string{
		`"resource_type":"floating_ip","size_schema":`,
		`"title": "openstack volume size"`,
		`{"run_id":1,"created":0,"updated":0,"deleted":0,"unchanged":0,"skipped":0,"refused":0,"event_ids":[],"rejected":[]}`,
		`"run_id":1,"cloud":"os-dev","platform":"openstack",`,
		`"status":"completed"`,
		`{"accepted":1,"duplicates":0,"rejected":[]}`,
		`"size":{"size_gb":10,"type":"ssd"},"provider":{"size_as_reported":{"type":"7a8b9c0d-1e2f-4a3b-8c4d-5e6f70819203"}}`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the commands' output lacks %s:\n%s", want, out.String())
		}
	}

	guide, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(sizeNamesScript)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(src), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") && !bytes.Contains(guide, []byte(line)) {
			t.Errorf("docs/operations.md lacks the command %s", line)
		}
	}
}
