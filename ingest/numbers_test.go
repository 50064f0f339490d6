package ingest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/sizenames"
	"github.com/tallyhq/tally/store/memstore"
)

// instanceItem is a create of an openstack instance whose size holds the
// given members (the seeded schema requires vcpus, ram_gb, disk_gb, flavor).
func instanceItem(id, size string) []byte {
	return []byte(`{"event_id":"` + id + `","timestamp":"2026-03-01T12:00:00Z","event_type":"compute.instance.create.end",` +
		`"platform":"openstack","cloud":"c","resource_type":"instance","resource_id":"r-` + id + `","project_id":"p",` +
		`"payload":{"state":"active","size":{` + size + `}}}`)
}

const okSize = `"vcpus":2,"ram_gb":4,"flavor":"m1"`

// docs/decisions.md, Numbers the validator cannot judge: "validation cost is
// bounded by the item's bytes; a size number outside the documented range is
// refused per item (size_schema:); never a 5xx." Each hostile item is
// refused as itself, naming the member and the rule; its sibling is stored.
func TestSizeNumbersOutsideTheRangeAreRefusedPerItem(t *testing.T) {
	rangeMsg := fmt.Sprintf("numberRange: must be a number of at most %d digits with an exponent from -%d to %d", ingest.MaxNumberDigits, ingest.MaxNumberExponent, ingest.MaxNumberExponent)
	tests := []struct {
		name, disk, want string
	}{
		{"huge exponent (math/big refuses it: upstream #77, #248)", `1e1000001`, "size_schema: /payload/size/disk_gb: " + rangeMsg},
		{"huge negative number", `-1e1000001`, "size_schema: /payload/size/disk_gb: " + rangeMsg},
		{"tiny number", `1e-1000001`, "size_schema: /payload/size/disk_gb: " + rangeMsg},
		{"costly exponent", `1e999999`, "size_schema: /payload/size/disk_gb: " + rangeMsg},
		{"exponent just past the range", `1E+401`, "size_schema: /payload/size/disk_gb: " + rangeMsg},
		{"too many digits", strings.Repeat("1", ingest.MaxNumberDigits+1), "size_schema: /payload/size/disk_gb: " + rangeMsg},
		{"nested in an array", `[1e1000001, 2]`, "size_schema: /payload/size/disk_gb/0: " + rangeMsg},
		{"the largest exponent in range is judged by the schema", `-1e400`, "size_schema: /payload/size/disk_gb: minimum: " + ("must be at least 0, is -1" + strings.Repeat("0", 400))[:200] + "…"},
		{"many digits in range are judged", "0." + strings.Repeat("0", ingest.MaxNumberDigits-2) + "1", ""},
		{"exponent with leading zeros in range", `1e-0000400`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc, err := ingest.New(memIngest(t), ingest.Options{})
			if err != nil {
				t.Fatal(err)
			}
			items := [][]byte{instanceItem("bad", okSize+`,"disk_gb":`+tt.disk), instanceItem("good", okSize+`,"disk_gb":10`)}
			res, err := svc.Ingest(context.Background(), ingest.Caller{}, items)
			if err != nil {
				t.Fatal(err)
			}
			want := ingest.Result{Accepted: 2, Rejected: []ingest.Rejection{}}
			if tt.want != "" {
				want = ingest.Result{Accepted: 1, Rejected: []ingest.Rejection{{Index: 0, EventID: "bad", Reason: tt.want}}}
			}
			if len(tt.want) > ingest.MaxReasonBytes {
				t.Fatal("test reason too long")
			}
			if diff := cmp.Diff(want, res); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A size with many out-of-range numbers lists the first ten and counts the
// rest, so the reason stays bounded.
func TestSizeNumberRangeReasonIsBounded(t *testing.T) {
	svc, err := ingest.New(memIngest(t), ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := svc.Ingest(context.Background(), ingest.Caller{}, [][]byte{instanceItem("e", okSize+`,"disk_gb":[`+strings.TrimSuffix(strings.Repeat("1e999999,", 500), ",")+`]`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rejected) != 1 || !strings.HasSuffix(res.Rejected[0].Reason, "; and 490 more") {
		t.Errorf("%+v", res)
	}
}

// Numbers: "A schema whose numbers cannot be enforced is refused
// with 400, naming the keyword."
func TestPutResourceTypeRefusesNumbersItCannotEnforce(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"minimum", `{"minimum": 1e1000001}`, "/minimum: numberRange: "},
		{"nested maximum", `{"properties":{"gb":{"maximum":-1e-1000001}}}`, "/properties/gb/maximum: numberRange: "},
		{"enum", `{"enum":[1, 1e999999, 1e999999]}`, "/enum/1: numberRange: "},
		// X1: the validator reads a count as the low bits of its value, so
		// maxLength 1e300 was stored (200) and enforced as 0.
		{"maxLength above MaxInt (its low bits are 0)", `{"properties":{"a":{"maxLength":1e300}}}`, "/properties/a/maxLength: numberRange: must be a count of at most"},
		{"maxItems 2^64+1 (its low bits are 1)", `{"maxItems":18446744073709551617}`, "/maxItems: numberRange: "},
		{"minProperties", `{"minProperties":1e19}`, "/minProperties: numberRange: "},
		{"maxContains", `{"contains":{},"maxContains":9.3e18}`, "/maxContains: numberRange: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc, err := ingest.New(memIngest(t), ingest.Options{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = svc.PutResourceType(context.Background(), "openstack", "x", jsontext.Value(tt.doc))
			var ve *event.ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) != 1 || !strings.HasPrefix(ve.Problems[0].String(), tt.want) {
				t.Fatalf("err = %v, want one problem starting %q", err, tt.want)
			}
		})
	}
}

// A count up to math.MaxInt is read exactly by the validator, so it is
// kept; 9223372036854775807 is math.MaxInt on 64-bit platforms.
func TestPutResourceTypeKeepsCountsTheValidatorReads(t *testing.T) {
	for _, doc := range []string{
		`{"maxLength":9223372036854775807}`,
		`{"minItems":0}`,
		`{"maxProperties":1e18}`,
		`{"const":{"maxLength":1}}`,
		`{"properties":{"maxLength":{"type":"integer","maximum":1e300}}}`,
	} {
		if _, err := ingest.CompileSizeSchema(jsontext.Value(doc)); err != nil {
			t.Errorf("%s: %v, want compiled", doc, err)
		}
	}
	sch, err := ingest.CompileSizeSchema(jsontext.Value(`{"maxLength":1e18}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate("xx"); err != nil {
		t.Errorf("maxLength 1e18 refused a 2-character string: %v", err)
	}
}

func TestNumberRangeRuleOnLiterals(t *testing.T) {
	in := []string{"0", "-0", "1.5", "1e400", "1E-400", "1e+0400", "-" + strings.Repeat("9", 100), "0." + strings.Repeat("0", 98) + "1"}
	out := []string{"1e401", "1e-401", "1e00000401", "1e99999999999999999999", strings.Repeat("9", 101), "1." + strings.Repeat("0", 100)}
	for _, n := range in {
		if _, err := ingest.CompileSizeSchema(jsontext.Value(`{"const":` + n + `}`)); err != nil {
			t.Errorf("%s: %v, want in range", n, err)
		}
	}
	for _, n := range out {
		if _, err := ingest.CompileSizeSchema(jsontext.Value(`{"const":` + n + `}`)); err == nil || !strings.Contains(err.Error(), "numberRange") {
			t.Errorf("%s: %v, want out of range", n, err)
		}
	}
}

// panicStore panics while reading the size names of cloud "boom", standing
// in for a bug in any check of one item.
type panicStore struct{ *memstore.Ingest }

func (p panicStore) SizeNames(ctx context.Context, cloud, resourceType string) ([]sizenames.Row, error) {
	if cloud == "boom" {
		panic("boom")
	}
	return p.Ingest.SizeNames(ctx, cloud, resourceType)
}

// Numbers: "a panic inside one item's checks refuses that item
// (the reason names the stage) and is logged with its stack; the rest of the
// batch goes on."
func TestPanicInOneItemRefusesOnlyThatItem(t *testing.T) {
	var logs bytes.Buffer
	st := memIngest(t)
	svc, err := ingest.New(panicStore{st}, ingest.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Replace(instanceItem("bad", okSize+`,"disk_gb":1`), []byte(`"cloud":"c"`), []byte(`"cloud":"boom"`), 1)
	res, err := svc.Ingest(context.Background(), ingest.Caller{}, [][]byte{bad, instanceItem("good", okSize+`,"disk_gb":1`)})
	if err != nil {
		t.Fatal(err)
	}
	want := ingest.Result{Accepted: 1, Rejected: []ingest.Rejection{{Index: 0, EventID: "bad",
		Reason: "size_schema: /payload/size: internal: the size_names stage failed on this item; it was refused and kept as a dead letter"}}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "stage=size_names") || !strings.Contains(logs.String(), "runtime/debug.Stack") {
		t.Errorf("log does not carry the stage and the stack:\n%s", logs.String())
	}
	dls, err := st.DeadLetters(context.Background(), ingest.DeadLetterQuery{})
	if err != nil || len(dls) != 1 || !bytes.Equal(dls[0].Raw, bad) {
		t.Errorf("dead letters %+v, %v; want the refused item", dls, err)
	}
}

// docs/decisions.md, An item that breaks a parser limit (depth) inside a batch:
// "Refused as that item and dead-lettered; the rest of the batch proceeds."
func TestOverDeepItemInABatchIsRefusedAlone(t *testing.T) {
	st := memIngest(t)
	svc, err := ingest.New(st, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// payload.provider nested event.MaxDepth+1 deep: the item's object is level 1,
	// payload 2, provider 3.
	nest := func(n int) string { return strings.Repeat(`{"a":`, n-1) + `{}` + strings.Repeat(`}`, n-1) }
	deep := bytes.Replace(instanceItem("deep", okSize+`,"disk_gb":1`), []byte(`"payload":{`),
		[]byte(`"payload":{"provider":`+nest(event.MaxDepth-1)+`,`), 1)
	body := "[" + string(deep) + "," + string(instanceItem("good", okSize+`,"disk_gb":1`)) + "]"
	items, err := ingest.SplitBatch([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	res, err := svc.Ingest(context.Background(), ingest.Caller{}, items)
	if err != nil {
		t.Fatal(err)
	}
	want := ingest.Result{Accepted: 1, Rejected: []ingest.Rejection{{Index: 0, EventID: "deep"}}}
	if diff := cmp.Diff(want, res, cmpopts.IgnoreFields(ingest.Rejection{}, "Reason")); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if len(res.Rejected) == 1 && (!strings.HasPrefix(res.Rejected[0].Reason, "schema: ") || !strings.Contains(res.Rejected[0].Reason, "provider") || !strings.Contains(res.Rejected[0].Reason, fmt.Sprintf("more than %d levels deep", event.MaxDepth))) {
		t.Errorf("reason %q does not name the depth limit", res.Rejected[0].Reason)
	}
	dls, err := st.DeadLetters(context.Background(), ingest.DeadLetterQuery{})
	if err != nil || len(dls) != 1 || !bytes.Equal(dls[0].Raw, deep) {
		t.Errorf("dead letters %d, %v; want the over-deep item", len(dls), err)
	}
	// One level less is within the limit.
	ok := bytes.Replace(instanceItem("ok", okSize+`,"disk_gb":1`), []byte(`"payload":{`),
		[]byte(`"payload":{"provider":`+nest(event.MaxDepth-2)+`,`), 1)
	if res, err := svc.Ingest(context.Background(), ingest.Caller{}, [][]byte{ok}); err != nil || res.Accepted != 1 {
		t.Errorf("item at the limit: %+v, %v", res, err)
	}
}
