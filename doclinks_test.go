package tally_test

import (
	"go/ast"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// linkLike matches what a doc link looks like: [Name], [Name.Method],
// [pkg.Name], [*Name]. go/doc turns the ones that resolve into links; the
// ones left as plain text render with their brackets in go doc and on
// pkg.go.dev.
var linkLike = regexp.MustCompile(`\[[*]?[A-Za-z_]\w*(\.[A-Za-z_]\w*)*\]`)

// brokenDocLinks parses every non-test Go file under root (testdata and
// dot directories skipped) and returns "file:line: [Name]" for each doc
// link that does not resolve: an unexported or unknown name, or a package
// the file does not import. Code blocks are not prose and are skipped.
func brokenDocLinks(t *testing.T, root string) []string {
	t.Helper()
	var broken []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if path != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		entries, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		pkgs := map[string][]*ast.File{} // by package name (a directory may hold package main and an ignored file)
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(path, name), nil, parser.ParseComments)
			if err != nil {
				return err
			}
			pkgs[f.Name.Name] = append(pkgs[f.Name.Name], f)
		}
		for name, files := range pkgs {
			dp, err := doc.NewFromFiles(fset, files, "example.com/"+name, doc.AllDecls|doc.AllMethods|doc.PreserveAST)
			if err != nil {
				return err
			}
			pr := dp.Parser()
			for _, f := range files {
				for _, cg := range f.Comments {
					var plain []string
					for _, b := range pr.Parse(cg.Text()).Content {
						collectPlainLinks(b, &plain)
					}
					for _, l := range plain {
						rel, _ := filepath.Rel(root, fset.Position(cg.Pos()).Filename)
						broken = append(broken, filepath.ToSlash(rel)+": "+l)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(broken)
	return broken
}

func collectPlainLinks(b comment.Block, out *[]string) {
	var texts func([]comment.Text)
	texts = func(ts []comment.Text) {
		for _, t := range ts {
			switch t := t.(type) {
			case comment.Plain:
				*out = append(*out, linkLike.FindAllString(string(t), -1)...)
			case *comment.Link:
				texts(t.Text)
			}
		}
	}
	switch b := b.(type) {
	case *comment.Paragraph:
		texts(b.Text)
	case *comment.Heading:
		texts(b.Text)
	case *comment.List:
		for _, it := range b.Items {
			for _, c := range it.Content {
				collectPlainLinks(c, out)
			}
		}
	}
}

// TestDocLinksResolve: every [Name] in a doc comment of the module links
// somewhere ("Fix the broken doc links ([Less], [interpretError])").
func TestDocLinksResolve(t *testing.T) {
	for _, l := range brokenDocLinks(t, ".") {
		t.Errorf("%s does not resolve (an unexported or unknown name: write it without brackets)", l)
	}
}

// TestDocLinksCatchesBrokenOnes runs the check on a throwaway package, so it
// is known to fail when it should.
func TestDocLinksCatchesBrokenOnes(t *testing.T) {
	dir := t.TempDir()
	src := `// Package p is [Less] than [Compare], links [strings.Cut], [fmt.Println]
// (a standard package need not be imported) and not [nosuch.Thing].
//
//	code blocks are skipped: [NotALink]
package p

import "strings"

// Compare uses [helper] and [Compare] and [strings.Cut].
func Compare() { _ = strings.Cut }

func helper() {}
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []string{"p.go: [Less]", "p.go: [helper]", "p.go: [nosuch.Thing]"}
	if diff := cmp.Diff(want, brokenDocLinks(t, dir)); diff != "" {
		t.Errorf("broken links (-want +got):\n%s", diff)
	}
}
