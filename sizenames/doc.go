// Package sizenames replaces provider ids in payload.size by names
// (canonical-event.md, Size names).
//
// A size member can arrive under an id where the platform's listing reports
// a name (Cinder sends a volume type's id; its listing reports the type's
// name). The names are [Row] values of (cloud, resource_type, member, value,
// name). [Resolve] applies the rows of one (cloud, resource_type) to one size
// object: only a string equal to a row's value under that row's member is
// replaced; everything else stays exactly as it arrived. The ingestion
// pipeline ([github.com/tallyhq/tally/ingest]) calls it for every item that
// carries a size, after the scope check and before the size schema.
//
// [ReplaceCloud] is what a reconciliation run calls: it checks the rows and
// replaces every row of one cloud in one transaction of the [Store].
package sizenames
