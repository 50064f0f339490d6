package memstore

// ingestData holds this area's tables. Guarded by Store.mu.
type ingestData struct{}

func (d *ingestData) init() {}
