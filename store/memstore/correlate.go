package memstore

// correlationData holds this area's tables. Guarded by Store.mu.
type correlationData struct{}

func (d *correlationData) init() {}
