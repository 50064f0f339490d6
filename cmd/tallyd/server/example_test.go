package server_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/tallyhq/tally/cmd/tallyd/server"
	"github.com/tallyhq/tally/store/memstore"
)

// A program embedding tally mounts the whole API on its own mux, here under
// the in-memory store, with one credential.
func Example() {
	creds, err := server.ParseCredentials([]byte(`{"credentials":[
	  {"name":"app","token":"local-secret-token","roles":["events"],"organization":"acme","user":"ops"}]}`))
	if err != nil {
		panic(err)
	}
	auth, err := server.NewAuthenticator(creds, server.AuthenticatorOptions{})
	if err != nil {
		panic(err)
	}
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		panic(err)
	}
	api, err := server.New(server.Store{Ingest: db.Ingest(), Projection: db.Projection(), Correlate: db.Correlate(), Reconcile: db.Reconcile()}, server.Options{
		Authenticator: auth,
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", api)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for range 2 {
		req, _ := http.NewRequest("POST", srv.URL+"/api/events",
			strings.NewReader(`{"category":"connection","action":"failed","correlationKey":"db-1"}`))
		req.Header.Set("Authorization", "Bearer local-secret-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("Event-Disposition"))
	}
	resp, err := http.Post(srv.URL+"/api/events", "application/json", strings.NewReader(`{}`))
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	// Output:
	// 201 created
	// 200 incremented
	// 401 Bearer realm="tally"
}
