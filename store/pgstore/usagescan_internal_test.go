package pgstore

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest/projection"
)

// narrowDecoder is the scanDecoder of scanEventsQuery's rows with a
// binary timestamptz, as newScanDecoder makes it for pgx's description.
func narrowDecoder() *scanDecoder {
	var ts pgtype.Timestamptz
	return &scanDecoder{cols: &scanNarrow, intern: map[string]string{}, tsBinary: true,
		ts: pgtype.NewMap().PlanScan(pgtype.TimestamptzOID, pgtype.BinaryFormatCode, &ts)}
}

// decodeRows decodes rows (scanNarrow's columns) with one decoder, as
// scanOnce does, then overwrites every raw value, as the connection's
// next message would, before it returns the events.
func decodeRows(t *testing.T, rows [][][]byte) ([]event.Event, []error) {
	t.Helper()
	d := narrowDecoder()
	var k projection.Key
	evs := make([]event.Event, len(rows))
	errs := make([]error, len(rows))
	for i, raw := range rows {
		var kind int32
		if err := d.head(raw, &k, &kind); err != nil || kind != scanEvent {
			t.Fatalf("row %d: head: %v, kind %d", i, err, kind)
		}
		ts, err := d.timestamp(raw[scanNarrow.timestamp])
		if err == nil {
			err = d.event(raw, k, ts, &evs[i])
		}
		errs[i] = err
	}
	for _, raw := range rows {
		for _, v := range raw {
			for j := range v {
				v[j] = '#'
			}
		}
	}
	return evs, errs
}

// narrowRow is a row of scanEventsQuery.
func narrowRow(cloud, typ, id, eventID string, us int64, eventType, platform, project, source, payload string) [][]byte {
	ts := binary.BigEndian.AppendUint64(nil, uint64(us))
	return [][]byte{[]byte(cloud), []byte(typ), []byte(id), []byte(eventID), ts, []byte(eventType), []byte(platform),
		[]byte(project), []byte(source), []byte(payload)}
}

// TestScanDecoderNarrow: the decoder of the events-only rows gives each
// column's value, whatever the rows before it held (its interned strings
// and the last string of each column are never another row's), none of
// them tied to the connection's buffer.
func TestScanDecoderNarrow(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 5000, time.UTC)
	us := at.UnixMicro() - pgEpochMicros
	rows := [][][]byte{
		narrowRow("c1", "instance", "r1", "e1", us, "instance.create.end", "openstack", "p1", "collector", `{"state":"active","size":{"vcpus":2}}`),
		narrowRow("c1", "instance", "r1", "e2", us+1, "instance.update", "openstack", "p1", "collector", `{"state":"stopped"}`),
		narrowRow("c1", "instance", "r2", "e3", us+2, "instance.update", "openstack", "p2", "collector", `{}`),
		narrowRow("c1", "volume", "r2", "e4", us+3, "volume.update", "", "p2", "reconciler", `{}`),
		narrowRow("c2", "volume", "r2", "e5", us+4, "", "openstack", "", "collector", `{}`),
	}
	got, errs := decodeRows(t, rows)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
	}
	ev := func(cloud, typ, id, eventID string, d time.Duration, eventType, platform, project, source string, p event.PayloadEnvelope) event.Event {
		return event.Event{EventID: eventID, Timestamp: at.Add(d), EventType: eventType, Platform: platform, Cloud: cloud, ResourceType: typ,
			ResourceID: id, ProjectID: project, Source: event.Source(source), Payload: p}
	}
	want := []event.Event{
		ev("c1", "instance", "r1", "e1", 0, "instance.create.end", "openstack", "p1", "collector",
			event.PayloadEnvelope{State: event.StateOf("active"), Size: []byte(`{"vcpus":2}`)}),
		ev("c1", "instance", "r1", "e2", time.Microsecond, "instance.update", "openstack", "p1", "collector", event.PayloadEnvelope{State: event.StateOf("stopped")}),
		ev("c1", "instance", "r2", "e3", 2*time.Microsecond, "instance.update", "openstack", "p2", "collector", event.PayloadEnvelope{}),
		ev("c1", "volume", "r2", "e4", 3*time.Microsecond, "volume.update", "", "p2", "reconciler", event.PayloadEnvelope{}),
		ev("c2", "volume", "r2", "e5", 4*time.Microsecond, "", "openstack", "", "collector", event.PayloadEnvelope{}),
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b event.State) bool { return a == b })); diff != "" {
		t.Errorf("decoded events (-want +got):\n%s", diff)
	}
}

// FuzzScanDecoderNarrow: for any sequence of rows (the strings of each
// event column drawn from the input, the timestamps any 64-bit value),
// each decoded event holds its own row's values, after the raw values are
// overwritten; the timestamp is what pgx's own plan decodes, or an error
// where it gives none or an infinity.
func FuzzScanDecoderNarrow(f *testing.F) {
	f.Add([]byte("instance.update|openstack|p1|collector"), int64(827_000_000_000_000), uint8(3))
	f.Add([]byte("a||b|a|a||"), int64(-1), uint8(7))
	f.Add([]byte("x"), int64(1<<63-1), uint8(2))
	f.Fuzz(func(t *testing.T, in []byte, us int64, n uint8) {
		parts := bytes.Split(in, []byte("|"))
		pick := func(i int) string { return string(parts[i%len(parts)]) }
		var rows [][][]byte
		var wantTS []int64
		for i := range int(n%16) + 1 {
			u := us + int64(i)*int64(len(in))
			rows = append(rows, narrowRow("c", "t", pick(i), pick(i+1), u, pick(i+2), pick(i+3), pick(i+4), pick(i+5), `{}`))
			wantTS = append(wantTS, u)
		}
		want := make([][4]string, len(rows))
		for i, raw := range rows {
			want[i] = [4]string{string(raw[5]), string(raw[6]), string(raw[7]), string(raw[8])}
		}
		ids := make([]string, len(rows))
		for i, raw := range rows {
			ids[i] = string(raw[2]) + "/" + string(raw[3])
		}
		got, errs := decodeRows(t, rows)
		plan := narrowDecoder().ts
		for i := range rows {
			var ts pgtype.Timestamptz
			perr := plan.Scan(binary.BigEndian.AppendUint64(nil, uint64(wantTS[i])), &ts)
			okPlan := perr == nil && ts.Valid && ts.InfinityModifier == pgtype.Finite
			if errs[i] != nil {
				if okPlan {
					t.Fatalf("row %d: %v, pgx decodes %v", i, errs[i], ts.Time)
				}
				continue
			}
			if okPlan && !got[i].Timestamp.Equal(ts.Time) {
				t.Fatalf("row %d: timestamp %v, pgx decodes %v", i, got[i].Timestamp, ts.Time)
			}
			e := got[i]
			if g := [4]string{e.EventType, e.Platform, e.ProjectID, string(e.Source)}; g != want[i] {
				t.Fatalf("row %d: columns %q, want %q", i, g, want[i])
			}
			if g := e.ResourceID + "/" + e.EventID; g != ids[i] {
				t.Fatalf("row %d: key and id %q, want %q", i, g, ids[i])
			}
		}
	})
}
