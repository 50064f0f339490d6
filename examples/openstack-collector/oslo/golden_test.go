package oslo_test

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/examples/openstack-collector/oslo"
)

var update = flag.Bool("update", false, "rewrite the golden file testdata/openstack/notifications.golden.json")

// corpusPath finds testdata/openstack/notifications.jsonl below the
// repository root (the directory holding go.mod). The corpus is part of the
// repository, so the test fails when it is missing.
func corpusPath(t testing.TB) string {
	t.Helper()
	p := corpusPathOrEmpty()
	if p == "" {
		t.Fatal("the OpenStack corpus testdata/openstack/notifications.jsonl (below the directory holding go.mod) is missing")
	}
	return p
}

// corpusPathOrEmpty walks up from the working directory to the one holding
// go.mod and returns the corpus path next to it, or "" when either is
// missing.
func corpusPathOrEmpty() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
	p := filepath.Join(dir, "testdata", "openstack", "notifications.jsonl")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// goldenEntry is one input line as the golden file pins it.
type goldenEntry struct {
	Line       int            `json:"line"`
	Shape      oslo.Shape     `json:"shape,omitempty"`
	Category   event.Category `json:"category,omitempty"`
	Event      *event.Event   `json:"event,omitempty"`
	Unmappable []string       `json:"unmappable,omitempty"`
	Invalid    string         `json:"invalid,omitempty"`
}

func mapCorpus(t *testing.T) []goldenEntry {
	t.Helper()
	f, err := os.Open(corpusPath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd := oslo.Mapper{Cloud: "os-demo"}.NewReader(f)
	var out []goldenEntry
	for {
		o, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		e := goldenEntry{Line: o.Line, Shape: o.Shape}
		var u *oslo.UnmappableError
		switch {
		case o.Err == nil:
			ev := o.Event
			e.Event = &ev
			e.Category = event.Categorize(ev.EventType)
		case errors.As(o.Err, &u):
			e.Unmappable = u.Reasons
		default:
			e.Invalid = o.Err.Error()
		}
		out = append(out, e)
	}
	return out
}

// TestGolden maps the 30 real notifications and pins the canonical events
// in testdata/openstack/notifications.golden.json below the repository root
// (go test -update rewrites it; review the diff by hand against
// testdata/openstack/README.md). The end-to-end tests of cmd/tallyd read
// the mapped events from that file, not from this package.
func TestGolden(t *testing.T) {
	entries := mapCorpus(t)
	// Mapping is a pure function of the input: a second pass agrees.
	if diff := cmp.Diff(marshalEntries(t, entries), marshalEntries(t, mapCorpus(t))); diff != "" {
		t.Fatalf("two passes over the corpus differ (-first +second):\n%s", diff)
	}
	got, err := json.Marshal(entries, json.Deterministic(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := (*jsontext.Value)(&got).Indent(jsontext.WithIndent("  ")); err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	goldenPath := filepath.Join(filepath.Dir(corpusPath(t)), "notifications.golden.json")
	if *update {
		if err := os.WriteFile(goldenPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("mapping differs from %s (-want +got):\n%s", goldenPath, cmp.Diff(string(want), string(got)))
	}
}

func marshalEntries(t *testing.T, es []goldenEntry) string {
	t.Helper()
	b, err := json.Marshal(es, json.Deterministic(true))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
