package correlatehttp_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/correlate"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// golden compares body, indented and with UUIDs replaced, with
// testdata/name.golden. Run `go test -update` to rewrite the files.
func golden(t *testing.T, name string, body []byte) {
	t.Helper()
	v := jsontext.Value(uuidRE.ReplaceAll(body, []byte("00000000-0000-0000-0000-000000000000")))
	if err := v.Indent(); err != nil {
		t.Fatalf("indent %s: %v", body, err)
	}
	got := append([]byte(v), '\n')
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs from %s:\n%s", name, path, got)
	}
}

func TestGoldenBodies(t *testing.T) {
	s := newServer(t, memCorrelate(t), correlate.Options{})
	tests := []struct {
		name, method, path, body string
		status                   int
	}{
		{"create-opening", "POST", "/api/events",
			`{"category":"connection","action":"connect","severity":"error","description":"Cluster prod-1 unreachable",` +
				`"metadata":{"cluster":"prod-1","attempt":3},"correlationKey":"meshery-server/k8s-connection/5b0b1c2d/unreachable",` +
				`"source":"meshery-server","type":"io.meshery.connection.unreachable","specversion":"1.0",` +
				`"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","parentId":"00f067aa0ba902b7","x-vendor":{"a":1}}`, 201},
		{"create-resolution", "POST", "/api/events",
			`{"category":"connection","action":"connect","severity":"success","description":"Connection to cluster prod-1 restored",` +
				`"correlationKey":"meshery-server/k8s-connection/5b0b1c2d/unreachable","resolvedAt":"2026-03-01T12:00:00Z"}`, 200},
		{"create-invalid", "POST", "/api/events",
			`{"category":"","occurrenceCount":1.5,"severity":"fatal","source":"a b","specversion":"2.0",` +
				`"traceId":"00000000000000000000000000000000","parentId":"XYZ","firstSeenAt":"2026-03-01T12:00:00"}`, 400},
		{"list", "GET", "/api/events/list?order=asc", ``, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := s.do(tt.method, tt.path, "org-1/alice", tt.body)
			if res.status != tt.status {
				t.Fatalf("status %d, want %d: %s", res.status, tt.status, res.body)
			}
			golden(t, tt.name, res.body)
		})
	}
}
