package correlate

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/event"
)

// UserSummary is one row of getEventSummaryByUser ([Service.Summary]): the
// events one user recorded, counted. @meshery/schemas v1beta3 declares the
// row (EventSummary) as an open object; tally names its members after
// EventsPage's.
type UserSummary struct {
	// UserID is the user that recorded the events ("" for the calls that
	// identified no user).
	UserID string `json:"userId"`
	// TotalCount counts the user's events that the query selects.
	TotalCount int64 `json:"totalCount"`
	// ReadCount and UnreadCount split TotalCount by status.
	ReadCount   int64 `json:"readCount"`
	UnreadCount int64 `json:"unreadCount"`
	// CountBySeverityLevel splits TotalCount by severity: only severities
	// with at least one event, in the order of [Severities].
	CountBySeverityLevel []SeverityCount `json:"countBySeverityLevel"`
}

// SummaryPage is one page of getEventSummaryByUser, in the shape of
// @meshery/schemas v1beta3 EventSummaryPage: page (0-based), pageSize,
// totalCount (the users over every page) and data (the rows of the page).
type SummaryPage struct {
	Page       int           `json:"page"`
	PageSize   int           `json:"pageSize"`
	TotalCount int64         `json:"totalCount"`
	Data       []UserSummary `json:"data"`
}

// Summary is getEventSummaryByUser: one row per user whose events q
// selects, among the events the caller lists (as [Service.List] scopes
// them: an events caller gets at most its own row, a caller with AllUsers
// one row per user of its organization), ordered by user id byte by byte
// in q.Order ("" means ascending here), paged by q.Page and q.PageSize.
// Every filter of q applies (category, action, severity, status,
// resolved, correlationKey, search); q.Sort must be empty (rows are by
// user). The store answers with one grouped count ([Store.Counts]); the
// cost is one pass over the selected events and memory in the number of
// users. Errors: as [Service.List]'s, and /sort when set.
func (s *Service) Summary(ctx context.Context, caller Caller, q Query) (SummaryPage, error) {
	if err := caller.check(); err != nil {
		return SummaryPage{}, err
	}
	if err := summaryQuery(q).Validate(); err != nil {
		return SummaryPage{}, err
	}
	if q.PageSize == 0 {
		q.PageSize = DefaultPageSize
	}
	counts, err := s.store.Counts(ctx, caller, q, CountByUser)
	if err != nil {
		return SummaryPage{}, fmt.Errorf("correlate: event summary: %w", err)
	}
	rows := summarize(counts)
	if q.Order == OrderDesc {
		slices.Reverse(rows)
	}
	start := min(q.Page*q.PageSize, len(rows))
	end := min(start+q.PageSize, len(rows))
	return SummaryPage{Page: q.Page, PageSize: q.PageSize, TotalCount: int64(len(rows)),
		Data: append([]UserSummary{}, rows[start:end]...)}, nil
}

// summaryQuery is q as [Query.Validate] judges it for a summary: a sort is
// refused under its own name, since the summary's rows are users.
type summaryQuery Query

func (q summaryQuery) Validate() error {
	var ps problems
	if q.Sort != "" {
		ps.add("/sort", event.RuleAdditionalProperties, "the event summary is ordered by user; it takes no sort")
	}
	if err, ok := Query(q).Validate().(*event.ValidationError); ok && err != nil {
		ps = append(ps, err.Problems...)
	}
	return ps.err()
}

// summarize folds counts, ordered by user, into one row per user.
func summarize(counts []Count) []UserSummary {
	var rows []UserSummary
	bySeverity := map[Severity]int64{}
	flush := func() {
		r := &rows[len(rows)-1]
		r.CountBySeverityLevel = []SeverityCount{}
		for _, sv := range Severities() {
			if n := bySeverity[sv]; n > 0 {
				r.CountBySeverityLevel = append(r.CountBySeverityLevel, SeverityCount{Severity: sv, Count: n})
			}
		}
		clear(bySeverity)
	}
	for _, c := range counts {
		if len(rows) == 0 || rows[len(rows)-1].UserID != c.Key {
			if len(rows) > 0 {
				flush()
			}
			rows = append(rows, UserSummary{UserID: c.Key})
		}
		r := &rows[len(rows)-1]
		r.TotalCount += c.N
		if c.Status == StatusRead {
			r.ReadCount += c.N
		} else {
			r.UnreadCount += c.N
		}
		bySeverity[c.Severity] += c.N
	}
	if len(rows) > 0 {
		flush()
	}
	return rows
}

