package event_test

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
)

// docs/decisions.md, Faithfulness: "payload.provider, unknown payload members and
// payload.size … are stored and read back byte for byte as sent; numbers are
// never rounded." White space inside values, string escapes and number
// spellings survive Decode then MarshalJSON, and PayloadEnvelope's own
// round trip.
func TestPayloadBytesSurviveAsSent(t *testing.T) {
	const (
		size     = `{ "vcpus" : 2 ,"flavor":"m1\/\u0041", "gb": 1.50e3 }`
		provider = "{\n  \"name\" : \"\\u0041\\/\" ,\"n\":[ 1 , -0.0E+1 ],\"\\u0078\":{}\t}"
		unknown  = `"z\u0041" :  [ "\/" , 1E2 ] , "task_state":null`
	)
	src := `{"event_id":"e1","timestamp":"2026-03-01T12:00:00Z","event_type":"compute.instance.update","platform":"openstack","cloud":"c","resource_type":"instance","resource_id":"r","project_id":"p",` +
		`"payload":{"state":"active","size":` + size + `,` + unknown + `,"provider":` + provider + `}}`
	ev, err := event.Decode([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(size, string(ev.Payload.Size)); diff != "" {
		t.Errorf("size (-sent +decoded):\n%s", diff)
	}
	if diff := cmp.Diff(provider, string(ev.Payload.Provider)); diff != "" {
		t.Errorf("provider (-sent +decoded):\n%s", diff)
	}
	wantUnknown := `{"z\u0041":[ "\/" , 1E2 ],"task_state":null}`
	if diff := cmp.Diff(wantUnknown, string(ev.Payload.Unknown)); diff != "" {
		t.Errorf("unknown members (-want +decoded):\n%s", diff)
	}
	out, err := ev.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	wantPayload := `{"state":"active","size":` + size + `,"provider":` + provider + `,"z\u0041":[ "\/" , 1E2 ],"task_state":null}`
	if !bytes.HasSuffix(out, []byte(`,"payload":`+wantPayload+`}`)) {
		t.Errorf("MarshalJSON = %s\nwant the payload %s", out, wantPayload)
	}
	var p event.PayloadEnvelope
	if err := p.UnmarshalJSON([]byte(wantPayload)); err != nil {
		t.Fatal(err)
	}
	again, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantPayload, string(again)); diff != "" {
		t.Errorf("PayloadEnvelope round trip (-want +got):\n%s", diff)
	}
	ev2, err := event.Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ev, ev2, cmpEventJSON); diff != "" {
		t.Errorf("decode(encode(ev)) (-want +got):\n%s", diff)
	}
}

// The encoder writes raw members as held, so it must refuse what is not
// valid JSON rather than write a broken document.
func TestPayloadMarshalRefusesBrokenRawMembers(t *testing.T) {
	for name, p := range map[string]event.PayloadEnvelope{
		"size not JSON":           {Size: []byte(`{"a":`)},
		"provider duplicate":      {Provider: []byte(`{"a":1,"a":2}`)},
		"unknown not an object":   {Unknown: []byte(`[1]`)},
		"unknown repeats size":    {Size: []byte(`{}`), Unknown: []byte(`{"size":1}`)},
		"unknown invalid UTF-8":   {Unknown: []byte("{\"a\":\"\xff\"}")},
		"provider two values":     {Provider: []byte(`{} {}`)},
		"size with trailing text": {Size: []byte(`1 x`)},
	} {
		if b, err := p.MarshalJSON(); err == nil {
			t.Errorf("%s: MarshalJSON = %s, want an error", name, b)
		}
	}
}
