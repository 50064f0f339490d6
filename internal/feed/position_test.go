package feed

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// legacyAt is a Legacy position at a microsecond-precise UTC time, the
// precision a cursor keeps.
func legacyAt(us int64, id string) Position {
	return Position{Kind: Legacy, Time: time.UnixMicro(us).UTC(), ID: id}
}

func current(tx uint64, seq int64) Position { return Position{Kind: Current, TX: tx, Seq: seq} }

// cursorPositions holds positions of every Kind, including the extremes
// of each field.
var cursorPositions = []struct {
	name string
	p    Position
}{
	{"start", Position{}},
	{"legacy epoch, empty id", legacyAt(0, "")},
	{"legacy now", legacyAt(time.Date(2026, 3, 1, 12, 30, 0, 123456000, time.UTC).UnixMicro(), "0190f3a2-7b1c-7e4d-9a55-1f2e3d4c5b6a")},
	{"legacy before epoch", legacyAt(-1_234_567_890_123, "x")},
	{"legacy zero time", Position{Kind: Legacy, Time: time.Time{}, ID: "id"}},
	{"legacy min micro", legacyAt(-1<<63, "min")},
	{"legacy max micro", legacyAt(1<<63-1, "max")},
	{"legacy id with every byte", legacyAt(1, string(allBytes()))},
	{"current zero", current(0, 0)},
	{"current memory", current(0, 1)},
	{"current", current(751_234, 17)},
	{"current max", current(1<<64-1, 1<<63-1)},
}

func allBytes() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

func TestCursorRoundTrip(t *testing.T) {
	for _, tag := range []Tag{Lifecycle, Correlated} {
		for _, tc := range cursorPositions {
			t.Run(string(tag)+"/"+tc.name, func(t *testing.T) {
				c := Encode(tag, tc.p)
				got, err := Decode(tag, c)
				if err != nil {
					t.Fatalf("Decode(Encode(%+v)) = %v", tc.p, err)
				}
				if d := cmp.Diff(tc.p, got); d != "" {
					t.Errorf("round trip (-want +got):\n%s", d)
				}
				if Compare(tc.p, got) != 0 {
					t.Errorf("Compare(p, Decode(Encode(p))) = %d, want 0", Compare(tc.p, got))
				}
				if strings.ContainsAny(c, "+/=") {
					t.Errorf("cursor %q is not URL-safe unpadded base64", c)
				}
			})
		}
	}
}

// rawCursor returns the bytes of a cursor body with its CRC-32C appended,
// base64-encoded as Encode does.
func rawCursor(body []byte) string {
	b := binary.BigEndian.AppendUint32(append([]byte(nil), body...), crc32.Checksum(body, castagnoli))
	return base64.RawURLEncoding.EncodeToString(b)
}

func TestDecodeRefuses(t *testing.T) {
	valid := Encode(Lifecycle, current(99, 3))
	tests := []struct {
		name, cursor string
	}{
		{"empty", ""},
		{"other feed's tag", Encode(Correlated, current(99, 3))},
		{"other version", rawCursor([]byte{version + 1, byte(Lifecycle), byte(Current), 99, 6})},
		{"unknown kind", rawCursor([]byte{version, byte(Lifecycle), byte(Current + 1), 99, 6})},
		{"negative seq", Encode(Lifecycle, current(99, -1))},
		{"most negative seq", Encode(Lifecycle, current(0, -1<<63))},
		{"trailing bytes after a current position", rawCursor([]byte{version, byte(Lifecycle), byte(Current), 99, 6, 0})},
		{"trailing bytes after start", rawCursor([]byte{version, byte(Lifecycle), byte(Start), 0})},
		{"trailing bytes after a legacy position", rawCursor([]byte{version, byte(Lifecycle), byte(Legacy), 2, 1, 'a', 'b'})},
		{"legacy id longer than the cursor", rawCursor([]byte{version, byte(Lifecycle), byte(Legacy), 2, 5, 'a'})},
		{"legacy without id length", rawCursor([]byte{version, byte(Lifecycle), byte(Legacy), 2})},
		{"current without seq", rawCursor([]byte{version, byte(Lifecycle), byte(Current), 99})},
		{"current with an overlong varint", rawCursor([]byte{version, byte(Lifecycle), byte(Current),
			0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 2})},
		{"bytes after the checksum", valid + "AA"},
		{"checksum only", base64.RawURLEncoding.EncodeToString([]byte{1, 2, 3, 4})},
		{"shorter than a header and a checksum", rawCursor([]byte{version, byte(Lifecycle)})},
		{"over-long", Encode(Lifecycle, legacyAt(1, strings.Repeat("i", maxCursor)))},
		{"over-long garbage", strings.Repeat("A", maxCursor+1)},
		{"bad base64 character", "!" + valid[1:]},
		{"standard base64 alphabet", strings.NewReplacer("-", "+", "_", "/").Replace(Encode(Lifecycle, legacyAt(0, "\xfb\xff\xfe")))},
		{"padded", base64.URLEncoding.EncodeToString(mustRaw(t, Encode(Lifecycle, current(99, 300))))},
		{"impossible base64 length", valid[:len(valid)-len(valid)%4] + "A"},
		{"line feed", valid + "\n"},
		{"carriage return inside", valid[:4] + "\r" + valid[4:]},
		{"non-minimal varint", rawCursor([]byte{version, byte(Lifecycle), byte(Current), 0x80 | 99, 0x00, 6})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Decode(Lifecycle, tc.cursor)
			if !errors.Is(err, ErrCursor) {
				t.Errorf("Decode(%q) = %+v, %v; want ErrCursor", tc.cursor, p, err)
			}
			if d := cmp.Diff(Position{}, p); d != "" {
				t.Errorf("refused cursor returned a position (-want +got):\n%s", d)
			}
		})
	}
}

