// Package projection is the projection of current resources of tally: one
// [Resource] row per (cloud, resource_type, resource_id), derived from the
// stored events and rebuildable from them (canonical-event.md, Event: "The
// events table is the system's single source of truth; everything else is
// derived from it and rebuildable").
//
// # The fold
//
// Each ingest.Store.Commit folds the events it newly stored into the rows,
// inside the same transaction ([FoldBatch]); duplicates and refusals never
// touch them. The fold ([Apply], [Fold]):
//
//   - every event sets platform and project_id (the owner at or after the
//     event) and the last_event_* members;
//   - a create sets created_at, clears deleted_at, and applies payload.state
//     and payload.size;
//   - an update applies payload.state and payload.size as it carries them
//     (absent size means unchanged), unless the resource is deleted: only a
//     create revives a deleted resource;
//   - a delete sets deleted_at and forces state "deleted", keeping the size.
//
// The row is what folding the resource's whole history in [Compare] order
// gives, whatever order the events arrived in: by timestamp, then create <
// update < delete for equal timestamps, then event_id. A late event (older
// than the row's last event) replays the resource's history, counted by
// ingest.Observer.ProjectionReplays.
//
// # Reading and rebuilding
//
// [New] returns the [Service] over a [Store] (DB.Projection of
// store/memstore and store/pgstore; both pass store/storetest):
// [Service.List] pages the rows, [Service.Get] reads one with the start of
// its history, [Service.Count] counts them and [Service.Rebuild] recomputes
// them from the events in bounded transactions. The HTTP routes are in
// github.com/tallyhq/tally/ingest/ingesthttp; docs/http-api.md describes
// the answers and their byte budgets.
package projection
