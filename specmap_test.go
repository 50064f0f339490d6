package tally_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// codeSpan matches a Markdown code span on one line.
var codeSpan = regexp.MustCompile("`([^`\n]+)`")

// goRef is the form docs/spec-map.md writes a Go reference in: a package
// directory relative to the repository root ("tally" for the root
// package), a dot, and an identifier or Type.Method. A code span of this
// form is a reference and must resolve.
var goRef = regexp.MustCompile(`^([a-z][a-z0-9_-]*(?:/[a-z][a-z0-9_-]*)*)\.([A-Za-z_]\w*)(?:\.([A-Za-z_]\w*))?$`)

// mdLinkText matches a Markdown link, to keep its text.
var mdLinkText = regexp.MustCompile(`\[([^\]]*)\]\(([^)\s]*)\)`)

// proseLines returns the lines of a Markdown text with their 1-based
// numbers, fenced code blocks left out.
func proseLines(text string) (lines []string, numbers []int) {
	fenced := false
	for i, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			lines = append(lines, l)
			numbers = append(numbers, i+1)
		}
	}
	return lines, numbers
}

// goIdents lists what a reference into dir may name: every exported
// function, type, method of an exported type (for an interface, each
// method it declares) as Type.Method, and the Test, Benchmark, Fuzz and
// Example functions of its _test.go files. ok is false when dir holds no
// Go file.
func goIdents(dir string) (idents map[string]bool, ok bool, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, false, nil
		}
		return nil, false, err
	}
	idents = map[string]bool{}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") {
			continue
		}
		ok = true
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, false, err
		}
		isTest := strings.HasSuffix(name, "_test.go")
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					if isTestFunc(d.Name.Name) && !isTest {
						continue // a TestX outside a _test.go file is no test
					}
					idents[d.Name.Name] = true
					continue
				}
				if recv := recvName(d.Recv.List[0].Type); ast.IsExported(recv) {
					idents[recv+"."+d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					ts, isType := s.(*ast.TypeSpec)
					if !isType || !ts.Name.IsExported() {
						continue
					}
					idents[ts.Name.Name] = true
					if it, isIface := ts.Type.(*ast.InterfaceType); isIface {
						for _, m := range it.Methods.List {
							for _, n := range m.Names {
								if n.IsExported() {
									idents[ts.Name.Name+"."+n.Name] = true
								}
							}
						}
					}
				}
			}
		}
	}
	return idents, ok, nil
}

