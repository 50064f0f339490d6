// Package route is the shape in which tally's HTTP adapters
// ([github.com/tallyhq/tally/ingest/ingesthttp] and
// [github.com/tallyhq/tally/correlate/correlatehttp]) expose their routes:
// as data, written once, that a server mounts behind its own
// authentication (one adapter shape, one route table).
//
// Each adapter's Handler.Routes returns its [Route] values: the method, the
// net/http ServeMux path pattern, the [Role] values any one of which admits
// a caller, and the handler. tallyd's server (cmd/tallyd/server) mounts
// exactly these, and its package documentation, its OpenAPI contract test
// and the README's HTTP API table are checked against them by tests.
//
// A program that embeds tally mounts the routes on its own mux with
// [Mount], wrapping each handler with its authentication, which must run
// before the body is read (docs/decisions.md, Authentication vs body) and put
// the caller where the adapter's Options.CallerFrom finds it:
//
//	route.Mount(mux, h.Routes(), func(rt route.Route) http.Handler {
//		return myAuth(rt.Roles, rt.Handler)
//	})
package route

import (
	"context"
	"net/http"
	"slices"
	"strings"
)

// DefaultMaxBodyBytes is the request body cap of both adapters and of
// tallyd's server when none is configured: 8 MiB, counted as sent and as
// decoded. A larger body is answered 413.
const DefaultMaxBodyBytes = 8 << 20

// Role is what a credential may do: the access class of a route. The set
// is closed; see [Roles].
type Role string

// The roles. tallyd's credentials file names them in "roles".
const (
	// RoleIngest may post canonical events (POST /api/v1/events), within
	// the credential's (platform, cloud) scope.
	RoleIngest Role = "ingest"
	// RoleRead may read the size-schema registry and the projection, and
	// list the correlated events of its whole organization, every user's
	// (docs/decisions.md, Who reads correlated events).
	RoleRead Role = "read"
	// RoleAdmin may read dead letters and the audit log, read and put size
	// schemas, and read the projection.
	RoleAdmin Role = "admin"
	// RoleEvents may create, list, mark and delete the correlated events
	// of its own (organization, user).
	RoleEvents Role = "events"
	// RoleReconcile may post a reconciliation run's observation (POST
	// /api/v1/clouds/{cloud}/sync), within the credential's (platform,
	// cloud) scope, as RoleIngest.
	RoleReconcile Role = "reconcile"
)

// Roles lists every [Role].
func Roles() []Role { return []Role{RoleIngest, RoleRead, RoleAdmin, RoleEvents, RoleReconcile} }

// Valid reports whether r is one of [Roles].
func (r Role) Valid() bool { return slices.Contains(Roles(), r) }

// Route is one route of an adapter.
type Route struct {
	// Method is the HTTP method: GET, POST, PUT or DELETE. A GET route
	// also answers HEAD (net/http.ServeMux).
	Method string
	// Path is the net/http.ServeMux path pattern, such as
	// "/api/v1/resources/{cloud}/{resource_type}/{resource_id}"; each
	// {name} is read with Request.PathValue.
	Path string
	// Roles admit a caller holding any one of them; empty means public.
	Roles []Role
	// Handler serves the route. It reads the caller with the adapter's
	// Options.CallerFrom, so the authentication that wraps it must have
	// run first.
	Handler http.Handler
}

// Pattern is the ServeMux pattern of r: "METHOD path", as registered and as
// reported in Request.Pattern (and so in tallyd's logs and metrics).
func (r Route) Pattern() string { return r.Method + " " + r.Path }

// Access is r's roles as a person reads them: "ingest", "read or admin",
// or "public" for none. tallyd's package documentation and the README's
// HTTP API table write them so.
func (r Route) Access() string {
	if len(r.Roles) == 0 {
		return "public"
	}
	names := make([]string, len(r.Roles))
	for i, role := range r.Roles {
		names[i] = string(role)
	}
	return strings.Join(names, " or ")
}

// Mount registers every route on mux under its [Route.Pattern], serving
// the handler wrap returns for it. wrap must authenticate before the body
// is read; it may return rt.Handler unchanged to mount a route unguarded.
// Mount panics, as ServeMux.Handle does, on a pattern registered twice.
func Mount(mux *http.ServeMux, routes []Route, wrap func(rt Route) http.Handler) {
	for _, rt := range routes {
		mux.Handle(rt.Pattern(), wrap(rt))
	}
}

// Subscribers admits and counts the subscribers of the routes that stream
// (the Server-Sent Events of the change feeds); the server backs it with
// its subscriber limit and its metrics. feed names the stream:
// "lifecycle" or "correlated". Implementations must be safe for concurrent
// use.
type Subscribers interface {
	// Admit is called before a stream starts: false refuses it (503
	// busy); true must be paired with one Leave. The stream ends when stop
	// is done (a server shutting down); stop is watched with
	// context.AfterFunc, so that a stream costs no goroutine for it.
	Admit(feed string) (stop context.Context, ok bool)
	// Leave is called when an admitted stream ends; reset is true when it
	// ended because its subscriber read too slowly.
	Leave(feed string, reset bool)
	// Delivered counts n items sent to a subscriber.
	Delivered(feed string, n int)
}
