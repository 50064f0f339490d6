package tally_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// mdLink matches an inline Markdown link's target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// mdHeading matches an ATX heading line.
var mdHeading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *#*$`)

// anchor is the GitHub anchor of a heading: lower case, punctuation other
// than '-' and '_' dropped, spaces turned into '-'.
func anchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors lists the headings' anchors of a Markdown text, fenced code
// skipped.
func anchors(text string) map[string]bool {
	var prose []string
	fenced := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			prose = append(prose, l)
		}
	}
	a := map[string]bool{}
	for _, m := range mdHeading.FindAllStringSubmatch(strings.Join(prose, "\n"), -1) {
		a[anchor(strings.ReplaceAll(m[1], "`", ""))] = true
	}
	return a
}

// TestMarkdownLinksResolve: every relative link in README.md, CHANGELOG.md
// and docs/**/*.md names a file or directory of the repository, and its
// #anchor, when the target is Markdown, one of that file's headings.
func TestMarkdownLinksResolve(t *testing.T) {
	files := []string{"README.md", "CHANGELOG.md"}
	err := filepath.WalkDir("docs", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var broken []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			p := f
			if path != "" {
				p = filepath.Join(filepath.Dir(f), path)
				if _, err := os.Stat(p); err != nil {
					broken = append(broken, f+": "+target)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(p, ".md") {
				continue
			}
			tb, err := os.ReadFile(p)
			if err != nil || !anchors(string(tb))[frag] {
				broken = append(broken, f+": "+target)
			}
		}
	}
	if diff := cmp.Diff([]string(nil), broken); diff != "" {
		t.Errorf("relative links that do not resolve (-want +got):\n%s", diff)
	}
}
