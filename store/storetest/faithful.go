package storetest

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
)

// faithfulItem is a create of (openstack, disk), a pair with no size
// schema, whose payload holds white space, string escapes and number
// spellings an encoder would rewrite.
const (
	faithfulSize     = `{ "gb" : 1.50e3 , "note":"\u0041\/" }`
	faithfulProvider = "{\n \"name\" : \"\\u0041\\/\" ,\"n\":[ 1 , -0.0E+1 , 12345678901234567890 ],\"\\u0078\":{}\t}"
	faithfulUnknown  = `"z\u0041" :  [ "\/" , 1E2 ] , "task_state":null`
)

func faithfulItem(id, size, provider string) []byte {
	return []byte(`{"event_id":"` + id + `","timestamp":"2026-03-01T12:00:00Z","event_type":"volume.create.end",` +
		`"platform":"openstack","cloud":"c1","resource_type":"volume","resource_id":"vol-` + id + `","project_id":"p1",` +
		`"payload":{"state":"available","size":` + size + `,` + faithfulUnknown + `,"provider":` + provider + `}}`)
}

// storedPayload returns the payload of the one stored event of resource
// vol-id, read through History (ingest.Store's only read of stored events).
func storedPayload(t *testing.T, st ingestStore, id string) event.PayloadEnvelope {
	t.Helper()
	hist, err := st.Projection().History(context.Background(), projection.Key{Cloud: "c1", ResourceType: "volume", ResourceID: "vol-" + id})
	if err != nil || len(hist) != 1 {
		t.Fatalf("History: %v, %d events", err, len(hist))
	}
	return hist[0].Payload
}

// docs/decisions.md, Faithfulness: "payload.provider, unknown payload members and
// payload.size (apart from members size names replace) are stored and read
// back byte for byte as sent; numbers are never rounded." canonical-event.md:
// unknown members survive "untouched, which keeps an event byte-faithful to
// what the provider sent".
func testFaithfulPayload(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	size := `{ "size_gb" : 1.50e3 , "type":"\u0041\/" }`
	if res := e.ingest(syncRun, faithfulItem("f1", size, faithfulProvider)); res.Accepted != 1 {
		t.Fatalf("%+v", res)
	}
	p := storedPayload(t, e.st, "f1")
	got := map[string]string{"size": string(p.Size), "provider": string(p.Provider), "unknown": string(p.Unknown)}
	want := map[string]string{"size": size, "provider": faithfulProvider, "unknown": `{"z\u0041":[ "\/" , 1E2 ],"task_state":null}`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stored payload members (-sent +stored):\n%s", diff)
	}
	enc, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	wantEnc := `{"state":"available","size":` + size + `,"provider":` + faithfulProvider + `,"z\u0041":[ "\/" , 1E2 ],"task_state":null}`
	if diff := cmp.Diff(wantEnc, string(enc)); diff != "" {
		t.Errorf("encoded stored payload (-want +got):\n%s", diff)
	}
}

// The same, when a size name replaces a member: only that value's bytes
// change in size, and provider gains size_as_reported before its closing
// brace, every other byte as sent.
func testFaithfulPayloadWithSizeNames(t *testing.T, newStore func(t *testing.T) ingestStore) {
	e := newEnv(t, newStore, ingest.Options{})
	e.names("c1", volumeTypeRow("c1", volumeTypeID, "ssd"))
	size := `{ "size_gb" : 1.50e3 , "type" : "` + volumeTypeID + `" , "x":"\/" }`
	if res := e.ingest(syncRun, faithfulItem("f2", size, faithfulProvider)); res.Accepted != 1 {
		t.Fatalf("%+v", res)
	}
	p := storedPayload(t, e.st, "f2")
	got := map[string]string{"size": string(p.Size), "provider": string(p.Provider)}
	want := map[string]string{
		"size":     `{ "size_gb" : 1.50e3 , "type" : "ssd" , "x":"\/" }`,
		"provider": "{\n \"name\" : \"\\u0041\\/\" ,\"n\":[ 1 , -0.0E+1 , 12345678901234567890 ],\"\\u0078\":{}," + `"size_as_reported":{"type":"` + volumeTypeID + `"}` + "\t}",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stored payload members (-want +stored):\n%s", diff)
	}
}
