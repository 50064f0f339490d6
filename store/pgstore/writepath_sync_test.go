package pgstore_test

import (
	"context"
	"testing"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/sizenames"
	"github.com/tallyhq/tally/store/pgstore"
)

// TestAttackSyncRewrittenProvider: the pipeline's own rewrite of a Checked
// batch's size and provider (size names, provider.size_as_reported) over
// a provider that already names size_as_reported, plainly, escaped or
// nested, stores payloads MarshalJSON accepts, and the listing and the
// feed read them back.
func TestAttackSyncRewrittenProvider(t *testing.T) {
	ctx := context.Background()
	db, _ := openDB(t, pgstore.Options{})
	svc, err := ingest.New(db.Ingest(), ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, prov := range []string{`{"size_as_reported":{"x":1}}`, `{"size_as_reported":1,"a":2}`, `{"a":{"size_as_reported":1}}`, `{"size_as_report\u0065d":{"flavor":"zzz"}}`} {
		name := "named"
		item := []byte(`{"event_id":"s-` + string(rune('a'+i)) + `",`)
		item = append(item, `"timestamp":"2026-11-30T09:00:00Z","event_type":"compute.instance.create.end","platform":"openstack","cloud":"east","resource_type":"instance","resource_id":"vm-s","project_id":"p1","payload":{"state":"active","provider":`+prov+`,"size":{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"}}}`...)
		_ = []byte(`{"event_id":"s-1","timestamp":"2026-11-30T09:00:00Z","event_type":"compute.instance.create.end","platform":"openstack","cloud":"east","resource_type":"instance","resource_id":"vm-s","project_id":"p1","payload":{"state":"active","size":{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"}}}`)
		res, id, err := svc.Sync(ctx, ingest.Caller{Source: "reconciliation"}, [][]byte{item}, ingest.SyncWrite{SizeNames: &ingest.SizeNameSet{Cloud: "east", Rows: []sizenames.Row{{Cloud: "east", ResourceType: "instance", Member: "flavor", Value: "m1.small", Name: name}}}})
		if err != nil || res.Accepted != 1 {
			t.Fatalf("%s: %+v %d %v", prov, res, id, err)
		}
		items, err := db.Ingest().Events(ctx, ingest.EventQuery{})
		if err != nil || len(items) != i+1 {
			t.Fatalf("%s: list %d %v", prov, len(items), err)
		}
		for _, it := range items {
			if _, err := it.Event.Payload.MarshalJSON(); err != nil {
				t.Errorf("%s: %v", it.Event.EventID, err)
			}
		}
		if _, err := db.Ingest().Feed(ctx, ingest.FeedRead{Limit: 10}); err != nil {
			t.Errorf("feed: %v", err)
		}
	}
}
