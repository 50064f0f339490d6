package memstore_test

import (
	"testing"

	"github.com/tallyhq/tally/store/memstore"
	"github.com/tallyhq/tally/store/storetest"
)

func TestProjectionConformance(t *testing.T) {
	storetest.RunProjection(t, func(t *testing.T) storetest.IngestStore {
		return memstore.New(memstore.Options{})
	})
}

func TestWindowsConformance(t *testing.T) {
	storetest.RunWindows(t, func(t *testing.T) storetest.IngestStore { return memstore.New(memstore.Options{}) })
}
