package main

import (
	"bytes"
	"context"
	"io"
	"net/url"
	"strings"
	"testing"

	"github.com/tallyhq/tally/internal/pgtest"
)

// Issue "Operating tallyd", point 5: "tallyd projection rebuild --help
// prints the database URL, password included, as a default: never print
// secrets." Every subcommand's --help, with every URL variable of the
// environment set to one holding a password, prints no password.
func TestNoHelpPrintsASecret(t *testing.T) {
	secretEnv := env(map[string]string{
		"TALLY_DATABASE_URL":      "postgres://u:secret@h/db",
		"TALLY_READ_DATABASE_URL": "postgres://u:secret@replica/db",
		"TALLY_CREDENTIALS_FILE":  "/run/secret/creds.json",
	})
	for _, args := range [][]string{
		{"--help"},
		{"serve", "--help"},
		{"migrate", "--help"},
		{"token", "--help"},
		{"projection", "--help"},
		{"projection", "rebuild", "--help"},
		{"retention", "--help"},
		{"healthcheck", "--help"},
	} {
		var out, errOut bytes.Buffer
		_ = run(context.Background(), args, secretEnv, &out, &errOut)
		if out.Len() == 0 {
			t.Errorf("tallyd %s printed no help", strings.Join(args, " "))
		}
		if all := out.String() + errOut.String(); strings.Contains(all, "secret") {
			t.Errorf("tallyd %s prints a secret:\n%s", strings.Join(args, " "), all)
		}
	}
}

// Point 5: "library errors read on one line and say what to do (database
// not migrated (version 0, want 10): run tallyd migrate; schema "x" does
// not exist)". The commands that read a migrated schema refuse an empty
// one and a missing one in one line that says so.
func TestCommandsOnAnUnmigratedDatabase(t *testing.T) {
	empty := pgtest.EmptyURL(t)
	u, err := url.Parse(empty)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", "no_such_schema")
	u.RawQuery = q.Encode()
	missing := u.String()
	for _, tc := range []struct {
		name, url, want string
	}{
		{"not migrated", empty, "database not migrated (version 0, want "},
		{"no schema", missing, `schema "no_such_schema" does not exist`},
	} {
		for _, cmd := range [][]string{{"projection", "rebuild"}, {"retention", "--keep-events", "365d"}} {
			t.Run(tc.name+"/"+cmd[0], func(t *testing.T) {
				err := run(context.Background(), append(cmd, "--database-url", tc.url), env(nil), io.Discard, io.Discard)
				if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
					t.Errorf("tallyd %s: %v, want one line with %q", cmd[0], err, tc.want)
				}
				if tc.name == "not migrated" && err != nil && !strings.Contains(err.Error(), "run tallyd migrate") {
					t.Errorf("tallyd %s: %v, want it to say run tallyd migrate", cmd[0], err)
				}
			})
		}
	}
	// migrate itself names the missing schema rather than "no schema has
	// been selected to create in".
	err = run(context.Background(), []string{"migrate", "--database-url", missing}, env(nil), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `schema "no_such_schema" does not exist`) {
		t.Errorf("tallyd migrate on a missing schema: %v", err)
	}
}