// AggregateCategory is the category whose count [Aggregate] always
// carries, as @meshery/schemas v1beta3 EventsAggregate declares it.
const AggregateCategory = "audit"

// Aggregate is getEventsAggregate's answer: a JSON object with one member
// per category, its value the number of events of that category, members
// ordered by category byte by byte; [AggregateCategory] ("audit") is always
// there, 0 when no event has it (@meshery/schemas v1beta3 EventsAggregate:
// audit, an integer, and any other member).
type Aggregate []CategoryCount

// CategoryCount is one member of [Aggregate].
type CategoryCount struct {
	Category string
	Count    int64
}

// MarshalJSONTo writes a as one object, in its order.
func (a Aggregate) MarshalJSONTo(enc *jsontext.Encoder) error {
	if err := enc.WriteToken(jsontext.BeginObject); err != nil {
		return err
	}
	for _, c := range a {
		if err := enc.WriteToken(jsontext.String(c.Category)); err != nil {
			return err
		}
		if err := enc.WriteToken(jsontext.Int(c.Count)); err != nil {
			return err
		}
	}
	return enc.WriteToken(jsontext.EndObject)
}

// UnmarshalJSONFrom reads an object of counts, keeping its order.
func (a *Aggregate) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return fmt.Errorf("correlate: an events aggregate must be a JSON object")
	}
	out := Aggregate{}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return fmt.Errorf("correlate: decode an events aggregate: %w", err)
		}
		category := name.String()
		tok, err := dec.ReadToken()
		if err != nil || tok.Kind() != '0' {
			return fmt.Errorf("correlate: events aggregate member %q: not a number", category)
		}
		n, err := tok.Int()
		if err != nil {
			return fmt.Errorf("correlate: events aggregate member %q: %w", category, err)
		}
		out = append(out, CategoryCount{Category: category, Count: n})
	}
	if _, err := dec.ReadToken(); err != nil {
		return fmt.Errorf("correlate: decode an events aggregate: %w", err)
	}
	*a = out
	return nil
}

// Count returns the count of category (0 when a has none).
func (a Aggregate) Count(category string) int64 {
	for _, c := range a {
		if c.Category == category {
			return c.Count
		}
	}
	return 0
}

// Aggregate is getEventsAggregate: the events the caller lists (as
// [Service.List] scopes them) counted by category. With cumulative, every
// event counts (all time, read or not: deleted events never do); without
// it, only the unread ones, which is what a notification center's badge
// shows (docs/decisions.md, getEventsAggregate without cumulative). The
// store answers with one grouped count ([Store.Counts]). Errors:
// [ErrNoOrganization] or [ErrInvalidCaller]; the store's error.
func (s *Service) Aggregate(ctx context.Context, caller Caller, cumulative bool) (Aggregate, error) {
	if err := caller.check(); err != nil {
		return nil, err
	}
	var q Query
	if !cumulative {
		q.Status = []Status{StatusUnread}
	}
	counts, err := s.store.Counts(ctx, caller, q, CountByCategory)
	if err != nil {
		return nil, fmt.Errorf("correlate: events aggregate: %w", err)
	}
	out := Aggregate{}
	for _, c := range counts {
		if len(out) == 0 || out[len(out)-1].Category != c.Key {
			out = append(out, CategoryCount{Category: c.Key})
		}
		out[len(out)-1].Count += c.N
	}
	i, found := slices.BinarySearchFunc(out, AggregateCategory, func(c CategoryCount, k string) int {
		return strings.Compare(c.Category, k)
	})
	if !found {
		out = slices.Insert(out, i, CategoryCount{Category: AggregateCategory})
	}
	return out, nil
}

// SortCounts orders counts as [Store.Counts] answers them: by Key, then
// Severity, then Status, byte by byte. Stores that group in memory use it.
func SortCounts(counts []Count) {
	slices.SortFunc(counts, func(a, b Count) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(string(a.Severity), string(b.Severity)),
			strings.Compare(string(a.Status), string(b.Status)))
	})
}
