package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/store/memstore"
)

func costItem(i int, size string) []byte {
	return []byte(fmt.Sprintf(`{"event_id":"e%d","timestamp":"2026-03-01T12:00:00Z","event_type":"compute.instance.create.end","platform":"openstack","cloud":"c","resource_type":"instance","resource_id":"r%d","project_id":"p","payload":{"state":"active","size":%s}}`, i, i, size))
}

func costService(t *testing.T) *ingest.Service {
	t.Helper()
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := ingest.New(db.Ingest(), ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// A refused size is remembered like an accepted one: a batch of 1000 equal
// refused sizes validates the size once, and so does the next batch; each
// item is still refused with the same reason.
func TestRefusedSizeValidatedOnce(t *testing.T) {
	svc := costService(t)
	const bad = `{"vcpus":0,"ram_gb":"4","disk_gb":-1}`
	items := make([][]byte, 1000)
	for i := range items {
		items[i] = costItem(i, bad)
	}
	for batch := range 2 {
		res, err := svc.Ingest(context.Background(), ingest.Caller{}, items)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Rejected) != len(items) {
			t.Fatalf("batch %d: %d rejected, want %d", batch, len(res.Rejected), len(items))
		}
		reasons := map[string]int{}
		for _, r := range res.Rejected {
			reasons[r.Reason]++
		}
		if len(reasons) != 1 {
			t.Errorf("batch %d: %d different reasons, want one: %v", batch, len(reasons), reasons)
		}
	}
	if diff := cmp.Diff(int64(1), ingest.SizeValidations(svc)); diff != "" {
		t.Errorf("size validations (-want +got):\n%s", diff)
	}
}

// A batch whose client is gone (its context cancelled) stops before the
// next item and stores nothing.
func TestCancelledBatchStops(t *testing.T) {
	svc := costService(t)
	items := make([][]byte, 100)
	for i := range items {
		items[i] = costItem(i, fmt.Sprintf(`{"vcpus":%d,"ram_gb":"4"}`, i+1))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := svc.Ingest(ctx, ingest.Caller{}, items)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Ingest: %v, want context.Canceled", err)
	}
	if n := ingest.SizeValidations(svc); n != 0 {
		t.Errorf("%d sizes validated after cancellation, want 0", n)
	}
	if !strings.Contains(err.Error(), "item 0") {
		t.Errorf("error %q does not name where it stopped", err)
	}
}

// A size's string of format "regex" is judged only up to MaxRegexLength
// bytes: a longer one is refused (rule format) instead of compiled.
func TestSizeFormatRegexBounded(t *testing.T) {
	svc := costService(t)
	ctx := context.Background()
	if _, err := svc.PutResourceType(ctx, "openstack", "instance", jsontext.Value(`{"type":"object","properties":{"re":{"type":"string","format":"regex"}}}`)); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("(a|b)*", 8192/6)
	tests := []struct {
		name, re string
		refused  bool
	}{
		{"short", `^[a-z]+(\\.[0-9]+)?$`, false},
		{"at the bound", strings.Repeat("a", ingest.MaxRegexLength), false},
		{"8 KB", long, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := svc.Ingest(ctx, ingest.Caller{}, [][]byte{costItem(i, `{"re":"`+tt.re+`"}`)})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.refused, len(res.Rejected) == 1); diff != "" {
				t.Fatalf("refused (-want +got):\n%s\n%+v", diff, res)
			}
			if tt.refused && !strings.Contains(res.Rejected[0].Reason, "/payload/size/re: format: ") {
				t.Errorf("reason %q, want it to name /payload/size/re and rule format", res.Rejected[0].Reason)
			}
		})
	}
}

// A schema stored before the bounds on evaluation cost (written to the
// store directly, as an older server could) refuses its pair's sizes, each
// item a rejection naming the rule, rather than failing the batch.
func TestStoredSchemaOverBoundsRefusesItems(t *testing.T) {
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := db.Ingest()
	ctx := context.Background()
	if _, err := st.PutResourceType(ctx, ingest.ResourceType{Platform: "openstack", ResourceType: "instance", SizeSchema: jsontext.Value(`{"$ref":"#"}`)}); err != nil {
		t.Fatal(err)
	}
	svc, err := ingest.New(st, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := svc.Ingest(ctx, ingest.Caller{}, [][]byte{costItem(0, `{"vcpus":1}`), costItem(1, `{"vcpus":2}`)})
	if err != nil {
		t.Fatalf("Ingest: %v, want the items refused", err)
	}
	if len(res.Rejected) != 2 {
		t.Fatalf("%+v, want both refused", res)
	}
	for _, r := range res.Rejected {
		if !strings.HasPrefix(r.Reason, "size_schema: /payload/size: schema: the registered size schema of (openstack, instance)") {
			t.Errorf("reason %q does not name the member, rule and schema", r.Reason)
		}
	}
}

// cancelOnLookup cancels a context when the service reads a registry row.
type cancelOnLookup struct {
	*memstore.Ingest
	cancel context.CancelFunc
}

func (c cancelOnLookup) ResourceType(ctx context.Context, platform, resourceType string) (ingest.ResourceType, error) {
	c.cancel()
	return c.Ingest.ResourceType(context.WithoutCancel(ctx), platform, resourceType)
}

// A batch whose client goes away mid-way stops at the next item: the
// remaining sizes (all of one pair, whose schema and size names the run
// already holds) are not validated.
func TestBatchStopsWhenCancelledMidway(t *testing.T) {
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc, err := ingest.New(cancelOnLookup{db.Ingest(), cancel}, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	items := make([][]byte, 100)
	for i := range items {
		items[i] = costItem(i, fmt.Sprintf(`{"vcpus":%d,"ram_gb":4,"flavor":"m1"}`, i+1))
	}
	_, err = svc.Ingest(ctx, ingest.Caller{}, items)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "item 1") {
		t.Fatalf("Ingest: %v, want context.Canceled at item 1", err)
	}
	if diff := cmp.Diff(int64(1), ingest.SizeValidations(svc)); diff != "" {
		t.Errorf("size validations (-want +got):\n%s", diff)
	}
}
