// Package sizenames replaces provider ids in payload.size by names
// (canonical-event.md, Size names).
package sizenames
