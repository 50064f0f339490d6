package pgstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/internal/payloadjson"
)

// The events COPY is written in PostgreSQL's binary COPY format by hand
// (https://www.postgresql.org/docs/15/sql-copy.html, Binary Format): every
// column is text, json or timestamptz, whose binary forms are the text's
// bytes and microseconds since 2000-01-01 UTC. pgx's CopyFrom encodes the
// same bytes, but boxes every value in an interface and plans its encoding
// value by value, which cost about a tenth of the library path's Go CPU
// (the performance rules). The server checks the values as it does for pgx's COPY: text
// must be valid in the database encoding, json must be JSON.

// copyEventsSQL is the COPY statement of copyEvents, columns in the order
// appendEventTuple writes them.
var copyEventsSQL = "COPY " + pgx.Identifier{"events"}.Sanitize() + " (event_id, timestamp, event_type, platform, cloud, " +
	"resource_type, resource_id, project_id, source, payload, category, received_at) FROM STDIN BINARY"

// copyHeader starts a binary COPY stream: the signature, flags 0 and no
// header extension.
var copyHeader = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

// copyFields is the number of fields of each tuple.
const copyFields = 12

// pgEpochMicros is 2000-01-01T00:00:00Z, PostgreSQL's timestamp epoch, in
// microseconds since the Unix epoch.
const pgEpochMicros = 946684800 * 1000000

// copyEventRows returns the binary COPY stream of evs (already in the
// order they are to be inserted), every event received at receivedAt;
// checked is the batch's Checked (appendPayload).
func copyEventRows(evs []*event.Event, checked bool, receivedAt time.Time) ([]byte, error) {
	buf := make([]byte, 0, 4096+len(evs)*768)
	buf = append(buf, copyHeader...)
	received := pgMicros(receivedAt)
	for _, e := range evs {
		buf = binary.BigEndian.AppendUint16(buf, copyFields)
		buf = appendText(buf, e.EventID)
		buf = appendMicros(buf, pgMicros(e.Timestamp))
		for _, s := range [...]string{e.EventType, e.Platform, e.Cloud, e.ResourceType, e.ResourceID, e.ProjectID, string(e.Source)} {
			buf = appendText(buf, s)
		}
		// The payload is written in place after its length, which is
		// filled in once known.
		at := len(buf)
		buf = append(buf, 0, 0, 0, 0)
		var err error
		if buf, err = appendPayload(buf, &e.Payload, checked); err != nil {
			return nil, fmt.Errorf("encode payload of event %q: %w", e.EventID, err)
		}
		n := len(buf) - at - 4
		if n > math.MaxInt32 {
			return nil, fmt.Errorf("encode payload of event %q: %d bytes is more than a COPY field holds", e.EventID, n)
		}
		binary.BigEndian.PutUint32(buf[at:], uint32(n))
		buf = appendText(buf, string(event.Categorize(e.EventType)))
		buf = appendMicros(buf, received)
	}
	return binary.BigEndian.AppendUint16(buf, 0xffff), nil // the trailer: -1 fields
}

// appendPayload appends p as JSON to dst: as p.MarshalJSON encodes it,
// which checks each raw member first, or, when checked (the batch's
// Checked: the ingest pipeline decoded and checked every payload), without
// that second check, which cost about 4 % of the library path's Go CPU. The
// server's json input function checks the text again either way.
func appendPayload(dst []byte, p *event.PayloadEnvelope, checked bool) ([]byte, error) {
	if checked {
		return payloadjson.Append(dst, p.State, p.Size, p.Provider, p.Unknown)
	}
	b, err := p.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return append(dst, b...), nil
}

// appendText appends s as one binary COPY field of type text.
func appendText(buf []byte, s string) []byte {
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(s)))
	return append(buf, s...)
}

// appendMicros appends a timestamptz field of us microseconds since
// PostgreSQL's epoch.
func appendMicros(buf []byte, us int64) []byte {
	buf = binary.BigEndian.AppendUint32(buf, 8)
	return binary.BigEndian.AppendUint64(buf, uint64(us))
}

// pgMicros is t as the store keeps it (utcMicro), in microseconds since
// PostgreSQL's epoch (UnixMicro rounds down, as utcMicro does).
func pgMicros(t time.Time) int64 { return t.UnixMicro() - pgEpochMicros }

// copyStream sends a binary COPY stream made by copyEventRows through tx.
func copyStream(ctx context.Context, tx pgx.Tx, stream []byte) error {
	_, err := tx.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(stream), copyEventsSQL)
	return err
}
