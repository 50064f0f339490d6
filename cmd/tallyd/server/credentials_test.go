package server

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/route"
)

func sha(s string) [sha256.Size]byte { return sha256.Sum256([]byte(s)) }

func shaHex(s string) string { h := sha(s); return hex.EncodeToString(h[:]) }

func TestParseCredentials(t *testing.T) {
	data := `{"credentials":[
	  {"name":"collector","token_sha256":"` + shaHex("t1") + `","roles":["ingest"],"platform":"openstack","cloud":"os-a"},
	  {"name":"ops","token":"t2-token-for-tests","roles":["admin","read"]},
	  {"name":"app","token":"t3-token-for-tests","roles":["events"],"organization":"acme","user":"u1"},
	  {"name":"dash","token":"t4-token-for-tests","roles":["read"],"organization":"acme"}
	]}`
	got, err := ParseCredentials([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want := []Credential{
		{Name: "collector", TokenSHA256: sha("t1"), Roles: []route.Role{route.RoleIngest}, Platform: "openstack", Cloud: "os-a"},
		{Name: "ops", TokenSHA256: sha("t2-token-for-tests"), Roles: []route.Role{route.RoleAdmin, route.RoleRead}},
		{Name: "app", TokenSHA256: sha("t3-token-for-tests"), Roles: []route.Role{route.RoleEvents}, Organization: "acme", User: "u1"},
		{Name: "dash", TokenSHA256: sha("t4-token-for-tests"), Roles: []route.Role{route.RoleRead}, Organization: "acme"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ParseCredentials (-want +got):\n%s", d)
	}
}

// Every refusal names the entry and the member, so an operator can fix the
// file from the message alone.
func TestParseCredentialsRefuses(t *testing.T) {
	h := shaHex("x-token-for-tests")
	tests := []struct {
		name, data string
		want       []string // each must appear in the error
	}{
		{"not JSON", `{`, []string{"credentials:"}},
		{"unknown top-level member", `{"credentials":[],"extra":1}`, []string{`unknown member "extra"`}},
		{"no credentials member", `{}`, []string{`member "credentials" is missing`}},
		{"unknown member", `{"credentials":[{"name":"a","token":"x-token-for-tests","roles":["read"],"tokn":"y"}]}`,
			[]string{`credentials[0] ("a"): member "tokn": unknown member`}},
		{"bad hex", `{"credentials":[{"name":"a","token_sha256":"zz","roles":["read"]}]}`,
			[]string{`credentials[0] ("a"): member "token_sha256": must be 64 hexadecimal digits`}},
		{"short hex", `{"credentials":[{"name":"a","token_sha256":"abcd","roles":["read"]}]}`,
			[]string{`member "token_sha256": must be 64 hexadecimal digits`}},
		{"no token", `{"credentials":[{"name":"a","roles":["read"]}]}`,
			[]string{`credentials[0] ("a"): member "token_sha256": one of "token_sha256" or "token" is required`}},
		{"both tokens", `{"credentials":[{"name":"a","token":"x-token-for-tests","token_sha256":"` + h + `","roles":["read"]}]}`,
			[]string{`member "token": give "token_sha256" or "token", not both`}},
		{"unknown role", `{"credentials":[{"name":"a","token":"x-token-for-tests","roles":["root"]}]}`,
			[]string{`credentials[0] ("a"): member "roles": unknown role "root"`}},
		{"no role", `{"credentials":[{"name":"a","token":"x-token-for-tests","roles":[]}]}`,
			[]string{`member "roles": at least one role is required`}},
		{"ingest without scope", `{"credentials":[{"name":"c","token":"x-token-for-tests","roles":["ingest"]}]}`,
			[]string{`credentials[0] ("c"): member "platform": is required with the ingest role`,
				`credentials[0] ("c"): member "cloud": is required with the ingest role`}},
		{"ingest without cloud", `{"credentials":[{"name":"c","token":"x-token-for-tests","roles":["ingest"],"platform":"openstack"}]}`,
			[]string{`member "cloud": is required with the ingest role`}},
		{"events without organization", `{"credentials":[{"name":"e","token":"x-token-for-tests","roles":["events"]}]}`,
			[]string{`credentials[0] ("e"): member "organization": is required with the events role`}},
		{"scope without ingest", `{"credentials":[{"name":"r","token":"x-token-for-tests","roles":["read"],"platform":"p"}]}`,
			[]string{`member "platform": applies only to the ingest role`}},
		{"duplicate name", `{"credentials":[{"name":"a","token":"x-token-for-tests","roles":["read"]},{"name":"a","token":"y-token-for-tests","roles":["read"]}]}`,
			[]string{`credentials[1] ("a"): member "name": is also the name of credentials[0]`}},
		{"duplicate token", `{"credentials":[{"name":"a","token":"x-token-for-tests","roles":["read"]},{"name":"b","token_sha256":"` + h + `","roles":["read"]}]}`,
			[]string{`credentials[1] ("b"): member "token": is also the token of credentials[0]`}},
		{"short plain token", `{"credentials":[{"name":"s","token":"hunter2","roles":["read"]}]}`,
			[]string{`credentials[0] ("s"): member "token": must be at least 16 characters`}},
		{"no name", `{"credentials":[{"token":"x-token-for-tests","roles":["read"]}]}`,
			[]string{`credentials[0]: member "name": is required`}},
		// X1: an organization with NUL made every createEvent of the
		// credential a 500 on PostgreSQL (SQLSTATE 22021).
		{"NUL", `{"credentials":[{"name":"n\u0000","token":"x-token-for-tests","roles":["events","ingest"],"platform":"openstack","cloud":"c\u0000","organization":"o\u0000","user":"u\u0000"}]}`,
			[]string{`member "name": must not contain NUL`, `member "cloud": must not contain NUL`, `member "organization": must not contain NUL`, `member "user": must not contain NUL`}},
		// An all-zero hash is the SHA-256 of no token anyone can send: the
		// entry could never authenticate, and two such entries started
		// silently because the duplicate check skipped the zero value.
		{"all-zero hash", `{"credentials":[{"name":"z","token_sha256":"` + strings.Repeat("0", 64) + `","roles":["read"]}]}`,
			[]string{`credentials[0] ("z"): member "token_sha256": must not be all zeros`}},
		{"all-zero hash twice", `{"credentials":[{"name":"z","token_sha256":"` + strings.Repeat("0", 64) + `","roles":["read"]},{"name":"y","token_sha256":"` + strings.Repeat("0", 64) + `","roles":["read"]}]}`,
			[]string{`credentials[0] ("z"): member "token_sha256": must not be all zeros`, `credentials[1] ("y"): member "token_sha256": must not be all zeros`}},
		{"duplicate member", `{"credentials":[{"name":"a","name":"b","token":"x-token-for-tests","roles":["read"]}]}`,
			[]string{`/credentials/0`, `duplicate object member name "name"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseCredentials([]byte(tt.data))
			if err == nil {
				t.Fatal("ParseCredentials: no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestAuthenticator(t *testing.T) {
	creds, err := ParseCredentials([]byte(`{"credentials":[
	  {"name":"a","token":"alpha-token-for-tests","roles":["read"]},
	  {"name":"b","token_sha256":"` + shaHex("beta") + `","roles":["admin"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAuthenticator(creds, AuthenticatorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		header string
		want   string // credential name, "" for none
	}{
		{"Bearer alpha-token-for-tests", "a"},
		{"bearer beta", "b"},
		{"BEARER  beta ", "b"},
		{"Bearer gamma", ""},
		{"Bearer ", ""},
		{"Basic YTpi", ""},
		{"alpha-token-for-tests", ""},
		{"", ""},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		if tt.header != "" {
			r.Header.Set("Authorization", tt.header)
		}
		c, ok := a.Authenticate(r)
		if ok != (tt.want != "") || c.Name != tt.want {
			t.Errorf("Authenticate(%q) = %q, %v; want %q", tt.header, c.Name, ok, tt.want)
		}
	}
	if _, err := NewAuthenticator(nil, AuthenticatorOptions{}); err == nil {
		t.Error("NewAuthenticator(nil, AuthenticatorOptions{}): no error")
	}
}

func TestNewToken(t *testing.T) {
	tok, sum, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^tly_[0-9a-f]{64}$`).MatchString(tok) {
		t.Errorf("token %q: want tly_ and 64 hex digits", tok)
	}
	if sum != shaHex(tok) {
		t.Errorf("sha256 %s, want %s", sum, shaHex(tok))
	}
	tok2, _, _ := NewToken()
	if tok2 == tok {
		t.Error("two tokens are equal")
	}
}

// FuzzParseCredentials: whatever the file holds, ParseCredentials never
// panics, and what it accepts keeps every rule it enforces.
func FuzzParseCredentials(f *testing.F) {
	for _, s := range []string{
		`{"credentials":[]}`,
		`{"credentials":[{"name":"a","token":"x-token-for-tests","roles":["read"]}]}`,
		`{"credentials":[{"name":"c","token_sha256":"` + shaHex("t") + `","roles":["ingest"],"platform":"openstack","cloud":"os"}]}`,
		`{"credentials":[{"name":"e","token":"y-token-for-tests","roles":["events","read"],"organization":"o","user":"u"}]}`,
		`{"credentials":[{"name":"a","token":"x-token-for-tests","roles":["read"]},{"name":"a","token":"x-token-for-tests","roles":["read"]}]}`,
		`{"credentials":[{"name":"a","token":"x-token-for-tests","roles":["root"],"extra":1}]}`,
		`{"credentials":null}`, `[]`, `{`, "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		creds, err := ParseCredentials(data)
		if err != nil {
			return
		}
		names := map[string]bool{}
		hashes := map[[32]byte]bool{}
		for _, c := range creds {
			if c.Name == "" || names[c.Name] {
				t.Fatalf("accepted an empty or repeated name %q", c.Name)
			}
			names[c.Name] = true
			if hashes[c.TokenSHA256] {
				t.Fatalf("accepted a repeated token (%q)", c.Name)
			}
			hashes[c.TokenSHA256] = true
			if len(c.Roles) == 0 {
				t.Fatalf("%q: accepted no role", c.Name)
			}
			for _, r := range c.Roles {
				if !r.Valid() {
					t.Fatalf("%q: accepted role %q", c.Name, r)
				}
			}
			if c.Has(route.RoleIngest) && (c.Platform == "" || c.Cloud == "") {
				t.Fatalf("%q: ingest without scope", c.Name)
			}
			if c.Has(route.RoleEvents) && c.Organization == "" {
				t.Fatalf("%q: events without organization", c.Name)
			}
		}
	})
}

// "platform and cloud are neither meta nor partner" (canonical-event.md,
// Rules): an ingest scope naming one could never ingest, so it is refused.
func TestParseCredentialsRefusesVirtualScope(t *testing.T) {
	for _, member := range []string{"platform", "cloud"} {
		for _, v := range []string{"meta", "partner"} {
			scope := map[string]string{"platform": "openstack", "cloud": "os-a"}
			scope[member] = v
			data := fmt.Sprintf(`{"credentials":[{"name":"c","token":"x-token-for-tests","roles":["ingest"],"platform":%q,"cloud":%q}]}`, scope["platform"], scope["cloud"])
			_, err := ParseCredentials([]byte(data))
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("member %q: must not be %q", member, v)) {
				t.Errorf("%s %s: %v", member, v, err)
			}
		}
	}
}
