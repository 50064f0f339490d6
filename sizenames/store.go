package sizenames

import "context"

// Row is one row of the size_names table (canonical-event.md, Size names):
// in the size of a (Cloud, ResourceType) event, a Member holding the string
// Value is replaced by Name. The primary key is (Cloud, ResourceType, Member,
// Value).
type Row struct {
	Cloud        string `json:"cloud"`
	ResourceType string `json:"resource_type"`
	Member       string `json:"member"`
	Value        string `json:"value"`
	Name         string `json:"name"`
}

// Store is what this package reads and writes. The SizeNames store that
// store/memstore's and store/pgstore's DB hands out (DB.SizeNames)
// implements it.
type Store interface {
	// SizeNames returns the rows of one (cloud, resourceType), in any order;
	// none is not an error.
	SizeNames(ctx context.Context, cloud, resourceType string) ([]Row, error)
	// ReplaceSizeNames replaces every row of cloud by rows, in one
	// transaction: afterwards the cloud has exactly rows. Every row's Cloud
	// equals cloud (callers check; see ReplaceCloud).
	ReplaceSizeNames(ctx context.Context, cloud string, rows []Row) error
}