func mustRaw(t *testing.T, cursor string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodeRefusesFlippedBits flips every bit of every byte of valid
// cursors, both in the decoded bytes and in the base64 text.
func TestDecodeRefusesFlippedBits(t *testing.T) {
	for _, tc := range cursorPositions {
		c := Encode(Lifecycle, tc.p)
		if len(c) > maxCursor {
			continue
		}
		raw := mustRaw(t, c)
		for i := range raw {
			for bit := range 8 {
				b := append([]byte(nil), raw...)
				b[i] ^= 1 << bit
				m := base64.RawURLEncoding.EncodeToString(b)
				if p, err := Decode(Lifecycle, m); err == nil {
					t.Errorf("%s: byte %d bit %d flipped: Decode(%q) = %+v, want ErrCursor", tc.name, i, bit, m, p)
				}
			}
		}
		for i := range len(c) {
			for bit := range 8 {
				b := []byte(c)
				b[i] ^= 1 << bit
				m := string(b)
				if p, err := Decode(Lifecycle, m); err == nil {
					t.Errorf("%s: character %d bit %d flipped: Decode(%q) = %+v, want ErrCursor", tc.name, i, bit, m, p)
				}
			}
		}
	}
}

func TestDecodeRefusesTruncation(t *testing.T) {
	for _, tc := range cursorPositions {
		c := Encode(Lifecycle, tc.p)
		for n := range len(c) {
			if p, err := Decode(Lifecycle, c[:n]); err == nil {
				t.Errorf("%s: Decode(first %d of %d characters) = %+v, want ErrCursor", tc.name, n, len(c), p)
			}
		}
		raw := mustRaw(t, c)
		for n := range len(raw) {
			m := base64.RawURLEncoding.EncodeToString(raw[:n])
			if p, err := Decode(Lifecycle, m); err == nil {
				t.Errorf("%s: Decode(first %d of %d bytes) = %+v, want ErrCursor", tc.name, n, len(raw), p)
			}
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, tc := range cursorPositions {
		f.Add(Encode(Lifecycle, tc.p))
		f.Add(Encode(Correlated, tc.p))
	}
	f.Add("")
	f.Add("AQFl")
	f.Fuzz(func(t *testing.T, cursor string) {
		p, err := Decode(Lifecycle, cursor)
		if err != nil {
			if !errors.Is(err, ErrCursor) {
				t.Fatalf("Decode(%q) = %v, want ErrCursor", cursor, err)
			}
			return
		}
		if again := Encode(Lifecycle, p); again != cursor {
			t.Fatalf("Decode(%q) = %+v, which encodes to %q", cursor, p, again)
		}
	})
}

// TestCompareOrder checks Compare against a list in the order it must
// give: every pair compares as its indices do.
func TestCompareOrder(t *testing.T) {
	order := []Position{
		{},
		legacyAt(-5, "z"),
		legacyAt(0, ""),
		legacyAt(0, "a"),
		legacyAt(0, "ab"),
		legacyAt(0, "b"),
		legacyAt(1, ""),
		legacyAt(1<<62, "a"),
		current(0, 0),
		current(0, 1),
		current(0, 2),
		current(0, 1<<62),
		current(1, 0),
		current(1, 1),
		current(2, 1),
		current(1<<64-1, 1<<63-1),
	}
	for i, a := range order {
		for j, b := range order {
			if got, want := Compare(a, b), cmpInt(i, j); got != want {
				t.Errorf("Compare(%+v, %+v) = %d, want %d", a, b, got, want)
			}
		}
	}
	// Equal positions compare equal whatever their time's location, and a
	// Start or Current position ignores the fields of other kinds.
	eq := [][2]Position{
		{legacyAt(7, "a"), {Kind: Legacy, Time: time.UnixMicro(7).In(time.FixedZone("x", 3600)), ID: "a"}},
		{{}, {TX: 5, Seq: 3, ID: "x"}},
		{current(1, 2), {Kind: Current, TX: 1, Seq: 2, ID: "x", Time: time.Now()}},
	}
	for _, pair := range eq {
		if c := Compare(pair[0], pair[1]); c != 0 {
			t.Errorf("Compare(%+v, %+v) = %d, want 0", pair[0], pair[1], c)
		}
	}
}

func cmpInt(i, j int) int {
	switch {
	case i < j:
		return -1
	case i > j:
		return 1
	}
	return 0
}
