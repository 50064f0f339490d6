package pgstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/store/pgstore"
)

// TestAttackHostilePayloadsThroughService: a hostile client's payloads
// (escaped duplicate names of the envelope's and of nested members, NUL,
// lone surrogates, wrong types) are refused by the pipeline; those it
// accepts (a Checked batch) are stored byte for byte as MarshalJSON
// writes them, and the events listing and the feed read them back.
func TestAttackHostilePayloadsThroughService(t *testing.T) {
	ctx := context.Background()
	db, conn := openDB(t, pgstore.Options{})
	svc, err := ingest.New(db.Ingest(), ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	payloads := []string{
		`{"state":"active","st\u0061te":"evil","size":{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"}}`,
		`{"st\u0061te":"active","size":{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"}}`,
		`{"state":"active","size":{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"},"\u0073ize":1}`,
		`{"state":"active","size":{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"},"x":1,"\u0078":2}`,
		`{"state":"active","size":{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"},"provider":{"a":"\ud800"}}`,
		`{"state":"active","size":{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"},"provider":{"a":"\u0000"}}`,
		`{"state":"\u0000","size":{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"}}`,
		`{"state":"active","size":{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"},"provider":{"a":1,"a":2}}`,
		`{"state":"active","size":{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"},"zz":{"a":1,"\u0061":2}}`,
		`{"state":"active","size":{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"},"provider":1e999999}`,
		`{"state":"active","size":{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"},"provider":"\u00e9\uD83D\uDE00"}`,
		`{"state":"active","size":{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small","x":"\u0000"}}`,
		"{\"state\":\"active\",\"size\":{\"vcpus\":2,\"ram_gb\":4,\"disk_gb\":20,\"flavor\":\"m1.small\"}, \"w\" : [ 1 , 2 ] }",
	}
	for i, p := range payloads {
		item := []byte(fmt.Sprintf(`{"event_id":"h-%d","timestamp":"2026-11-30T09:00:0%dZ","event_type":"compute.instance.create.end","platform":"openstack","cloud":"east","resource_type":"instance","resource_id":"vm-h","project_id":"p1","payload":%s}`, i, i%10, p))
		res, err := svc.Ingest(ctx, ingest.Caller{}, [][]byte{item})
		if err != nil {
			t.Fatal(err)
		}
		if want := map[int]int{1: 1, 12: 1}[i]; res.Accepted != want {
			t.Errorf("payload %d: %+v, want %d accepted", i, res, want)
		}
		if res.Accepted == 1 {
			ev, err := event.Decode(item)
			if err != nil {
				t.Fatal(err)
			}
			want, err := ev.Payload.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			var got string
			if err := conn.QueryRow(ctx, "SELECT payload::text FROM events WHERE event_id = $1", ev.EventID).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("stored %s, MarshalJSON %s", got, want)
			}
		}
	}
	items, err := db.Ingest().Events(ctx, ingest.EventQuery{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(items) != 2 {
		t.Errorf("%d events listed, want 2", len(items))
	}
	if _, err := db.Ingest().Feed(ctx, ingest.FeedRead{Limit: 100}); err != nil {
		t.Errorf("feed: %v", err)
	}
}
