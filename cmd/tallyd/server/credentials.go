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

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Role is what a credential may do. The set is closed; see [Roles].
type Role string

// The roles a credential may hold.
const (
	// RoleIngest may post canonical events (POST /api/v1/events), within
	// the credential's (platform, cloud) scope.
	RoleIngest Role = "ingest"
	// RoleRead may read the size-schema registry and the projection, and
	// list the correlated events of the credential's whole organization,
	// every user's (DECISIONS.md, Who reads correlated events).
	RoleRead Role = "read"
	// RoleAdmin may read dead letters and the audit log, and read and put
	// size schemas.
	RoleAdmin Role = "admin"
	// RoleEvents may create, list, mark and delete the correlated events of
	// the credential's own (organization, user); without a user its creates
	// never correlate.
	RoleEvents Role = "events"
)

// Roles lists every [Role].
func Roles() []Role { return []Role{RoleIngest, RoleRead, RoleAdmin, RoleEvents} }

// Valid reports whether r is one of [Roles].
func (r Role) Valid() bool { return slices.Contains(Roles(), r) }

// Credential is one entry of the credentials file, as kept in memory: the
// token itself is never kept, only its SHA-256.
type Credential struct {
	// Name identifies the credential in logs and audit rows. Unique.
	Name string
	// TokenSHA256 is the SHA-256 of the bearer token.
	TokenSHA256 [sha256.Size]byte
	// Roles are what the credential may do; at least one, no repeats.
	Roles []Role
	// Platform and Cloud are the scope of an ingest credential (required
	// with [RoleIngest]): it may post only events of this platform and
	// cloud (canonical-event.md, Rules: scope).
	Platform, Cloud string
	// Organization is the scope of correlated events (required with
	// [RoleEvents]; optional with [RoleRead]); User is the authenticated
	// user within it, "" for none (event-correlation.md, Scope and
	// invariant).
	Organization, User string
}

// Has reports whether c holds any of roles.
func (c Credential) Has(roles ...Role) bool {
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
}

// MinPlainTokenLen is the shortest plain "token" a credentials file may
// give; a shorter one is guessable. Tokens made by `tallyd token` are 68
// characters, and token_sha256 entries have no such bound to check.
const MinPlainTokenLen = 16

