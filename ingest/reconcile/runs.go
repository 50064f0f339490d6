package reconcile

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/internal/page"
)

// RunFilter selects one page of recorded runs (GET /api/v1/sync-runs),
// newest first.
type RunFilter struct {
	// Cloud keeps one cloud's runs; "" keeps every cloud's.
	Cloud string
	// Limit is 1..1000; 0 means 100.
	Limit int
	// Cursor is "" for the first page, else a NextCursor of an earlier page.
	Cursor string
}

// RunPage is one page of recorded runs, newest first.
type RunPage struct {
	Items []ingest.SyncRun `json:"items"`
	// NextCursor continues the listing; nil on the last page.
	NextCursor *string `json:"next_cursor"`
}

// Runs returns one page of the recorded runs f selects. A bad parameter
// (a limit outside 1..1000, a cursor no listing issued, a cloud that is
// not valid UTF-8 or holds NUL) is an [*event.ValidationError] naming each
// (/limit, /cursor, /cloud); otherwise the store's error, wrapped.
func (s *Service) Runs(ctx context.Context, f RunFilter) (RunPage, error) {
	var ps page.Params
	ps.Text("cloud", f.Cloud)
	limit := ps.Limit(f.Limit)
	var before int64
	if f.Cursor != "" {
		var ok bool
		if before, ok = decodeRunCursor(f.Cursor); !ok {
			ps.BadCursor()
		}
	}
	if err := ps.Err(); err != nil {
		return RunPage{}, err
	}
	runs, err := s.store.SyncRuns(ctx, RunQuery{Cloud: f.Cloud, Before: before, Limit: limit + 1})
	if err != nil {
		return RunPage{}, fmt.Errorf("reconcile: list runs: %w", err)
	}
	items, next := page.Paginate(runs, limit, runBytes, func(r ingest.SyncRun) string { return encodeRunCursor(r.ID) })
	return RunPage{Items: items, NextCursor: next}, nil
}

func runBytes(r ingest.SyncRun) int {
	n := page.ItemOverhead + len(r.Cloud) + len(r.Platform)
	for _, e := range r.Errors {
		n += len(e) + 8
	}
	return n
}

func encodeRunCursor(id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("r1." + strconv.FormatInt(id, 10)))
}

func decodeRunCursor(c string) (int64, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, false
	}
	s, ok := strings.CutPrefix(string(b), "r1.")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, false
	}
	return id, true
}