func isTestFunc(name string) bool {
	for _, p := range []string{"Test", "Benchmark", "Fuzz", "Example"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// recvName is the type name of a method's receiver: T, *T, T[P] or *T[P].
func recvName(x ast.Expr) string {
	for {
		switch t := x.(type) {
		case *ast.StarExpr:
			x = t.X
		case *ast.IndexExpr:
			x = t.X
		case *ast.IndexListExpr:
			x = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}

// specMapProblems checks docs/spec-map.md under root: every Go reference in
// it resolves (see goRef and goIdents), and every ## and ### heading of
// docs/spec/*.md and docs/decisions.md has exactly one ### entry, headed
// "<file>, <heading>" (code spans' backticks dropped, optionally as a link
// whose target is that heading); and every row of a table in
// docs/decisions.md has exactly one list item "- <question>: ..." under its
// section's entry. It returns one line per problem, sorted.
func specMapProblems(t *testing.T, root string) []string {
	t.Helper()
	const mapFile = "docs/spec-map.md"
	b, err := os.ReadFile(filepath.Join(root, mapFile))
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	lines, numbers := proseLines(string(b))

	idents := map[string]map[string]bool{} // by directory; nil: no Go package there
	for i, l := range lines {
		for _, m := range codeSpan.FindAllStringSubmatch(l, -1) {
			r := goRef.FindStringSubmatch(m[1])
			if r == nil {
				continue
			}
			dir := r[1]
			if dir == "tally" {
				dir = "."
			}
			ids, seen := idents[dir]
			if !seen {
				var ok bool
				ids, ok, err = goIdents(filepath.Join(root, filepath.FromSlash(dir)))
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					ids = nil
				}
				idents[dir] = ids
			}
			name := r[2]
			if r[3] != "" {
				name += "." + r[3]
			}
			switch {
			case ids == nil:
				problems = append(problems, fmt.Sprintf("%s:%d: `%s`: no Go package in %s", mapFile, numbers[i], m[1], r[1]))
			case !ids[name]:
				problems = append(problems, fmt.Sprintf("%s:%d: `%s`: %s declares no exported %s (function, type, method or test)", mapFile, numbers[i], m[1], r[1], name))
			}
		}
	}

	// The sections the map must cover, and where each one's anchor is.
	want := map[string]string{} // "<file>, <heading>" -> "<path from docs/>#<anchor>"
	var order []string
	var wantRows []string // "decisions.md, <heading>: <question>", one per row of its tables
	sources, err := filepath.Glob(filepath.Join(root, "docs", "spec", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	sources = append(sources, filepath.Join(root, "docs", "decisions.md"))
	for _, src := range sources {
		sb, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(filepath.Join(root, "docs"), src)
		srcLines, _ := proseLines(string(sb))
		key := ""
		for _, l := range srcLines {
			if q, isRow := tableRowQuestion(l); isRow && key != "" && rel == "decisions.md" {
				wantRows = append(wantRows, key+": "+q)
				continue
			}
			h, ok := strings.CutPrefix(l, "## ")
			if !ok {
				h, ok = strings.CutPrefix(l, "### ")
			}
			if !ok {
				continue
			}
			h = strings.ReplaceAll(strings.TrimSpace(h), "`", "")
			key = path.Base(filepath.ToSlash(rel)) + ", " + h
			want[key] = filepath.ToSlash(rel) + "#" + anchor(h)
			order = append(order, key)
		}
	}

	got := map[string]int{}
	gotRows := map[string]int{}
	entry := ""
	for i, l := range lines {
		if item, isItem := strings.CutPrefix(l, "- "); isItem && strings.HasPrefix(entry, "decisions.md, ") {
			if q, _, hasColon := strings.Cut(item, ":"); hasColon {
				gotRows[entry+": "+strings.ReplaceAll(q, "`", "")]++
			}
			continue
		}
		h, ok := strings.CutPrefix(l, "### ")
		if !ok {
			continue
		}
		h = strings.TrimSpace(h)
		target := ""
		if m := mdLinkText.FindStringSubmatch(h); m != nil && m[0] == h {
			h, target = m[1], m[2]
		}
		h = strings.ReplaceAll(h, "`", "")
		entry = h
		got[h]++
		wantTarget, known := want[h]
		switch {
		case !known:
			problems = append(problems, fmt.Sprintf("%s:%d: entry %q names no section of docs/spec/*.md or docs/decisions.md", mapFile, numbers[i], h))
		case target != "" && target != wantTarget:
			problems = append(problems, fmt.Sprintf("%s:%d: entry %q links to %s, want %s", mapFile, numbers[i], h, target, wantTarget))
		}
	}
	for _, key := range order {
		if n := got[key]; n != 1 {
			problems = append(problems, fmt.Sprintf("%s: section %q has %d entries, want 1", mapFile, key, n))
		}
	}
	for _, row := range wantRows {
		if n := gotRows[row]; n != 1 {
			problems = append(problems, fmt.Sprintf("%s: decision %q has %d lines, want 1", mapFile, row, n))
		}
		delete(gotRows, row)
	}
	for row := range gotRows {
		problems = append(problems, fmt.Sprintf("%s: line for %q names no row of docs/decisions.md", mapFile, row))
	}
	slices.Sort(problems)
	return slices.Compact(problems)
}

// tableRowQuestion returns the first cell of a Markdown table row, its
// backticks dropped; a header row ("| Question |") and the separator row
// are not rows.
func tableRowQuestion(l string) (string, bool) {
	if !strings.HasPrefix(l, "| ") || strings.HasPrefix(l, "| Question ") || strings.HasPrefix(l, "| ---") || strings.HasPrefix(l, "|---") {
		return "", false
	}
	q, _, ok := strings.Cut(l[2:], " | ")
	return strings.ReplaceAll(q, "`", ""), ok
}

// TestSpecMap: docs/spec-map.md names, for each section of the two
// contracts and of the decisions, code and tests that exist, and leaves no
// section out.
func TestSpecMap(t *testing.T) {
	for _, p := range specMapProblems(t, ".") {
		t.Error(p)
	}
}

// TestSpecMapCatchesBrokenOnes runs the check on a throwaway tree, so it is
// known to fail when it should: an unknown package, an unexported name, a
// test name outside a _test.go file, a missing and a doubled section, an
// entry for no section, a link to the wrong anchor, and a decision row with
// no line and a line for no row.
func TestSpecMapCatchesBrokenOnes(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"p/p.go": `package p

type T struct{}

func (T) M()       {}
func (*T) m()      {}
func F()           {}
func f()           {}
func TestNotATest() {}

type I interface{ Do() }
`,
		"p/p_test.go":       "package p\n\nimport \"testing\"\n\nfunc TestF(t *testing.T) {}\n",
		"root.go":           "package tally\n\nfunc R() {}\n",
		"docs/spec/a.md":    "# A\n\n## One\n\n### `Two` two\n\n```\n## Not a heading\n```\n\n## Three\n",
		"docs/decisions.md": "# D\n\n## Rows\n\n| Question | Decision | Why |\n|---|---|---|\n| `Kept` | k | w |\n| Missing | m | w |\n",
		"docs/spec-map.md": "# Map\n\n" +
			"### [a.md, One](spec/a.md#one)\n\n- `p.F`, `p.T`, `p.T.M`, `p.I.Do`, `p.TestF`, `tally.R`, a file name read as a reference: `a.md`\n\n" +
			"### [a.md, Two two](spec/a.md#one)\n\n- `p.f`, `p.T.m`, `p.TestNotATest`, `nosuch.F`, `p.G`\n\n" +
			"### decisions.md, Rows\n\n- Kept: `p.F`\n- Extra: `p.F`\n\n### decisions.md, Rows\n\n### a.md, Four\n\n" +
			"```\n`p.Ignored`\n```\n",
	}
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		"docs/spec-map.md: decision \"decisions.md, Rows: Missing\" has 0 lines, want 1",
		"docs/spec-map.md: line for \"decisions.md, Rows: Extra\" names no row of docs/decisions.md",
		"docs/spec-map.md: section \"a.md, Three\" has 0 entries, want 1",
		"docs/spec-map.md: section \"decisions.md, Rows\" has 2 entries, want 1",
		"docs/spec-map.md:18: entry \"a.md, Four\" names no section of docs/spec/*.md or docs/decisions.md",
		"docs/spec-map.md:5: `a.md`: no Go package in a",
		"docs/spec-map.md:7: entry \"a.md, Two two\" links to spec/a.md#one, want spec/a.md#two-two",
		"docs/spec-map.md:9: `nosuch.F`: no Go package in nosuch",
		"docs/spec-map.md:9: `p.G`: p declares no exported G (function, type, method or test)",
		"docs/spec-map.md:9: `p.T.m`: p declares no exported T.m (function, type, method or test)",
		"docs/spec-map.md:9: `p.TestNotATest`: p declares no exported TestNotATest (function, type, method or test)",
		"docs/spec-map.md:9: `p.f`: p declares no exported f (function, type, method or test)",
	}
	if diff := cmp.Diff(want, specMapProblems(t, dir)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}
