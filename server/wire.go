package server

// apiRoutes builds the routes of the library's HTTP adapters.
func apiRoutes(cfg Config) ([]route, error) {
	return nil, nil
}
