package pgstore_test

import (
	"testing"

	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/storetest"
)

func TestProjectionConformance(t *testing.T) {
	storetest.RunProjection(t, func(t *testing.T) storetest.IngestStore { return pgtest.Store(t) })
}

func TestWindowsConformance(t *testing.T) {
	storetest.RunWindows(t, func(t *testing.T) storetest.IngestStore { return pgtest.Store(t) })
}
