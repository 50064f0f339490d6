package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// A credential's rate_limit (docs/operations.md, Rate limits): past its
// requests or items per second a request is answered 429 rate_limited with
// Retry-After, stores nothing, and is counted; other credentials are not
// affected. Both stores.
func TestRateLimits(t *testing.T) {
	creds, err := ParseCredentials([]byte(`{"credentials":[
	  {"name":"slow","token":"t-slow-token-0001","roles":["ingest","read"],"platform":"openstack","cloud":"os-a","rate_limit":{"requests_per_second":0.001}},
	  {"name":"bulk","token":"t-bulk-token-0001","roles":["ingest"],"platform":"openstack","cloud":"os-a","rate_limit":{"items_per_second":0.001}},
	  {"name":"free","token":"t-free-token-0001","roles":["ingest"],"platform":"openstack","cloud":"os-a"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for name, open := range map[string]func(t *testing.T) Store{
		"memstore": func(t *testing.T) Store { return memStore(t) },
		"pgstore":  func(t *testing.T) Store { return pgStore(pgtest.DB(t, pgstore.Options{})) },
	} {
		t.Run(name, func(t *testing.T) {
			auth, err := NewAuthenticator(creds, AuthenticatorOptions{})
			if err != nil {
				t.Fatal(err)
			}
			st := open(t)
			h, err := New(st, Options{Authenticator: auth})
			if err != nil {
				t.Fatal(err)
			}
			post := func(token string, n int, prefix string) *httptest.ResponseRecorder {
				items := make([]string, n)
				for i := range items {
					items[i] = hostileEvent(prefix+strconv.Itoa(i), "", "")
				}
				r := httptest.NewRequest("POST", "/api/v1/events", strings.NewReader("["+strings.Join(items, ",")+"]"))
				r.Header.Set("Authorization", "Bearer "+token)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w
			}
			limited := func(what string, w *httptest.ResponseRecorder) {
				t.Helper()
				var p struct{ Code string }
				_ = json.Unmarshal(w.Body.Bytes(), &p)
				if w.Code != http.StatusTooManyRequests || p.Code != "rate_limited" || w.Header().Get("Retry-After") == "" {
					t.Errorf("%s: %d %q Retry-After %q, want 429 rate_limited with Retry-After", what, w.Code, w.Body, w.Header().Get("Retry-After"))
				}
			}
			// One request a second at most, a bucket of one: the first
			// passes, the next is refused and stores nothing.
			if w := post("t-slow-token-0001", 1, "s"); w.Code != 200 {
				t.Fatalf("first request: %d %s", w.Code, w.Body)
			}
			limited("second request", post("t-slow-token-0001", 1, "t"))
			// Items: one full batch fits the bucket, the next does not.
			if w := post("t-bulk-token-0001", 1000, "b"); w.Code != 200 {
				t.Fatalf("first batch: %d %.200s", w.Code, w.Body)
			}
			limited("second batch", post("t-bulk-token-0001", 1, "c"))
			// Others are not limited.
			for i := range 3 {
				if w := post("t-free-token-0001", 1, "f"+strconv.Itoa(i)); w.Code != 200 {
					t.Errorf("unlimited credential, request %d: %d %s", i, w.Code, w.Body)
				}
			}
			if got := countStore(t, st).Events; got != 1+1000+3 {
				t.Errorf("%d events stored, want %d: a refused request stores nothing", got, 1+1000+3)
			}
			got := map[string]string{}
			for _, l := range []string{"requests", "items"} {
				for _, c := range []string{"slow", "bulk"} {
					got[c+"/"+l] = scrape(t, h, `tally_rate_limited_total{credential="`+c+`",limit="`+l+`"}`)
				}
			}
			want := map[string]string{"slow/requests": "1", "slow/items": "", "bulk/requests": "", "bulk/items": "1"}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("tally_rate_limited_total (-want +got):\n%s", d)
			}
		})
	}
}

// The credentials file refuses a rate that is not a number from 0 to
// MaxRate, naming the member.
func TestRateLimitParse(t *testing.T) {
	for _, v := range []string{`-1`, `1e7`, `"5"`, `null`} {
		_, err := ParseCredentials([]byte(`{"credentials":[{"name":"x","token":"t-x-token-000001","roles":["read"],"rate_limit":{"requests_per_second":` + v + `}}]}`))
		if v == `null` {
			if err != nil {
				t.Errorf("requests_per_second null: %v, want no limit", err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "rate_limit") {
			t.Errorf("requests_per_second %s: %v, want a refusal naming rate_limit", v, err)
		}
	}
	if _, err := ParseCredentials([]byte(`{"credentials":[{"name":"x","token":"t-x-token-000001","roles":["read"],"rate_limit":{"per_minute":1}}]}`)); err == nil {
		t.Error("an unknown member of rate_limit was accepted")
	}
}
