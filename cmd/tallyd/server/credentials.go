package server

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/route"
)

// Credential is one entry of the credentials file, as kept in memory: the
// token itself is never kept, only its SHA-256.
type Credential struct {
	// Name identifies the credential in logs and audit rows. Unique.
	Name string
	// TokenSHA256 is the SHA-256 of the bearer token.
	TokenSHA256 [sha256.Size]byte
	// Roles are what the credential may do; at least one, no repeats.
	Roles []route.Role
	// Platform and Cloud are the scope of an ingest or reconcile credential
	// (required with route.RoleIngest and route.RoleReconcile): it may post
	// only events, or observations, of this platform and cloud
	// (canonical-event.md, Rules: scope).
	Platform, Cloud string
	// Organization is the scope of correlated events (required with
	// route.RoleEvents; optional with route.RoleRead); User is the
	// authenticated user within it, "" for none, whose creates never
	// correlate (event-correlation.md, Scope and invariant).
	Organization, User string
	// RateLimit is the credential's optional rate limit; zero: none.
	RateLimit RateLimit
}

// Has reports whether c holds any of roles.
func (c Credential) Has(roles ...route.Role) bool {
	for _, r := range roles {
		if slices.Contains(c.Roles, r) {
			return true
		}
	}
	return false
}

// credentialFile is the JSON shape of the credentials file.
type credentialFile struct {
	Credentials []jsontext.Value `json:"credentials"`
}

// credentialEntry is the JSON shape of one entry.
type credentialEntry struct {
	Name         string   `json:"name"`
	TokenSHA256  *string  `json:"token_sha256"`
	Token        *string  `json:"token"`
	Roles        []string `json:"roles"`
	Platform     string   `json:"platform"`
	Cloud        string   `json:"cloud"`
	Organization string   `json:"organization"`
	User         string   `json:"user"`
	RateLimit    *struct {
		RequestsPerSecond *float64 `json:"requests_per_second"`
		ItemsPerSecond    *float64 `json:"items_per_second"`
	} `json:"rate_limit"`
}

// MinPlainTokenLen is the shortest plain "token" a credentials file may
// give; a shorter one is guessable. Tokens made by `tallyd token` are 68
// characters, and token_sha256 entries have no such bound to check.
const MinPlainTokenLen = 16

// ParseCredentials reads a credentials file:
//
//	{"credentials":[{"name":"…","token_sha256":"<hex>" or "token":"<plain>",
//	  "roles":["ingest"|"read"|"admin"|"events"|"reconcile"],
//	  "platform":"…","cloud":"…","organization":"…","user":"…",
//	  "rate_limit":{"requests_per_second":<n>,"items_per_second":<n>}}]}
//
// It is strict: an unknown or repeated member, a name missing or used
// twice, neither or both of token_sha256 and token, a token_sha256 that is
// not 64 hex digits or is all zeros (the hash of no token), a token used twice, no role or an unknown or repeated
// role, an ingest or reconcile role without platform and cloud, platform
// or cloud without either role, an events role without organization, or user
// without organization, a plain token shorter than MinPlainTokenLen, and an
// ingest scope naming meta or partner, and a rate_limit member that is not a number
// from 0 to [MaxRate] (or a rate_limit with an unknown member) are refused. Every problem is reported (joined), each
// naming the entry (index and name) and the member. A plain token is hashed
// at once and not kept.
func ParseCredentials(data []byte) ([]Credential, error) {
	var f credentialFile
	if err := json.Unmarshal(data, &f, json.RejectUnknownMembers(true)); err != nil {
		return nil, fmt.Errorf("credentials: %s", describeJSONError(err))
	}
	if f.Credentials == nil {
		return nil, errors.New(`credentials: member "credentials" is missing`)
	}
	p := credentialParser{names: map[string]int{}, hashes: map[[sha256.Size]byte]int{}}
	var creds []Credential
	for i, raw := range f.Credentials {
		if c, ok := p.entry(i, raw); ok {
			creds = append(creds, c)
		}
	}
	if err := errors.Join(p.errs...); err != nil {
		return nil, err
	}
	return creds, nil
}

// credentialParser checks the entries of one credentials file, collecting
// every problem, and what must be unique across entries.
type credentialParser struct {
	errs   []error
	names  map[string]int            // name → index of its entry
	hashes map[[sha256.Size]byte]int // token hash → index of its entry
	where  string                    // the entry being checked, as problems name it
}

// bad records a problem with member of the current entry.
func (p *credentialParser) bad(member, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("credentials: %s: member %q: %s", p.where, member, fmt.Sprintf(format, args...)))
}

