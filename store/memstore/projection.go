package memstore

// projectionData holds this area's tables. Guarded by Store.mu.
type projectionData struct{}

func (d *projectionData) init() {}
