package ingest

import (
	"time"

	"github.com/tallyhq/tally/sizenames"
)

// SyncStatus is how a reconciliation run ended (package ingest/reconcile).
type SyncStatus string

// The values of [SyncStatus]. Only [SyncCompleted] and [SyncPartial] runs
// are recorded: a failed or invalid run wrote nothing, and is only counted.
const (
	// SyncCompleted: every synthetic event of the run was stored (or was
	// stored already). The value is Tally's: its alert rules select
	// tally_sync_runs_total{status="completed"}.
	SyncCompleted SyncStatus = "completed"
	// SyncPartial: some synthetic events were refused (dead-lettered) and
	// the rest stored.
	SyncPartial SyncStatus = "partial"
	// SyncFailed: the store or the pipeline failed; nothing was written.
	SyncFailed SyncStatus = "failed"
	// SyncInvalid: the observation broke a rule; nothing was written.
	SyncInvalid SyncStatus = "invalid"
)

// SyncStatuses lists every [SyncStatus].
func SyncStatuses() []SyncStatus {
	return []SyncStatus{SyncCompleted, SyncPartial, SyncFailed, SyncInvalid}
}

// MaxSyncErrors bounds [SyncRun].Errors: the first refusal reasons of a run
// are kept, and Refused counts them all.
const MaxSyncErrors = 100

// SyncRun is the record of one reconciliation run (canonical-event.md,
// Sources and categories: "a server-side sync run"), written by
// [Store.Commit] in the transaction of the run's synthetic events.
type SyncRun struct {
	// ID is assigned by the store, increasing; 0 before Commit.
	ID int64 `json:"run_id"`
	// Cloud and Platform are the observation's.
	Cloud    string `json:"cloud"`
	Platform string `json:"platform"`
	// ObservedAt is when the platform was listed; StartedAt and FinishedAt
	// bound the run on the server's clock (FinishedAt is taken just before
	// the commit). All UTC, microseconds.
	ObservedAt time.Time  `json:"observed_at"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt time.Time  `json:"finished_at"`
	Status     SyncStatus `json:"status"`
	// The counts per action: resources given a sync.create, sync.update or
	// sync.delete that the pipeline did not refuse; observed resources equal
	// to their projection row; resources left alone because their history
	// has an event later than ObservedAt; and synthetic events refused.
	Created   int `json:"created"`
	Updated   int `json:"updated"`
	Deleted   int `json:"deleted"`
	Unchanged int `json:"unchanged"`
	Skipped   int `json:"skipped"`
	Refused   int `json:"refused"`
	// Errors holds the reasons of the refused events ("<event_id>: <reason>"),
	// at most [MaxSyncErrors]; never nil once recorded.
	Errors []string `json:"errors"`
}

// SizeNameSet is the complete list of one cloud's size-name rows that a
// reconciliation run writes (canonical-event.md, Size names: "every run of
// a cloud whose adapter lists names replaces that cloud's rows with the
// list in one transaction"). Every row's Cloud is Cloud.
type SizeNameSet struct {
	Cloud string
	Rows  []sizenames.Row
}
