// Package ingest is the lifecycle ingestion pipeline of tally
// (canonical-event.md, sections Size schemas, Size names, Delivery, Rules):
// a batch of raw items goes in; each item is accepted, a duplicate, or
// refused with a reason; the batch lands whole or not at all.
//
// # The pipeline
//
// [Service.Ingest] takes up to [MaxBatch] raw items ([SplitBatch] splits a
// request body), judges each in the order its documentation gives, commits
// the survivors, the dead letters and the audit rows in one [Store.Commit],
// and answers a [Result].
//
// # Refusals and errors
//
// Every refusal reason reads "<kind>: <member>: <rule>: <message>" (several
// problems joined by "; " after the kind), as [Rejection].Reason says; the
// kind is the contract. The read operations refuse bad parameters with
// tally's one validation error, an [*event.ValidationError] matching
// [event.ErrInvalid], listing every bad parameter at once; its members are
// "/" + the parameter's name as the HTTP API spells it (/limit, /cursor,
// /cloud).
//
// # Hostile input and the registry
//
// One item's cost is bounded by its bytes and one item never sinks its
// batch: numbers of a size outside [MaxNumberDigits] and
// [MaxNumberExponent], elements deeper than [event.MaxDepth] and a panic in
// one item's checks refuse that item alone (docs/http-api.md, Hostile
// input). Size schemas are kept per (platform, resource_type) in the store
// ([ResourceType]), compiled with github.com/santhosh-tekuri/jsonschema/v6
// and cached by Version, so a schema put through any process sharing the
// store is in force at the next batch; [Service.PutResourceType] refuses
// one that does not compile or costs too much (docs/http-api.md, Size
// schemas: bounded cost). [Service.DeadLetters], [Service.Audit] and
// [Service.Events] page oldest first with an opaque cursor.
//
// # The projection of current resources
//
// Each [Store.Commit] folds the events it newly stored into the projection
// of current resources in the same transaction, with
// [projection.FoldBatch]; duplicates and refusals never touch it. Package
// [github.com/tallyhq/tally/ingest/projection] holds the fold, the rows'
// store and the service that reads and rebuilds them; a late event's
// replay is counted by [Observer].ProjectionReplays.
//
// # Stores
//
// The package declares the [Store] it needs; the Ingest store that
// store/memstore's and store/pgstore's DB hands out (DB.Ingest) implements
// it, and both pass the suite in store/storetest. The HTTP
// routes are in [github.com/tallyhq/tally/ingest/ingesthttp].
package ingest
