package route_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"

	"github.com/tallyhq/tally/route"
)

// A program mounts an adapter's routes behind its own authentication: here
// a header names the caller's role, and a route admits any of its Roles.
func ExampleMount() {
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") })
	routes := []route.Route{
		{Method: http.MethodGet, Path: "/hello", Roles: []route.Role{route.RoleRead, route.RoleAdmin}, Handler: hello},
		{Method: http.MethodGet, Path: "/healthz", Handler: hello},
	}
	mux := http.NewServeMux()
	route.Mount(mux, routes, func(rt route.Route) http.Handler {
		fmt.Printf("%s (%s)\n", rt.Pattern(), rt.Access())
		if len(rt.Roles) == 0 {
			return rt.Handler
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !slices.Contains(rt.Roles, route.Role(r.Header.Get("X-Role"))) {
				http.Error(w, "forbidden", http.StatusForbidden)
				return
			}
			rt.Handler.ServeHTTP(w, r)
		})
	})
	for _, role := range []string{"read", "ingest"} {
		r := httptest.NewRequest("GET", "/hello", nil)
		r.Header.Set("X-Role", role)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		fmt.Println(role, w.Code)
	}
	// Output:
	// GET /hello (read or admin)
	// GET /healthz (public)
	// read 200
	// ingest 403
}

func ExampleRoles() {
	for _, r := range route.Roles() {
		fmt.Println(r, r.Valid())
	}
	fmt.Println(route.Role("root").Valid())
	// Output:
	// ingest true
	// read true
	// admin true
	// events true
	// reconcile true
	// false
}
