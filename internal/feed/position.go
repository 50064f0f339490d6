// Package feed is the mechanism both change feeds share (the lifecycle
// feed of package ingest and the correlated-event feed of package
// correlate): positions and their opaque cursors, and a [Hub] that reads a
// store's feed once per replica and wakes every waiting reader. Neither
// area imports the other; each exposes its own feed built on this package,
// and internal/sse streams them over HTTP. The package imports no net/http,
// so that the areas stay free of it.
//
// A position is a place in one total order that is the same for every
// reader and every replica. On PostgreSQL it is the writing transaction's
// id (xid8) and a sequence number, read only below the oldest running
// transaction (pg_snapshot_xmin), so an item whose transaction commits late
// is never skipped: it is simply not readable until every transaction that
// started before it has finished (docs/operations.md, Change feeds).
package feed

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"time"
)

// Kind is which part of the order a [Position] lies in.
type Kind uint8

// The parts of the order, earliest first.
const (
	// Start is before every item: the zero Position.
	Start Kind = iota
	// Legacy items were stored before positions existed (a database
	// upgraded from a release without a feed): ordered by (Time, ID), all
	// before every [Current] item.
	Legacy
	// Current items are ordered by (TX, Seq).
	Current
)

// Position is one place in a feed. The zero Position is [Start].
type Position struct {
	Kind Kind
	// Time and ID order Legacy items: the event's timestamp (microseconds)
	// and its id, byte by byte.
	Time time.Time
	ID   string
	// TX is the writing transaction's id (PostgreSQL xid8; 0 in memory),
	// Seq the item's sequence number (≥ 1).
	TX  uint64
	Seq int64
}

// Compare orders positions: -1 when a is before b, 0 when equal, +1 after.
func Compare(a, b Position) int {
	if c := cmp.Compare(a.Kind, b.Kind); c != 0 {
		return c
	}
	switch a.Kind {
	case Legacy:
		return cmp.Or(a.Time.Compare(b.Time), strings.Compare(a.ID, b.ID))
	case Current:
		return cmp.Or(cmp.Compare(a.TX, b.TX), cmp.Compare(a.Seq, b.Seq))
	}
	return 0
}

// Tag names a feed inside its cursors, so that a cursor of one feed is
// refused by the other.
type Tag byte

// The feeds.
const (
	Lifecycle  Tag = 'e'
	Correlated Tag = 'c'
)

// ErrCursor is returned by [Decode] for a cursor that is not one [Encode]
// made for the same feed: tampered, truncated or foreign.
var ErrCursor = errors.New("feed: not a cursor of this feed")

const version = 1

// maxCursor bounds the length of a cursor Decode reads.
const maxCursor = 512

// Encode returns p as an opaque cursor of feed t: URL-safe base64 of a
// version, the tag, the position and a CRC-32C of them. A cursor is valid
// on every replica and across restarts.
func Encode(t Tag, p Position) string {
	b := []byte{version, byte(t), byte(p.Kind)}
	switch p.Kind {
	case Legacy:
		b = binary.AppendVarint(b, p.Time.UnixMicro())
		b = binary.AppendUvarint(b, uint64(len(p.ID)))
		b = append(b, p.ID...)
	case Current:
		b = binary.AppendUvarint(b, p.TX)
		b = binary.AppendVarint(b, p.Seq)
	}
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	return base64.RawURLEncoding.EncodeToString(b)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Decode returns the position of a cursor [Encode] made for feed t, or
// [ErrCursor].
func Decode(t Tag, cursor string) (Position, error) {
	if len(cursor) > maxCursor {
		return Position{}, ErrCursor
	}
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(b) < 7 {
		return Position{}, ErrCursor
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum || body[0] != version || Tag(body[1]) != t {
		return Position{}, ErrCursor
	}
	p := Position{Kind: Kind(body[2])}
	r := bytes.NewReader(body[3:])
	switch p.Kind {
	case Start:
	case Legacy:
		us, err1 := binary.ReadVarint(r)
		n, err2 := binary.ReadUvarint(r)
		if err1 != nil || err2 != nil || n > uint64(r.Len()) {
			return Position{}, ErrCursor
		}
		id := make([]byte, n)
		_, _ = r.Read(id)
		p.Time, p.ID = time.UnixMicro(us).UTC(), string(id)
	case Current:
		tx, err1 := binary.ReadUvarint(r)
		seq, err2 := binary.ReadVarint(r)
		if err1 != nil || err2 != nil || seq < 0 {
			return Position{}, ErrCursor
		}
		p.TX, p.Seq = tx, seq
	default:
		return Position{}, ErrCursor
	}
	// Only the one cursor Encode makes for p is accepted: base64 ignores
	// line breaks and the unused bits of its last character, and a varint
	// may be written longer than needed.
	if r.Len() != 0 || Encode(t, p) != cursor {
		return Position{}, ErrCursor
	}
	return p, nil
}
