// Package server assembles tally's HTTP API: the ingestion routes
// ([github.com/tallyhq/tally/ingest/ingesthttp]), the correlation routes
// ([github.com/tallyhq/tally/correlate/correlatehttp]), bearer
// authentication by role, CORS, Prometheus metrics, health probes and the
// OpenAPI document, on one [http.Handler]. cmd/tallyd serves it; a Go
// program embedding tally mounts the same handler on its own mux.
//
// # Routes and roles
//
// The adapters list their routes with the roles that may call each
// (ingesthttp.Handler.Routes, correlatehttp.Handler.Routes); the server
// mounts exactly those, behind [Authenticator], then its public routes. A
// test checks this list against [Handler.Routes] (as it checks the README's
// table and the roles openapi.yaml states):
//
//	POST   /api/v1/events                                           ingest
//	GET    /api/v1/events                                           read or admin
//	GET    /api/v1/events/feed                                      read or admin
//	GET    /api/v1/rejected-events                                  admin
//	GET    /api/v1/audit                                            admin
//	GET    /api/v1/resource-types                                   read or admin
//	GET    /api/v1/resource-types/{platform}/{resource_type}        read or admin
//	PUT    /api/v1/resource-types/{platform}/{resource_type}        admin
//	GET    /api/v1/resources                                        read or admin
//	GET    /api/v1/resources/{cloud}/{resource_type}/{resource_id}  read or admin
//	GET    /api/v1/resources/{cloud}/{resource_type}/{resource_id}/events  read or admin
//	GET    /api/v1/resources/{cloud}/{resource_type}/{resource_id}/lifecycle read or admin
//	GET    /api/v1/projects/{cloud}/{project_id}/summary            read or admin
//	GET    /api/v1/usage                                            read or admin
//	POST   /api/v1/clouds/{cloud}/sync                              reconcile
//	GET    /api/v1/sync-runs                                        read or admin
//	POST   /api/events                                              events
//	GET    /api/events/list                                         events or read
//	PUT    /api/events/{id}/status                                  events
//	DELETE /api/events/{id}                                         events
//	PUT    /api/events/status                                       events
//	POST   /api/events/delete                                       events
//	DELETE /api/events                                              events
//	GET    /api/events/types                                        events or read
//	GET    /api/events/summary                                      events or read
//	GET    /api/events                                              events or read
//	GET    /api/events/feed                                         events or read
//	GET    /api/events/subscribe                                    events or read
//	GET    /metrics                                                 public
//	GET    /healthz                                                 public
//	GET    /readyz                                                  public
//	GET    /openapi.yaml                                            public
//
// [OpenAPI] documents every route; a test checks it against the live
// handlers on both stores.
//
// # Credentials
//
// [ParseCredentials] reads the credentials file strictly; an
// [Authenticator] keeps only the SHA-256 of each token and compares a
// presented token's hash with every stored hash in constant time. A request
// to a protected route is authenticated before anything reads its body
// (docs/decisions.md, Authentication vs body): no or unknown token is 401 with
// WWW-Authenticate: Bearer, a token without the route's role 403. A body
// whose Content-Type is not JSON is answered 415 before it is read. An ingest
// credential's (platform, cloud) is the caller's scope for
// canonical-event.md's scope rule. An events credential's organization and
// user are the scope of correlated events (event-correlation.md, Scope and
// invariant): it creates, lists and changes its own; a read credential lists
// every event of its organization (docs/decisions.md, Who reads correlated
// events), and one without an organization is answered 403. An events
// credential without a user never correlates, and [New] warns about
// it.
//
// # Metrics
//
// [Metrics] registers on a private registry: the spec's
// tally_ingest_unvalidated_size_total{platform,resource_type},
// tally_ingest_events_ingested_total, tally_ingest_events_duplicate_total,
// tally_ingest_events_rejected_total{reason} (schema, size_schema, scope),
// tally_correlate_dispositions_total{disposition},
// tally_projection_replays_total{cloud} and
// tally_http_request_duration_seconds{route,code}, with route the mux
// pattern. [Metrics.IngestObserver] and [Metrics.CorrelateObserver] are the
// observers the server gives the ingest and correlate services.
//
// The series Tally's published alert rules query (the existing-clients rules) are served too,
// under their names there: tally_events_ingested_total{cloud,source},
// tally_events_rejected_total{cloud,reason} (cloud: the scope of the
// sending credential) and the gauge
// tally_current_resources{platform,cloud,resource_type,state}, the rows of
// the projection as [Metrics.RefreshResources] last counted them
// ([Metrics.RunResourcesRefresh] does it on an interval; tallyd every
// --metrics-refresh-interval, default [DefaultResourcesRefreshInterval]).
package server
