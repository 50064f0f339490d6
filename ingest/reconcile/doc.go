// Package reconcile is the server-side sync run of canonical-event.md
// (Sources and categories: "a synthetic event a server-side sync run emits
// to correct drift between a platform and the projection"): it turns what a
// reconciler observed of one cloud into sync.create, sync.update and
// sync.delete events, fed through the ordinary ingest pipeline, and writes
// the cloud's size names (canonical-event.md, Size names: "every run of a
// cloud whose adapter lists names replaces that cloud's rows with the list
// in one transaction").
//
// # A run
//
// [Service.Run] takes an [Observation] of one cloud: the resources listed,
// the resource types listed completely, the deletes the platform dated, and
// optionally the cloud's size names. Holding the cloud's turn
// ([Store.Exclusive]), it reads the cloud's projection rows, compares each
// observed resource with its row, and emits:
//
//   - sync.create for a resource the projection does not hold, or holds as
//     deleted;
//   - sync.update, carrying the observed state, size and project, for an
//     alive resource whose state, size (after size names, exact JSON) or
//     project differs;
//   - sync.delete for an alive row of a completely listed type that the
//     observation does not name, dated by the platform's deleted_at where
//     given, else observed_at; a type not listed as complete never yields
//     a delete.
//
// A resource whose projection row has an event later than observed_at is
// left alone and counted skipped (docs/decisions.md, A sync run and newer
// collector events). Each synthetic event has source reconciliation and
// the deterministic event id of canonical-event.md, Rules
// ([event.DeterministicID] of its type and timestamp), so an identical run
// stores nothing new. The events, the size names and the run's record
// ([ingest.SyncRun]) are committed in one transaction by
// [ingest.Service.Sync]; refused events are dead-lettered as any item is,
// and reported in the run.
//
// # Stores
//
// [Store] is implemented by the Reconcile stores of store/memstore and
// store/pgstore; store/storetest holds the suite both pass, including the
// table of drift cases. docs/reconciliation.md is the operator's manual.
package reconcile
