package tally_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// purePackages hold the rules; the README says they "never import a
// database driver or net/http" (STYLE.md: "They never import pgx, sqlx,
// database/sql or net/http").
var purePackages = []string{
	"github.com/tallyhq/tally/event",
	"github.com/tallyhq/tally/ingest",
	"github.com/tallyhq/tally/ingest/projection",
	"github.com/tallyhq/tally/ingest/timeline",
	"github.com/tallyhq/tally/ingest/usage",
	"github.com/tallyhq/tally/correlate",
	"github.com/tallyhq/tally/sizenames",
}

// forbiddenImports are import paths (and every package below them) that no
// package a pure package reaches may import.
var forbiddenImports = []string{
	"net/http",
	"database/sql",
	"github.com/jackc/pgx",
	"github.com/jackc/pgconn",
	"github.com/lib/pq",
	"github.com/jmoiron/sqlx",
}

func isForbidden(importPath string) bool {
	for _, f := range forbiddenImports {
		if importPath == f || strings.HasPrefix(importPath, f+"/") {
			return true
		}
	}
	return false
}

// listedPackage is the part of `go list -json` output the check reads.
type listedPackage struct {
	ImportPath string
	Imports    []string // of the non-test files, for this GOOS/GOARCH
	Module     *struct{ Path string }
}

// goListDeps runs `go list -deps -json` for the packages in dir and returns
// every package it reports: the packages themselves and everything they
// import, transitively, through non-test files.
func goListDeps(t *testing.T, dir string, pkgs ...string) []listedPackage {
	t.Helper()
	goTool, err := exec.LookPath("go") // go test puts GOROOT/bin first in PATH
	if err != nil {
		t.Fatalf("the purity check needs the go command: %v", err)
	}
	cmd := exec.Command(goTool, append([]string{"list", "-deps", "-json=ImportPath,Imports,Module"}, pkgs...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", strings.Join(pkgs, " "), err, stderr.Bytes())
	}
	var listed []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		listed = append(listed, p)
	}
	return listed
}

// impurities walks the imports from each root through the packages of
// module (every package of the module a root reaches, transitively) and
// returns one line per forbidden import, naming the chain that reaches it.
// The walk does not enter other modules' packages: their direct import by a
// module package is checked, what they import in turn is theirs (google/uuid
// imports database/sql/driver to implement its Scanner, for example).
func impurities(listed []listedPackage, module string, roots []string) []string {
	byPath := make(map[string]listedPackage, len(listed))
	for _, p := range listed {
		byPath[p.ImportPath] = p
	}
	inModule := func(path string) bool {
		p, ok := byPath[path]
		return ok && p.Module != nil && p.Module.Path == module
	}
	var found []string
	for _, root := range roots {
		if !inModule(root) {
			found = append(found, fmt.Sprintf("%s: not listed as a package of module %s", root, module))
			continue
		}
		// Breadth first, so each chain reported is a shortest one.
		via := map[string]string{root: ""}
		queue := []string{root}
		for len(queue) > 0 {
			cur := queue[0]
			queue = queue[1:]
			for _, imp := range byPath[cur].Imports {
				if isForbidden(imp) {
					chain := []string{imp}
					for p := cur; p != ""; p = via[p] {
						chain = append(chain, p)
					}
					slices.Reverse(chain)
					found = append(found, fmt.Sprintf("%s imports %s: %s", root, imp, strings.Join(chain, " -> ")))
					continue
				}
				if _, seen := via[imp]; !seen && inModule(imp) {
					via[imp] = cur
					queue = append(queue, imp)
				}
			}
		}
	}
	return found
}

// TestPurity: the pure packages never import a database driver,
// database/sql or net/http, directly or through another package of this
// module ("Purity").
func TestPurity(t *testing.T) {
	listed := goListDeps(t, ".", purePackages...)
	for _, msg := range impurities(listed, "github.com/tallyhq/tally", purePackages) {
		t.Error(msg)
	}
}

// TestPurityCatchesFakeImpurity runs the same check on a throwaway module
// whose "pure" package reaches database/sql through an internal package and
// whose other "pure" package imports net/http/httptest itself, so the check
// is known to fail when it should.
func TestPurityCatchesFakeImpurity(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":              "module example.com/fake\n\ngo 1.26\n",
		"pure/pure.go":        "package pure\n\nimport _ \"example.com/fake/internal/db\"\n",
		"internal/db/db.go":   "package db\n\nimport _ \"database/sql\"\n",
		"web/web.go":          "package web\n\nimport (\n\t_ \"net/http/httptest\"\n\t_ \"strings\"\n)\n",
		"clean/clean.go":      "package clean\n\nimport _ \"example.com/fake/internal/ok\"\n",
		"internal/ok/ok.go":   "package ok\n\nimport _ \"net/url\"\n",
		"clean/clean_test.go": "package clean\n\nimport _ \"net/http\"\n", // test files are not walked
	}
	for name, body := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	roots := []string{"example.com/fake/pure", "example.com/fake/web", "example.com/fake/clean"}
	got := impurities(goListDeps(t, dir, roots...), "example.com/fake", roots)
	want := []string{
		"example.com/fake/pure imports database/sql: example.com/fake/pure -> example.com/fake/internal/db -> database/sql",
		"example.com/fake/web imports net/http/httptest: example.com/fake/web -> net/http/httptest",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("impurities (-want +got):\n%s", diff)
	}
}
