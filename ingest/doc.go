// Package ingest is the lifecycle ingestion pipeline of tally
// (canonical-event.md, sections Size schemas, Size names, Delivery, Rules):
// a batch of raw items goes in; each item is accepted, a duplicate, or
// refused with a reason; the batch lands whole or not at all.
//
// # The pipeline
//
// [Service.Ingest] takes up to [MaxBatch] raw items and judges each, in this
// order: strict decoding and validation ([event.Decode], [event.Validate];
// refusal "schema: …"), the caller's scope (refusal "scope: …", an audit
// row, no dead letter), size names ([sizenames.Resolve], with
// payload.provider.size_as_reported recording what was replaced), the size
// schema of its (platform, resource_type) (refusal "size_schema: …"), and the
// stored source (the caller's pipeline). It then commits the survivors, the
// dead letters and the audit rows in one [Store.Commit], and answers a
// [Result]. [SplitBatch] turns a request body into raw items without
// decoding them.
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
// # Hostile input
//
// One item's cost is bounded by its bytes and one item never sinks its
// batch (the hostile-input rules): every number of a size must lie in the range the
// validator judges, at most [MaxNumberDigits] digits and an exponent of at
// most [MaxNumberExponent] either way (refusal "size_schema: <pointer>: numberRange: …"
// per item; a size schema with such a number is refused naming the
// keyword); an element nested deeper than [event.MaxDepth] is refused as its
// item ([SplitBatch] counts depth without a limit); a panic inside one
// item's checks refuses that item, naming the stage, and is logged with its
// stack. payload.size (apart from the values size names replace),
// payload.provider and the unknown payload members are stored byte for byte
// as sent.
//
// # The size-schema registry
//
// Size schemas are JSON Schema documents kept per (platform, resource_type)
// in the store ([ResourceType]); five are seeded ([SeedResourceTypes]). They
// are compiled with github.com/santhosh-tekuri/jsonschema/v6, format
// assertions on and external references refused ([CompileSizeSchema]), and
// cached by pair and Version: each batch reads the row of each pair it meets
// once and recompiles only when the Version changed, so a schema put through
// any process sharing the store is in force at the next batch.
// [Service.PutResourceType] refuses a document that does not compile with an
// [*event.ValidationError] naming each offending keyword by its JSON Pointer.
//
// # Reading back
//
// [Service.DeadLetters] and [Service.Audit] page oldest first with an opaque
// cursor ([EncodeCursor]); [Service.ResourceTypes] and [Service.ResourceType]
// read the registry.
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
