package ingest

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/internal/page"
)

// Page selects one page of a listing ordered by (time, id), oldest first.
type Page struct {
	// From and To bound the time to [From, To); a zero value leaves that end
	// open.
	From, To time.Time
	// Limit is 1..1000; 0 means DefaultLimit.
	Limit int
	// Cursor is "" for the first page, else a NextCursor of an earlier page.
	Cursor string
}

// DeadLetterPage is one page of dead letters.
type DeadLetterPage struct {
	Items []DeadLetter `json:"items"`
	// NextCursor continues the listing; nil on the last page.
	NextCursor *string `json:"next_cursor"`
}

// AuditPage is one page of audit rows.
type AuditPage struct {
	Items []AuditEntry `json:"items"`
	// NextCursor continues the listing; nil on the last page.
	NextCursor *string `json:"next_cursor"`
}

// encodeCursor returns the opaque cursor that continues a listing after p.
func encodeCursor(p Position) string {
	s := strconv.FormatInt(p.At.UnixMicro(), 10) + "." + strconv.FormatInt(p.ID, 10)
	return base64.RawURLEncoding.EncodeToString([]byte("v1." + s))
}

// decodePageCursor reads a cursor made by encodeCursor, or returns an
// [*event.ValidationError] naming /cursor, rule format (matching
// [event.ErrInvalid]).
func decodePageCursor(c string) (Position, error) {
	pos, ok := decodeCursor(c)
	if !ok {
		var ps page.Params
		ps.BadCursor()
		return Position{}, ps.Err()
	}
	return pos, nil
}

func decodeCursor(c string) (Position, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return Position{}, false
	}
	parts := strings.Split(string(b), ".")
	if len(parts) != 3 || parts[0] != "v1" {
		return Position{}, false
	}
	us, err1 := strconv.ParseInt(parts[1], 10, 64)
	id, err2 := strconv.ParseInt(parts[2], 10, 64)
	at, ok := page.CursorTime(us)
	if err1 != nil || err2 != nil || id < 0 || !ok {
		return Position{}, false
	}
	return Position{At: at, ID: id}, true
}

// Validate returns an [*event.ValidationError] listing every bad parameter
// of p (/limit outside 1..MaxLimit, /cursor not issued by a listing), or
// nil. [Service.DeadLetters] and [Service.Audit] call it; an HTTP adapter
// calls it to list these problems beside its own.
func (p Page) Validate() error {
	var ps page.Params
	p.resolve(&ps)
	return ps.Err()
}

// resolve reads the page's limit and cursor, adding a problem to ps for
// each bad one.
func (p Page) resolve(ps *page.Params) (limit int, after *Position) {
	limit = ps.Limit(p.Limit)
	if p.Cursor != "" {
		pos, ok := decodeCursor(p.Cursor)
		if !ok {
			ps.BadCursor()
		}
		after = &pos
	}
	return limit, after
}

// DeadLetters lists the dead letters received in the page's window, oldest
// first (canonical-event.md, Delivery: "What was kept is read back through
// GET /api/v1/rejected-events"). Items is never nil. It returns an
// [*event.ValidationError] listing every bad parameter (/limit, /cursor),
// or the store's error wrapped.
func (s *Service) DeadLetters(ctx context.Context, p Page) (DeadLetterPage, error) {
	var ps page.Params
	limit, after := p.resolve(&ps)
	if err := ps.Err(); err != nil {
		return DeadLetterPage{}, err
	}
	items, err := s.store.DeadLetters(ctx, DeadLetterQuery{From: page.CeilMicro(p.From), To: page.CeilMicro(p.To), After: after, Limit: limit + 1, MaxBytes: MaxPageBytes})
	if err != nil {
		return DeadLetterPage{}, fmt.Errorf("ingest: list dead letters: %w", err)
	}
	out := DeadLetterPage{}
	out.Items, out.NextCursor = page.Paginate(items, limit, deadLetterBytes, func(d DeadLetter) string {
		return encodeCursor(Position{At: d.ReceivedAt, ID: d.ID})
	})
	return out, nil
}

