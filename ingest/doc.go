// Package ingest is the lifecycle ingestion pipeline of tally
// (canonical-event.md, sections Size schemas, Size names, Delivery, Rules).
package ingest
