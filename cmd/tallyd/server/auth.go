package server

import (
	"context"
	"net/http"

	"github.com/tallyhq/tally/internal/problem"
	"github.com/tallyhq/tally/route"
)

type credentialKey struct{}

// logNoteKey carries a *logNote from the request log middleware to the
// authentication middleware inside it, so the request line names the
// credential that made the call (never its token).
type logNoteKey struct{}

type logNote struct{ credential string }

// WithCredential returns a copy of ctx carrying c, as the authentication
// middleware stores it for the handlers behind it.
func WithCredential(ctx context.Context, c Credential) context.Context {
	return context.WithValue(ctx, credentialKey{}, c)
}

// CredentialFrom returns the credential the authentication middleware put in
// ctx, if any.
func CredentialFrom(ctx context.Context) (Credential, bool) {
	c, ok := ctx.Value(credentialKey{}).(Credential)
	return c, ok
}

// require returns middleware that lets a request through only with a
// credential holding one of roles. It runs before anything reads the body
// (docs/decisions.md, Authentication vs body): no or unknown token → 401 with
// WWW-Authenticate: Bearer; a known token without the role → 403.
func require(a *Authenticator, m *Metrics, roles []route.Role, next http.Handler) http.Handler {
	need := route.Route{Roles: roles}.Access()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := a.Authenticate(r)
		if n, has := r.Context().Value(logNoteKey{}).(*logNote); has && ok {
			n.credential = c.Name
		}
		if !ok {
			problem.Write(w, problem.Unauthorized())
			return
		}
		if !c.Has(roles...) {
			problem.Write(w, problem.Forbidden("Credential "+quote(c.Name)+" lacks the role this route needs ("+need+")."))
			return
		}
		if !a.admitRequest(w, m, c) {
			return
		}
		next.ServeHTTP(w, r.WithContext(WithCredential(r.Context(), c)))
	})
}

func quote(s string) string { return `"` + s + `"` }