// Audit lists the audit rows of action ("" for every action) written in the
// page's window, oldest first. Items is never nil. It returns an
// [*event.ValidationError] listing every bad parameter (/action, /limit,
// /cursor), or the store's error wrapped.
func (s *Service) Audit(ctx context.Context, action string, p Page) (AuditPage, error) {
	var ps page.Params
	ps.Text("action", action)
	limit, after := p.resolve(&ps)
	if err := ps.Err(); err != nil {
		return AuditPage{}, err
	}
	items, err := s.store.Audit(ctx, AuditQuery{Action: action, From: page.CeilMicro(p.From), To: page.CeilMicro(p.To), After: after, Limit: limit + 1, MaxBytes: MaxPageBytes})
	if err != nil {
		return AuditPage{}, fmt.Errorf("ingest: list audit rows: %w", err)
	}
	out := AuditPage{}
	out.Items, out.NextCursor = page.Paginate(items, limit, auditBytes, func(a AuditEntry) string {
		return encodeCursor(Position{At: a.At, ID: a.ID})
	})
	return out, nil
}

// ResourceTypes lists the size-schema registry (canonical-event.md, Size
// schemas), ordered by platform then resource_type; never nil.
func (s *Service) ResourceTypes(ctx context.Context) ([]ResourceType, error) {
	rts, err := s.store.ResourceTypes(ctx)
	if err != nil {
		return nil, fmt.Errorf("ingest: list resource types: %w", err)
	}
	if rts == nil {
		rts = []ResourceType{}
	}
	return rts, nil
}

// ResourceType returns the registry row of (platform, resourceType), or an
// error matching store.ErrNotFound when there is none.
func (s *Service) ResourceType(ctx context.Context, platform, resourceType string) (ResourceType, error) {
	if err := page.CheckText("platform", platform, "resource_type", resourceType); err != nil {
		return ResourceType{}, err
	}
	rt, err := s.store.ResourceType(ctx, platform, resourceType)
	if err != nil {
		return ResourceType{}, fmt.Errorf("ingest: get resource type (%s, %s): %w", platform, resourceType, err)
	}
	return rt, nil
}

// PutResourceType registers the size schema that body holds for
// (platform, resourceType), replacing any schema the pair had
// (canonical-event.md, Size schemas). body is the body of PUT
// /api/v1/resource-types/{platform}/{resource_type}: the wrapper
// {"size_schema": <schema>}, which may hold no other member, or the bare
// JSON Schema document, kept byte for byte as sent.
//
// A schema that does not compile or costs too much, another member in the
// wrapper, or a platform or resourceType that is empty, longer than 512
// bytes, not UTF-8 or holds a NUL is an [*event.ValidationError] listing
// every problem (a keyword named by its JSON Pointer into body, such as
// "/size_schema/properties/gb/minimum"), and nothing is written. On success
// it returns the row as stored (Version incremented); every process sees
// the new Version at its next batch.
func (s *Service) PutResourceType(ctx context.Context, platform, resourceType string, body jsontext.Value) (ResourceType, error) {
	var ps page.Params
	for _, n := range [][2]string{{"platform", platform}, {"resource_type", resourceType}} {
		switch {
		case n[1] == "":
			ps = append(ps, event.Problem{Member: "/" + n[0], Rule: event.RuleRequired, Message: "is required (1 to 512 bytes)"})
		case len(n[1]) > event.IdentifierMaxLen:
			ps = append(ps, event.Problem{Member: "/" + n[0], Rule: event.RuleMaxLength,
				Message: fmt.Sprintf("must be at most %d bytes, has %d", event.IdentifierMaxLen, len(n[1]))})
		default:
			ps.Text(n[0], n[1])
		}
	}
	if err := ps.Err(); err != nil {
		return ResourceType{}, err
	}
	sizeSchema, at, err := unwrapSizeSchema(body)
	if err != nil {
		return ResourceType{}, err
	}
	if _, err := compileSizeSchema(sizeSchema); err != nil {
		var ve *event.ValidationError
		if errors.As(err, &ve) {
			for i := range ve.Problems {
				ve.Problems[i].Member = event.SafePointer(at + ve.Problems[i].Member)
			}
		}
		return ResourceType{}, err
	}
	rt, err := s.store.PutResourceType(ctx, ResourceType{Platform: platform, ResourceType: resourceType, SizeSchema: sizeSchema})
	if err != nil {
		return ResourceType{}, fmt.Errorf("ingest: put resource type (%s, %s): %w", platform, resourceType, err)
	}
	s.reg.invalidate(platform, resourceType)
	return rt, nil
}