// ParseCredentials reads a credentials file:
//
//	{"credentials":[{"name":"…","token_sha256":"<hex>" or "token":"<plain>",
//	  "roles":["ingest"|"read"|"admin"|"events"],
//	  "platform":"…","cloud":"…","organization":"…","user":"…"}]}
//
// It is strict: an unknown or repeated member, a name missing or used
// twice, neither or both of token_sha256 and token, a token_sha256 that is
// not 64 hex digits, a token used twice, no role or an unknown or repeated
// role, an ingest role without platform and cloud, platform or cloud
// without the ingest role, an events role without organization, or user
// without organization, a plain token shorter than MinPlainTokenLen, and an
// ingest scope naming meta or partner are refused. Every problem is reported (joined), each
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
	var (
		errs   []error
		creds  []Credential
		names  = map[string]int{}
		hashes = map[[sha256.Size]byte]int{}
	)
	for i, raw := range f.Credentials {
		where := fmt.Sprintf("credentials[%d]", i)
		var peek struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(raw, &peek) == nil && peek.Name != "" {
			where += fmt.Sprintf(" (%q)", peek.Name)
		}
		bad := func(member, format string, args ...any) {
			errs = append(errs, fmt.Errorf("credentials: %s: member %q: %s", where, member, fmt.Sprintf(format, args...)))
		}
		var e credentialEntry
		if err := json.Unmarshal(raw, &e, json.RejectUnknownMembers(true)); err != nil {
			var serr *json.SemanticError
			if errors.As(err, &serr) && errors.Is(serr.Err, json.ErrUnknownName) {
				bad(serr.JSONPointer.LastToken(), "unknown member (known: name, token_sha256, token, roles, platform, cloud, organization, user)")
			} else {
				errs = append(errs, fmt.Errorf("credentials: %s: %s", where, describeJSONError(err)))
			}
			continue
		}
		c := Credential{Name: e.Name, Platform: e.Platform, Cloud: e.Cloud, Organization: e.Organization, User: e.User}
		if e.Name == "" {
			bad("name", "is required")
		} else if j, dup := names[e.Name]; dup {
			bad("name", "is also the name of credentials[%d]", j)
		} else {
			names[e.Name] = i
		}
		switch {
		case e.TokenSHA256 == nil && e.Token == nil:
			bad("token_sha256", `one of "token_sha256" or "token" is required`)
		case e.TokenSHA256 != nil && e.Token != nil:
			bad("token", `give "token_sha256" or "token", not both`)
		case e.TokenSHA256 != nil:
			b, err := hex.DecodeString(*e.TokenSHA256)
			if err != nil || len(b) != sha256.Size {
				bad("token_sha256", "must be 64 hexadecimal digits (the SHA-256 of the token; see `tallyd token`)")
			} else {
				copy(c.TokenSHA256[:], b)
			}
		default:
			if len(*e.Token) < MinPlainTokenLen {
				bad("token", "must be at least %d characters: a short token is guessable (`tallyd token` makes a strong one)", MinPlainTokenLen)
			} else {
				c.TokenSHA256 = sha256.Sum256([]byte(*e.Token))
			}
		}
		if c.TokenSHA256 != ([sha256.Size]byte{}) {
			if j, dup := hashes[c.TokenSHA256]; dup {
				bad("token", "is also the token of credentials[%d]", j)
			} else {
				hashes[c.TokenSHA256] = i
			}
		}
		if len(e.Roles) == 0 {
			bad("roles", "at least one role is required (ingest, read, admin, events)")
		}
		for _, s := range e.Roles {
			r := Role(s)
			switch {
			case !r.Valid():
				bad("roles", "unknown role %q (known: ingest, read, admin, events)", s)
			case slices.Contains(c.Roles, r):
				bad("roles", "role %q is given twice", s)
			default:
				c.Roles = append(c.Roles, r)
			}
		}
		if c.Has(RoleIngest) {
			if c.Platform == "" {
				bad("platform", "is required with the ingest role")
			}
			if c.Cloud == "" {
				bad("cloud", "is required with the ingest role")
			}
			// canonical-event.md, Rules: "platform and cloud are neither meta
			// nor partner"; a scope naming one could never ingest anything.
			for member, v := range map[string]string{"platform": c.Platform, "cloud": c.Cloud} {
				if v == "meta" || v == "partner" {
					bad(member, "must not be %q: it names a virtual project, which owns no resources, so every item would be refused", v)
				}
			}
		} else {
			if c.Platform != "" {
				bad("platform", "applies only to the ingest role, which the credential does not have")
			}
			if c.Cloud != "" {
				bad("cloud", "applies only to the ingest role, which the credential does not have")
			}
		}
		if c.Has(RoleEvents) && c.Organization == "" {
			bad("organization", "is required with the events role")
		}
		if c.User != "" && c.Organization == "" {
			bad("user", `needs "organization"`)
		}
		creds = append(creds, c)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return creds, nil
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
// attacker which prefix matched. Safe for concurrent use; immutable.
type Authenticator struct {
	creds []Credential
}

// NewAuthenticator returns an Authenticator over creds (as
// [ParseCredentials] returns them). Errors: no credential.
func NewAuthenticator(creds []Credential) (*Authenticator, error) {
	if len(creds) == 0 {
		return nil, errors.New("server: no credentials")
	}
	return &Authenticator{creds: slices.Clone(creds)}, nil
}

// Credentials returns a copy of the credentials, hashes only.
func (a *Authenticator) Credentials() []Credential { return slices.Clone(a.creds) }

// Lookup returns the credential whose token is token. It hashes token with
// SHA-256 and compares the hash with every stored hash in constant time.
func (a *Authenticator) Lookup(token string) (Credential, bool) {
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i := range a.creds {
		eq := subtle.ConstantTimeCompare(sum[:], a.creds[i].TokenSHA256[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return Credential{}, false
	}
	return a.creds[found], true
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