// entry checks the i-th entry; false when it could not be decoded at all.
func (p *credentialParser) entry(i int, raw jsontext.Value) (Credential, bool) {
	p.where = fmt.Sprintf("credentials[%d]", i)
	var peek struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &peek) == nil && peek.Name != "" {
		p.where += fmt.Sprintf(" (%q)", peek.Name)
	}
	var e credentialEntry
	if err := json.Unmarshal(raw, &e, json.RejectUnknownMembers(true)); err != nil {
		var serr *json.SemanticError
		if errors.As(err, &serr) && errors.Is(serr.Err, json.ErrUnknownName) {
			p.bad(serr.JSONPointer.LastToken(), "unknown member (known: name, token_sha256, token, roles, platform, cloud, organization, user, rate_limit)")
		} else {
			p.errs = append(p.errs, fmt.Errorf("credentials: %s: %s", p.where, describeJSONError(err)))
		}
		return Credential{}, false
	}
	c := Credential{Name: e.Name, Platform: e.Platform, Cloud: e.Cloud, Organization: e.Organization, User: e.User}
	// These are written with what the credential stores (an audit row, a
	// correlated event), and PostgreSQL stores no NUL: the libraries refuse
	// such a caller, so the file does, rather than every request failing.
	for _, m := range []struct{ member, v string }{{"name", c.Name}, {"platform", c.Platform}, {"cloud", c.Cloud}, {"organization", c.Organization}, {"user", c.User}} {
		if strings.IndexByte(m.v, 0) >= 0 {
			p.bad(m.member, "must not contain NUL")
		}
	}
	p.name(i, e.Name)
	c.TokenSHA256 = p.token(i, e)
	c.Roles = p.roles(e.Roles)
	p.scope(c)
	c.RateLimit = p.rateLimit(e)
	return c, true
}

// rateLimit checks the entry's rate_limit: each rate a number from 0 to
// MaxRate (0: no limit).
func (p *credentialParser) rateLimit(e credentialEntry) RateLimit {
	var out RateLimit
	if e.RateLimit == nil {
		return out
	}
	for _, r := range []struct {
		member string
		v      *float64
		out    *float64
	}{
		{"rate_limit/requests_per_second", e.RateLimit.RequestsPerSecond, &out.RequestsPerSecond},
		{"rate_limit/items_per_second", e.RateLimit.ItemsPerSecond, &out.ItemsPerSecond},
	} {
		switch {
		case r.v == nil:
		case !(*r.v >= 0 && *r.v <= MaxRate):
			p.bad(r.member, "must be a number from 0 (no limit) to %g per second", float64(MaxRate))
		default:
			*r.out = *r.v
		}
	}
	return out
}

// allZero reports whether every byte of b is zero.
func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// name checks that the entry has a name no earlier entry has.
func (p *credentialParser) name(i int, name string) {
	if name == "" {
		p.bad("name", "is required")
		return
	}
	if j, dup := p.names[name]; dup {
		p.bad("name", "is also the name of credentials[%d]", j)
		return
	}
	p.names[name] = i
}

// token returns the SHA-256 of the entry's token (zero when it has none
// valid), checking that no earlier entry has the same token.
func (p *credentialParser) token(i int, e credentialEntry) [sha256.Size]byte {
	var sum [sha256.Size]byte
	switch {
	case e.TokenSHA256 == nil && e.Token == nil:
		p.bad("token_sha256", `one of "token_sha256" or "token" is required`)
	case e.TokenSHA256 != nil && e.Token != nil:
		p.bad("token", `give "token_sha256" or "token", not both`)
	case e.TokenSHA256 != nil:
		b, err := hex.DecodeString(*e.TokenSHA256)
		if err != nil || len(b) != sha256.Size {
			p.bad("token_sha256", "must be 64 hexadecimal digits (the SHA-256 of the token; see `tallyd token`)")
		} else if allZero(b) {
			// No token hashes to zero: such an entry could never
			// authenticate, which is a mistake (a placeholder left in).
			p.bad("token_sha256", "must not be all zeros: it is the SHA-256 of no token, so the credential could never authenticate (see `tallyd token`)")
		} else {
			copy(sum[:], b)
		}
	case len(*e.Token) < MinPlainTokenLen:
		p.bad("token", "must be at least %d characters: a short token is guessable (`tallyd token` makes a strong one)", MinPlainTokenLen)
	default:
		sum = sha256.Sum256([]byte(*e.Token))
	}
	if sum == ([sha256.Size]byte{}) {
		return sum
	}
	if j, dup := p.hashes[sum]; dup {
		p.bad("token", "is also the token of credentials[%d]", j)
	} else {
		p.hashes[sum] = i
	}
	return sum
}

// roles returns the entry's known roles, reporting unknown and repeated ones.
func (p *credentialParser) roles(names []string) []route.Role {
	if len(names) == 0 {
		p.bad("roles", "at least one role is required (ingest, read, admin, events, reconcile)")
	}
	var roles []route.Role
	for _, s := range names {
		r := route.Role(s)
		switch {
		case !r.Valid():
			p.bad("roles", "unknown role %q (known: ingest, read, admin, events, reconcile)", s)
		case slices.Contains(roles, r):
			p.bad("roles", "role %q is given twice", s)
		default:
			roles = append(roles, r)
		}
	}
	return roles
}

