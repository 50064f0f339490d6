package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

// docs/decisions.md, Same (event_id, timestamp) stored for another resource:
// each of the three ways Commit inserts (sample probe and COPY, full probe
// and COPY, INSERT … ON CONFLICT after a concurrent batch took a key) tells
// a conflict from a duplicate, against a stored key and within the batch.
func TestCommitConflictEveryMode(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	mk := func(id, cloud string) event.Event {
		raw := fmt.Sprintf(`{"event_id":%q,"timestamp":"2026-03-01T12:00:00Z","event_type":"volume.delete.end","platform":"openstack",`+
			`"cloud":%q,"resource_type":"volume","resource_id":"vol-%s","project_id":"p","payload":{}}`, id, cloud, id)
		ev, err := event.DecodeValidate([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		ev.Source = event.SourceCollector
		return ev
	}
	for mode, name := range []string{"sample probe", "full probe", "on conflict"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := pgtest.DB(t, pgstore.Options{Now: func() time.Time { return t0 }}).Ingest()
			ctx := context.Background()
			if _, err := st.Commit(ctx, ingest.Batch{Events: []event.Event{mk("held", "c2")}}); err != nil {
				t.Fatal(err)
			}
			b := ingest.Batch{Events: []event.Event{mk("held", "c1"), mk("x", "c1"), mk("x", "c3"), mk("held", "c2"), mk("x", "c1")}}
			for _, ev := range b.Events {
				b.Conflicts = append(b.Conflicts, ingest.Conflict{
					DeadLetter: ingest.DeadLetter{RawSize: 1, Raw: []byte("r"), Reason: "conflict: test", EventID: ev.EventID},
					Audit:      ingest.AuditEntry{Action: ingest.ActionConflict, Credential: "c", EventID: ev.EventID, Cloud: ev.Cloud},
				})
			}
			got, err := pgstore.CommitInMode(ctx, st, b, mode)
			if err != nil {
				t.Fatal(err)
			}
			want := ingest.Committed{Inserted: []bool{false, true, false, false, false}, Conflicted: []bool{true, false, true, false, false}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			audit, err := st.Audit(ctx, ingest.AuditQuery{Action: ingest.ActionConflict})
			if err != nil {
				t.Fatal(err)
			}
			var clouds []string
			for _, a := range audit {
				clouds = append(clouds, a.EventID+"/"+a.Cloud)
			}
			if diff := cmp.Diff([]string{"held/c1", "x/c3"}, clouds); diff != "" {
				t.Errorf("audit (-want +got):\n%s", diff)
			}
		})
	}
}
