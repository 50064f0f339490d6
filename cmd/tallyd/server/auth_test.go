package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/route"
)

// readSpy records whether anything read the body.
type readSpy struct {
	r    io.Reader
	read bool
}

func (s *readSpy) Read(p []byte) (int, error) { s.read = true; return s.r.Read(p) }
func (s *readSpy) Close() error               { return nil }

func testAuthenticator(t testing.TB) *Authenticator {
	t.Helper()
	creds, err := ParseCredentials([]byte(`{"credentials":[
	  {"name":"col","token":"t-ingest-token-01","roles":["ingest"],"platform":"openstack","cloud":"os-a"},
	  {"name":"rec","token":"t-reconcile-token","roles":["reconcile"],"platform":"openstack","cloud":"os-a"},
	  {"name":"ops","token":"t-admin-token-001","roles":["admin"]},
	  {"name":"dash","token":"t-read-token-0001","roles":["read"],"organization":"acme"},
	  {"name":"app","token":"t-events-token-01","roles":["events"],"organization":"acme","user":"u"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAuthenticator(creds, AuthenticatorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// docs/decisions.md, Authentication vs body: "Credentials are checked before the
// body is read: no or unknown token → 401."
func TestRequire(t *testing.T) {
	a := testAuthenticator(t)
	tests := []struct {
		name      string
		roles     []route.Role
		token     string
		want      int
		wantCred  string
		wantRead  bool
		wantChall bool
	}{
		{"no token", []route.Role{route.RoleIngest}, "", 401, "", false, true},
		{"unknown token", []route.Role{route.RoleIngest}, "t-nope", 401, "", false, true},
		{"wrong role", []route.Role{route.RoleIngest}, "t-admin-token-001", 403, "", false, false},
		{"role", []route.Role{route.RoleIngest}, "t-ingest-token-01", 200, "col", true, false},
		{"one of two roles", []route.Role{route.RoleEvents, route.RoleRead}, "t-read-token-0001", 200, "dash", true, false},
		{"other of two roles", []route.Role{route.RoleEvents, route.RoleRead}, "t-events-token-01", 200, "app", true, false},
		{"neither of two roles", []route.Role{route.RoleEvents, route.RoleRead}, "t-admin-token-001", 403, "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotCred string
			inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				c, _ := CredentialFrom(r.Context())
				gotCred = c.Name
				_, _ = io.ReadAll(r.Body)
			})
			spy := &readSpy{r: strings.NewReader(`{"x":1}`)}
			r := httptest.NewRequest("POST", "/x", nil)
			r.Body = spy
			if tt.token != "" {
				r.Header.Set("Authorization", "Bearer "+tt.token)
			}
			w := httptest.NewRecorder()
			require(a, nil, tt.roles, inner).ServeHTTP(w, r)
			got := struct {
				Status int
				Cred   string
				Read   bool
				Chall  bool
			}{w.Code, gotCred, spy.read, strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer")}
			want := struct {
				Status int
				Cred   string
				Read   bool
				Chall  bool
			}{tt.want, tt.wantCred, tt.wantRead, tt.wantChall}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			if w.Code >= 400 && w.Header().Get("Content-Type") != "application/problem+json" {
				t.Errorf("Content-Type %q, want application/problem+json", w.Header().Get("Content-Type"))
			}
		})
	}
}

// TestCheckBody: Transport: a declared body over the cap is 413
// and a coding the reader does not decode is 415 with Accept-Encoding, both
// before the body is read (internal/httpbody reads it, and caps it again).
func TestCheckBody(t *testing.T) {
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	h := checkBody(nil, 4, inner)
	for _, tt := range []struct {
		name, body, coding string
		want               int
		wantAccept         string
	}{
		{"declared over the cap", "12345", "", 413, ""},
		{"at the cap", "1234", "", 204, ""},
		{"gzip", "1234", "gzip", 204, ""},
		{"br", "1234", "br", 415, "gzip, deflate, zstd"},
		{"no body, any coding", "", "br", 204, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/", strings.NewReader(tt.body))
			if tt.coding != "" {
				r.Header.Set("Content-Encoding", tt.coding)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			got := struct {
				Code   int
				Accept string
			}{w.Code, w.Header().Get("Accept-Encoding")}
			if d := cmp.Diff(struct {
				Code   int
				Accept string
			}{tt.want, tt.wantAccept}, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestRequireJSON(t *testing.T) {
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	h := requireJSON(inner)
	for _, tt := range []struct {
		contentType string
		want        int
	}{
		{"", 204},
		{"application/json", 204},
		{"application/json; charset=utf-8", 204},
		{"application/cloudevents+json", 204},
		{"text/plain", 415},
		{"application/x-www-form-urlencoded", 415},
		{"application/xml", 415},
		{"garbage;;", 415},
	} {
		r := httptest.NewRequest("POST", "/api/events", strings.NewReader("{}"))
		if tt.contentType != "" {
			r.Header.Set("Content-Type", tt.contentType)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tt.want {
			t.Errorf("Content-Type %q: %d, want %d", tt.contentType, w.Code, tt.want)
		}
		if tt.want == 415 && !strings.Contains(w.Body.String(), `"code":"unsupported_media_type"`) {
			t.Errorf("Content-Type %q: body %s", tt.contentType, w.Body.String())
		}
	}
}
