package server

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"
)

// HTTP: one adapter shape, one route table: "The server, its
// package doc, the OpenAPI contract test and the README table derive from
// that data, or are checked against it." The data is the adapters' Routes,
// as Handler.Routes mounts them; each test below fails when a copy
// disagrees with it, and prints the lines the copy should hold.

// servedRoutes is "METHOD path: access" of every route the handler serves.
func servedRoutes(t *testing.T) []string {
	t.Helper()
	h, err := New(memStore(t), Options{Authenticator: testAuthenticator(t)})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, rt := range h.Routes() {
		out = append(out, rt.Pattern()+": "+rt.Access())
	}
	return out
}

// docTableLine is a line of the package documentation's route table:
// "//\tMETHOD path  access".
var docTableLine = regexp.MustCompile(`^//\t(GET|POST|PUT|DELETE) +(/\S*) +(\S.*)$`)

func TestPackageDocListsTheRoutes(t *testing.T) {
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if m := docTableLine.FindStringSubmatch(line); m != nil {
			got = append(got, m[1]+" "+m[2]+": "+m[3])
		}
	}
	want := servedRoutes(t)
	if diff := cmp.Diff(want, got); diff != "" {
		var lines strings.Builder
		for _, w := range want {
			pattern, access, _ := strings.Cut(w, ": ")
			method, path, _ := strings.Cut(pattern, " ")
			fmt.Fprintf(&lines, "//\t%-7s%-56s %s\n", method, path, access)
		}
		t.Errorf("doc.go's route table disagrees with Handler.Routes (-want +got):\n%s\nit should read:\n%s", diff, lines.String())
	}
}

// readmeRow is a row of the README's HTTP API table: "| `METHOD path` | access | …".
var readmeRow = regexp.MustCompile("^\\| `(GET|POST|PUT|DELETE) (/[^`]*)` \\| ([^|]+) \\|")

func TestREADMEListsTheRoutes(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## HTTP API\n")
	if !ok {
		t.Fatal(`README.md has no "## HTTP API" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var got []string
	for line := range strings.SplitSeq(section, "\n") {
		if m := readmeRow.FindStringSubmatch(line); m != nil {
			got = append(got, m[1]+" "+m[2]+": "+strings.TrimSpace(m[3]))
		}
	}
	if diff := cmp.Diff(servedRoutes(t), got); diff != "" {
		t.Errorf("the README's HTTP API table disagrees with Handler.Routes (one row per route, in order; -want +got):\n%s", diff)
	}
}

// roleSummary is the end of a protected operation's summary in openapi.yaml.
var roleSummary = regexp.MustCompile(`\(role ([a-z ]+)\)\.?$`)

// The contract test (TestOpenAPIMatchesHandlers) checks that the document
// has exactly the served operations; this one checks the roles it states.
func TestOpenAPIStatesTheRoles(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for path, item := range doc.Paths {
		for method, v := range item {
			op, ok := v.(map[string]any)
			if !ok || method == "parameters" {
				continue
			}
			key := strings.ToUpper(method) + " " + path
			summary, _ := op["summary"].(string)
			security, hasSecurity := op["security"].([]any)
			switch m := roleSummary.FindStringSubmatch(summary); {
			case hasSecurity && len(security) == 0:
				got[key] = "public"
			case m != nil:
				got[key] = m[1]
			default:
				got[key] = "(neither security: [] nor a summary ending in (role …))"
			}
		}
	}
	want := map[string]string{}
	for _, r := range servedRoutes(t) {
		pattern, access, _ := strings.Cut(r, ": ")
		want[pattern] = access
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("openapi.yaml's roles disagree with Handler.Routes (-want +got):\n%s", diff)
	}
}
