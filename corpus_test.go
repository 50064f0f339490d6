package tally_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// corpusFile is the real OpenStack corpus the collector's tests, the
// end-to-end tests and the quickstart read. It is part of the repository, so
// a fresh clone runs every corpus test.
const corpusFile = "testdata/openstack/notifications.jsonl"

// TestCorpusIsInTheRepository: the corpus holds its 30 notifications, one
// JSON object a line, and no test, script or Markdown file reads it (or any
// other data) from a directory outside the repository.
func TestCorpusIsInTheRepository(t *testing.T) {
	b, err := os.ReadFile(corpusFile)
	if err != nil {
		t.Fatalf("the OpenStack corpus is part of the repository: %v", err)
	}
	lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	if len(lines) != 30 {
		t.Errorf("%s: %d lines, want 30", corpusFile, len(lines))
	}
	for i, l := range lines {
		if !bytes.HasPrefix(l, []byte("{")) || !bytes.HasSuffix(l, []byte("}")) {
			t.Errorf("%s:%d is not one JSON object", corpusFile, i+1)
		}
	}

	var outside []string
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && strings.HasPrefix(d.Name(), ".") && d.Name() != ".ci" {
				return filepath.SkipDir
			}
			return nil
		}
		if path == "corpus_test.go" || !strings.HasSuffix(path, "_test.go") && !strings.HasSuffix(path, ".sh") &&
			!strings.HasSuffix(path, ".md") && filepath.Dir(path) != ".ci" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "shared/data/") || strings.Contains(l, `"..", "shared"`) {
				outside = append(outside, path+":"+strconv.Itoa(i+1))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string(nil), outside); diff != "" {
		t.Errorf("files that read data from outside the repository (-want +got):\n%s", diff)
	}
}
