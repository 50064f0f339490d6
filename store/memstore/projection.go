package memstore

import (
	"github.com/tallyhq/tally/ingest"
)

// projectionData holds the projection of current resources. Guarded by
// Store.mu.
type projectionData struct {
	rows map[ingest.ResourceKey]ingest.Resource
}

func (d *projectionData) init() {
	d.rows = make(map[ingest.ResourceKey]ingest.Resource)
}

func (d *projectionData) current(k ingest.ResourceKey) (ingest.Resource, bool) {
	r, ok := d.rows[k]
	return r, ok
}

// install writes rows computed by ingest.FoldBatch; the caller calls it only
// once the rest of its unit of work has succeeded.
func (d *projectionData) install(rows map[ingest.ResourceKey]ingest.Resource) {
	for k, r := range rows {
		d.rows[k] = r
	}
}
