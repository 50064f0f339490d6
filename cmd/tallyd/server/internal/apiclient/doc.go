package apiclient

// The package comment is the one oapi-codegen writes into client.gen.go;
// this file adds none, so the package has exactly one.
//
// The client is what oapi-codegen v2 generates from
// cmd/tallyd/server/openapi.yaml (client.gen.go, do not edit). It exists to
// prove that the document makes a working client: the server's tests ingest
// an event and create a correlated event with it against the live server,
// and check that regenerating gives the same bytes.

//go:generate go tool oapi-codegen -config oapi-codegen.yaml ../../openapi.yaml