// scope checks the members that scope the entry's roles: platform and cloud
// go with the ingest role and only with it; organization goes with the
// events role; user needs organization.
func (p *credentialParser) scope(c Credential) {
	if c.Has(route.RoleIngest) || c.Has(route.RoleReconcile) {
		p.ingestScope(c)
	} else {
		if c.Platform != "" {
			p.bad("platform", "applies only to the ingest role (and the reconcile role), which the credential does not have")
		}
		if c.Cloud != "" {
			p.bad("cloud", "applies only to the ingest role (and the reconcile role), which the credential does not have")
		}
	}
	if c.Has(route.RoleEvents) && c.Organization == "" {
		p.bad("organization", "is required with the events role")
	}
	if c.User != "" && c.Organization == "" {
		p.bad("user", `needs "organization"`)
	}
}

// scopedRole names the role of c that needs a (platform, cloud) scope.
func scopedRole(c Credential) route.Role {
	if c.Has(route.RoleIngest) {
		return route.RoleIngest
	}
	return route.RoleReconcile
}

// ingestScope checks the (platform, cloud) of an ingest or reconcile
// credential.
func (p *credentialParser) ingestScope(c Credential) {
	if c.Platform == "" {
		p.bad("platform", "is required with the %s role", scopedRole(c))
	}
	if c.Cloud == "" {
		p.bad("cloud", "is required with the %s role", scopedRole(c))
	}
	// canonical-event.md, Rules: "platform and cloud are neither meta nor
	// partner"; a scope naming one could never ingest anything.
	for _, m := range []struct{ member, v string }{{"platform", c.Platform}, {"cloud", c.Cloud}} {
		if m.v == "meta" || m.v == "partner" {
			p.bad(m.member, "must not be %q: it names a virtual project, which owns no resources, so every item would be refused", m.v)
		}
	}
}

func describeJSONError(err error) string {
	var serr *json.SemanticError
	if errors.As(err, &serr) && errors.Is(serr.Err, json.ErrUnknownName) {
		return fmt.Sprintf("unknown member %q", serr.JSONPointer.LastToken())
	}
	s := err.Error()
	return strings.TrimPrefix(s, "json: ")
}

// NewToken returns a new random bearer token ("tly_" and 32 random bytes in
// hex) and the hex SHA-256 that a credentials
// file's token_sha256 holds. Errors: the system's random source failing.
func NewToken() (token, sha256Hex string, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", fmt.Errorf("server: new token: %w", err)
	}
	token = "tly_" + hex.EncodeToString(b[:])
	sum := sha256.Sum256([]byte(token))
	return token, hex.EncodeToString(sum[:]), nil
}

// Authenticator finds the credential of a bearer token. It keeps only the
// SHA-256 of each token and compares in constant time against every entry
// (no early exit), so neither the timing nor the order of entries tells an
// attacker which prefix matched. Safe for concurrent use: [Authenticator.Replace]
// swaps the whole set at once, so a request is checked against the old set
// or the new one, never a mix.
type Authenticator struct {
	creds    atomic.Pointer[[]Credential]
	limiters atomic.Pointer[limiters] // of creds, replaced with them
}

// AuthenticatorOptions configures [NewAuthenticator]. It has no field yet:
// it gives the constructor the library's one shape, New(dependency,
// Options) (*T, error), so that an option never breaks a caller.
type AuthenticatorOptions struct{}

// NewAuthenticator returns an Authenticator over creds (as
// [ParseCredentials] returns them). Errors: no credential.
func NewAuthenticator(creds []Credential, _ AuthenticatorOptions) (*Authenticator, error) {
	a := &Authenticator{}
	if err := a.Replace(creds); err != nil {
		return nil, err
	}
	return a, nil
}

// Replace makes creds the set of valid credentials, in one step: tokens
// missing from creds stop working for every request that starts after
// Replace returns (the operations rules, Credentials rotation: tallyd calls it on
// SIGHUP). Errors: no credential, and then the old set stays.
func (a *Authenticator) Replace(creds []Credential) error {
	if len(creds) == 0 {
		return errors.New("server: no credentials")
	}
	c := slices.Clone(creds)
	a.limiters.Store(newLimiters(c, ingest.MaxBatch))
	a.creds.Store(&c)
	return nil
}

// Credentials returns a copy of the credentials, hashes only.
func (a *Authenticator) Credentials() []Credential { return slices.Clone(*a.creds.Load()) }

// Lookup returns the credential whose token is token. It hashes token with
// SHA-256 and compares the hash with every stored hash in constant time.
func (a *Authenticator) Lookup(token string) (Credential, bool) {
	sum := sha256.Sum256([]byte(token))
	creds := *a.creds.Load()
	found := -1
	for i := range creds {
		eq := subtle.ConstantTimeCompare(sum[:], creds[i].TokenSHA256[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return Credential{}, false
	}
	return creds[found], true
}

// Authenticate reads the bearer token of r ("Authorization: Bearer <token>",
// the scheme case-insensitive, RFC 6750) and looks it up. It never reads
// the body.
func (a *Authenticator) Authenticate(r *http.Request) (Credential, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return Credential{}, false
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return Credential{}, false
	}
	return a.Lookup(token)
}
