// Command embedded runs tally's lifecycle ingestion in-process, on the
// in-memory store, with no HTTP: it ingests one batch of canonical events,
// prints the result, then the projection of current resources it produced.
//
//	go run ./examples/embedded
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/store/memstore"
)

// batch holds a volume's create and attach, the attach sent twice (a
// duplicate), an update with no state (refused by the rules, and
// dead-lettered), and an instance create.
var batch = [][]byte{
	[]byte(`{"event_id":"e1","timestamp":"2026-03-01T12:00:00Z","event_type":"volume.create.end","platform":"openstack","cloud":"os-demo","resource_type":"volume","resource_id":"vol-1","project_id":"p1","payload":{"state":"available","size":{"size_gb":100,"type":"ssd"}}}`),
	[]byte(`{"event_id":"e2","timestamp":"2026-03-01T12:05:00Z","event_type":"volume.attach.end","platform":"openstack","cloud":"os-demo","resource_type":"volume","resource_id":"vol-1","project_id":"p1","payload":{"state":"in-use"}}`),
	[]byte(`{"event_id":"e2","timestamp":"2026-03-01T12:05:00Z","event_type":"volume.attach.end","platform":"openstack","cloud":"os-demo","resource_type":"volume","resource_id":"vol-1","project_id":"p1","payload":{"state":"in-use"}}`),
	[]byte(`{"event_id":"e3","timestamp":"2026-03-01T12:06:00Z","event_type":"volume.update","platform":"openstack","cloud":"os-demo","resource_type":"volume","resource_id":"vol-1","project_id":"p1","payload":{}}`),
	[]byte(`{"event_id":"e4","timestamp":"2026-03-01T12:07:00Z","event_type":"compute.instance.create.end","platform":"openstack","cloud":"os-demo","resource_type":"instance","resource_id":"vm-1","project_id":"p1","payload":{"state":"active","size":{"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"}}}`),
}

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "embedded:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer) error {
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		return err
	}
	svc, err := ingest.New(db.Ingest(), ingest.Options{})
	if err != nil {
		return err
	}
	res, err := svc.Ingest(ctx, ingest.Caller{Credential: "embedded"}, batch)
	if err != nil {
		return err
	}
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "result: %s\n", b)
	proj, err := projection.New(db.Projection(), svc)
	if err != nil {
		return err
	}
	page, err := proj.List(ctx, projection.Filter{}) // the first page: 100 rows at most
	if err != nil {
		return err
	}
	for _, r := range page.Items {
		fmt.Fprintf(out, "resource %s/%s: state %s, size %s, project %s\n", r.ResourceType, r.ResourceID, r.State, r.Size, r.ProjectID)
	}
	return nil
}
