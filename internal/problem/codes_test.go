package problem_test

import (
	"bufio"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/internal/problem"
	"github.com/tallyhq/tally/store"
)

// One problem vocabulary: every code is declared once, with one status,
// a title and a meaning, and New gives a problem of that status.
func TestCodes(t *testing.T) {
	codes := problem.Codes()
	if len(codes) == 0 {
		t.Fatal("Codes() is empty")
	}
	seen := map[problem.Code]bool{}
	prev := 0
	for _, c := range codes {
		if seen[c] {
			t.Errorf("code %q listed twice", c)
		}
		seen[c] = true
		if s := c.Status(); s < 400 || s > 599 {
			t.Errorf("%s: status %d is not an error status", c, s)
		} else if s < prev {
			t.Errorf("%s: status %d listed after %d (Codes is ordered by status)", c, s, prev)
		} else {
			prev = s
		}
		if c.Title() == "" {
			t.Errorf("%s: no title", c)
		}
		if m := c.Meaning(); m == "" || m[0] < 'A' || m[0] > 'Z' || !strings.HasSuffix(m, ".") {
			t.Errorf("%s: meaning %q is not a sentence", c, m)
		}
		if strings.Trim(string(c), "abcdefghijklmnopqrstuvwxyz_") != "" {
			t.Errorf("code %q is not lower snake case", c)
		}
		d := problem.New(c, "Detail.")
		// Tally's problem kinds (B42Labs/tally's Reporting API, problem.Type*).
		if !slices.Contains([]string{"validation", "unauthorized", "forbidden", "not_found", "method_not_allowed", "conflict",
			"payload_too_large", "history_too_long", "internal", "unavailable"}, c.Kind()) {
			t.Errorf("%s: kind %q is not one of Tally's", c, c.Kind())
		}
		want := problem.Details{Type: "urn:tally:error:" + c.Kind(), Title: c.Title(), Status: c.Status(), Detail: "Detail.", Code: c}
		if diff := cmp.Diff(want, d); diff != "" {
			t.Errorf("New(%s) (-want +got):\n%s", c, diff)
		}
	}
	if got := problem.Code("nonesuch").Status(); got != 500 {
		t.Errorf("an undeclared code's status = %d, want 500", got)
	}
}

// docs/http-api.md's code table lists Codes(), in order, each with its
// status and meaning.
func TestDocsListEveryCode(t *testing.T) {
	f, err := os.Open("../../docs/http-api.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type row struct{ Code, Status, Type, Meaning string }
	var got []row
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "### Problem codes":
			in = true
		case in && strings.HasPrefix(line, "#"):
			in = false
		case in && strings.HasPrefix(line, "| `"):
			cells := strings.Split(strings.Trim(line, "|"), " | ")
			if len(cells) != 4 {
				t.Errorf("row %q does not have 4 cells", line)
				continue
			}
			got = append(got, row{strings.Trim(strings.TrimSpace(cells[0]), "`"), strings.TrimSpace(cells[1]),
				strings.Trim(strings.TrimSpace(cells[2]), "`"), strings.TrimSpace(cells[3])})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	var want []row
	for _, c := range problem.Codes() {
		want = append(want, row{string(c), strconv.Itoa(c.Status()), "urn:tally:error:" + c.Kind(), c.Meaning()})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("docs/http-api.md, Problem codes (-Codes() +docs):\n%s", diff)
	}
}

// Acceptance of the one vocabulary: no problem-code string literal outside
// internal/problem in non-test code. Generated code (the API client, made
// from openapi.yaml, whose enum TestOpenAPIProblemCodesAreCodes checks) is
// not written by hand; a literal that spells a code but means something
// else is listed in otherMeaning.
func TestNoCodeLiteralOutsideProblem(t *testing.T) {
	otherMeaning := map[string][]string{
		"event/problem.go": {"internal"}, // event.RuleInternal, a rule
	}
	codes := map[string]bool{}
	for _, c := range problem.Codes() {
		codes[string(c)] = true
	}
	root := "../.."
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "internal/problem" || (rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err == nil && codes[s] && !slices.Contains(otherMeaning[rel], s) {
				t.Errorf("%s: the problem code %q as a literal; use its problem.Code constant", fset.Position(lit.Pos()), s)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked only %d files; is the walk rooted at the module?", checked)
	}
}

// Fail is the one mapper of the shared cases; each adapter passes only its
// own in own.
func TestFail(t *testing.T) {
	errOwn := errors.New("the adapter's own")
	own := func(err error) (problem.Details, bool) {
		if errors.Is(err, errOwn) {
			return problem.NotFound("Own."), true
		}
		return problem.Details{}, false
	}
	refused := &problem.Error{Details: problem.New(problem.CodeBusy, "Busy."), Header: http.Header{"Retry-After": {"1"}}}
	type answer struct {
		Status      int
		Code        string
		RetryAfter  string
		Challenge   string
		ContentType string
	}
	for _, tt := range []struct {
		name string
		err  error
		want answer
	}{
		{"a refusal carries its problem and headers", fmt.Errorf("read: %w", refused), answer{503, "busy", "1", "", problem.ContentType}},
		{"no caller is 401", problem.ErrNoCaller, answer{401, "unauthorized", "", problem.Challenge, problem.ContentType}},
		{"the adapter's own case", fmt.Errorf("x: %w", errOwn), answer{404, "not_found", "", "", problem.ContentType}},
		{"the store unavailable is 503", fmt.Errorf("x: %w", store.ErrUnavailable), answer{503, "store_unavailable", strconv.Itoa(problem.RetryAfterSeconds), "", problem.ContentType}},
		{"anything else is 500", errors.New("disk on fire"), answer{500, "internal", "", "", problem.ContentType}},
		{"a validation error the adapter does not map is 500", &event.ValidationError{}, answer{500, "internal", "", "", problem.ContentType}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			var logs strings.Builder
			problem.Fail(w, httptest.NewRequest("GET", "/x", nil), slog.New(slog.NewTextHandler(&logs, nil)), "adapter", tt.err, own)
			var code string
			if b := w.Body.String(); strings.Contains(b, `"code":"`) {
				code = strings.SplitN(strings.SplitN(b, `"code":"`, 2)[1], `"`, 2)[0]
			}
			got := answer{w.Code, code, w.Header().Get("Retry-After"), w.Header().Get("WWW-Authenticate"), w.Header().Get("Content-Type")}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if tt.want.Status == 500 && !strings.Contains(logs.String(), "level=ERROR msg=\"adapter: request failed\"") {
				t.Errorf("a 500 is not logged at ERROR with the adapter's name: %s", logs.String())
			}
			if tt.want.Status < 500 && strings.Contains(logs.String(), "level=ERROR") {
				t.Errorf("a client error is logged at ERROR: %s", logs.String())
			}
		})
	}
	t.Run("a client gone gets no answer", func(t *testing.T) {
		for _, err := range []error{fmt.Errorf("read: %w", problem.ErrClientGone)} {
			w := httptest.NewRecorder()
			func() {
				defer func() {
					if r := recover(); r != http.ErrAbortHandler {
						t.Errorf("Fail(%v) recovered %v, want http.ErrAbortHandler", err, r)
					}
				}()
				problem.Fail(w, httptest.NewRequest("POST", "/x", nil), nil, "adapter", err, own)
			}()
			if w.Body.Len() != 0 {
				t.Errorf("Fail(%v) wrote %q", err, w.Body.String())
			}
		}
	})
}
