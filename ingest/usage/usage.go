package usage

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"sort"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/timeline"
	"github.com/tallyhq/tally/internal/feed"
	"github.com/tallyhq/tally/internal/page"
)

// CodeNonNumericQuantity is the warning of a resource with an interval
// whose quantity member is missing or not a number: that interval counts
// in seconds and not in quantity.
const CodeNonNumericQuantity timeline.Code = "non_numeric_quantity"

// Codes lists every code a [Warning] of an answer may have: the
// timeline's ([timeline.Codes]) and [CodeNonNumericQuantity].
func Codes() []timeline.Code { return append(timeline.Codes(), CodeNonNumericQuantity) }

// Service answers usage questions over a [Store]. It is safe for
// concurrent use.
type Service struct {
	store Store
}

// New returns the Service over st, which is required.
func New(st Store) (*Service, error) {
	if st == nil {
		return nil, errors.New("usage: a store is required")
	}
	return &Service{store: st}, nil
}

// Answer is the answer of [Service.Usage] (GET /api/v1/usage).
type Answer struct {
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	Window   Window    `json:"window"`
	Quantity string    `json:"quantity"`
	Unit     Unit      `json:"unit"`
	// AsOf is the cursor of the feed position the answer reflects: the same
	// query with it gives the same answer, byte for byte.
	AsOf string `json:"as_of"`
	// Items are ordered by WindowStart, then by the group's values (byte
	// order of their JSON text, in GroupBy order); never nil.
	Items []Item `json:"items"`
	// Warnings are the first MaxWarnings of the contributing resources, by
	// resource key; never nil. Every page carries them.
	Warnings []Warning `json:"warnings"`
	// NextCursor continues the items; nil on the last page.
	NextCursor *string `json:"next_cursor"`
}

// Item is one (window, group) of an [Answer].
type Item struct {
	// WindowStart and WindowEnd are the window, [start, end), clipped to
	// the query's [From, To).
	WindowStart time.Time `json:"window_start"`
	WindowEnd   time.Time `json:"window_end"`
	Group       Group     `json:"group"`
	// Resources counts the distinct resources that contributed.
	Resources int `json:"resources"`
	// Seconds is the time alive, in seconds, exact to the microsecond.
	Seconds string `json:"seconds"`
	// Quantity is the query's quantity in its unit: the seconds, or the
	// size member's value times the seconds; exact for unit second,
	// rounded once for unit hour (docs/usage.md, Exactness).
	Quantity string `json:"quantity"`
	// Complete is false when the window ends after the as_of instant:
	// time after it is not counted yet.
	Complete bool `json:"complete"`
}

// bytes is the size of it counted against page.MaxBytes: its group's keys
// and values plus page.ItemOverhead for the rest.
func (it Item) bytes() int {
	n := page.ItemOverhead + len(it.Seconds) + len(it.Quantity)
	for _, v := range it.Group {
		n += len(v.Key) + len(v.Value)
	}
	return n
}

// Group is the values of an item's group_by keys, in GroupBy order,
// encoded as one JSON object.
type Group []GroupValue

// GroupValue is one key of a [Group] and its value: a JSON string, or for
// size.<member> the member's JSON value (numbers in canonical decimal form,
// [timeline.CanonicalNumber]) or null when the size lacks it.
type GroupValue struct {
	Key   string
	Value jsontext.Value
}

// MarshalJSON encodes g as an object, its members in order.
func (g Group) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, v := range g {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = jsontext.AppendQuote(b, v.Key); err != nil {
			return nil, err
		}
		b = append(append(b, ':'), v.Value...)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON decodes an object into g, keeping the members' order.
func (g *Group) UnmarshalJSON(b []byte) error {
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return fmt.Errorf("usage: group: must be a JSON object")
	}
	out := Group{}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return fmt.Errorf("usage: group: %w", err)
		}
		key := tok.String()
		v, err := dec.ReadValue()
		if err != nil {
			return fmt.Errorf("usage: group: %w", err)
		}
		out = append(out, GroupValue{Key: key, Value: bytes.Clone(v)})
	}
	if _, err := dec.ReadToken(); err != nil {
		return fmt.Errorf("usage: group: %w", err)
	}
	*g = out
	return nil
}

// Warning is one thing the answer could not take at face value, about one
// resource.
type Warning struct {
	Cloud        string        `json:"cloud"`
	ResourceType string        `json:"resource_type"`
	ResourceID   string        `json:"resource_id"`
	Code         timeline.Code `json:"code"`
	Message      string        `json:"message"`
}

// Usage answers q (docs/usage.md): the time-weighted usage of the
// resources the filters select over [q.From, q.To), bucketed by q.Window
// and grouped by q.GroupBy, as of the feed position q.AsOf (the head when
// empty). It returns an [*event.ValidationError] listing every bad
// parameter (an as_of the store never gave is /as_of), a *[TooLargeError]
// for a query past [MaxWindows] or [MaxHourSpan] before reading anything
// and past [MaxItems] while reading, or the store's error wrapped.
func (s *Service) Usage(ctx context.Context, q Query) (Answer, error) {
	var ps page.Params
	p := q.check(&ps)
	if err := ps.Err(); err != nil {
		return Answer{}, err
	}
	q = p.q
	bounds, err := p.windows()
	if err != nil {
		return Answer{}, err
	}
	snap, err := s.snapshot(ctx, p.asOf)
	if err != nil {
		return Answer{}, err
	}
	a := newAggregator(p, bounds, snap.At)
	hq := HistoryQuery{Cloud: q.Cloud, ResourceType: q.ResourceType, Platform: q.Platform, ProjectID: q.ProjectID, AsOf: snap.Position, Before: q.To}
	if err := s.store.Histories(ctx, hq, a.add); err != nil {
		if errors.Is(err, ErrResultTooLarge) {
			return Answer{}, err
		}
		return Answer{}, fmt.Errorf("usage: read histories: %w", err)
	}
	out := Answer{
		From: q.From, To: q.To, Window: p.window, Quantity: cmp.Or(q.Quantity, QuantitySeconds), Unit: p.unit,
		AsOf: feed.Encode(feed.Lifecycle, snap.Position), Warnings: a.warnings,
	}
	items := a.items()
	start := min(p.offset, len(items))
	end := start + page.Cut(items[start:], p.limit, Item.bytes)
	out.Items = items[start:end]
	if end < len(items) {
		c := encodeCursor(cursor{offset: end, asOf: out.AsOf, fingerprint: q.fingerprint()})
		out.NextCursor = &c
	}
	return out, nil
}

// snapshot resolves the as_of position; one the store never gave is a
// validation error.
func (s *Service) snapshot(ctx context.Context, at *feed.Position) (Snapshot, error) {
	snap, err := s.store.Snapshot(ctx, at)
	if errors.Is(err, ingest.ErrFeedPosition) {
		return Snapshot{}, &event.ValidationError{Problems: []event.Problem{badAsOf()}}
	}
	if err != nil {
		return Snapshot{}, fmt.Errorf("usage: resolve as_of: %w", err)
	}
	return snap, nil
}

// cellKey identifies one item while aggregating: a window and a group
// (its index in aggregator.groupList).
type cellKey struct {
	window int
	group  int
}

type cell struct {
	us        int64    // microseconds; overflow moves to usBig
	usBig     *big.Int // nil until needed
	qty       decimal
	resources int
	last      int // the index of the last resource counted
}

type aggregator struct {
	p        plan
	bounds   []time.Time
	end      time.Time // min(To, as_of instant)
	asOfAt   time.Time
	cells    map[cellKey]*cell
	bytes    int // of the cells' groups, against MaxGroupBytes
	n        int // resources read
	warnings []Warning
	builder  timeline.Builder // one for the query: the sizes resources share are canonicalised once
	// groups indexes groupList by the group's key (its values, each
	// followed by a NUL): an interval's group is built once per distinct
	// group, not once per interval.
	groups    map[string]int
	groupList []Group
	keyBuf    []byte
	// qtys memoizes the quantity member of a size by the size's raw text
	// (at most qtyMemo of them): the few sizes many intervals share are
	// decoded once.
	qtys map[string]*sizeQty
}

// sizeQty is the quantity member of one size: ok false when it is missing
// or not a number.
type sizeQty struct {
	num number
	ok  bool
}

// qtyMemo bounds aggregator.qtys; past it, it forgets them all and starts
// again.
const qtyMemo = 4096

func newAggregator(p plan, bounds []time.Time, asOfAt time.Time) *aggregator {
	end := p.q.To
	if asOfAt.Before(end) {
		end = asOfAt
	}
	return &aggregator{p: p, bounds: bounds, end: end, asOfAt: asOfAt, cells: map[cellKey]*cell{}, warnings: []Warning{},
		groups: map[string]int{}, qtys: map[string]*sizeQty{}}
}

// add folds one resource's history into the cells.
func (a *aggregator) add(h History) error {
	a.n++
	if !a.end.After(a.p.q.From) {
		return nil
	}
	tl := a.builder.BuildFrom(h.Start, h.StartAt, h.Events)
	if a.p.q.Platform != "" && tl.Platform != a.p.q.Platform {
		return nil
	}
	contributed, nonNumeric := false, false
	for i := range tl.Intervals {
		iv := &tl.Intervals[i]
		// The part of iv in [From, end), as timeline.Clip cuts it.
		from, to := iv.From, a.end
		if iv.To != nil && iv.To.Before(to) {
			to = *iv.To
		}
		if from.Before(a.p.q.From) {
			from = a.p.q.From
		}
		if !to.After(from) {
			continue
		}
		if a.p.q.ProjectID != "" && iv.ProjectID != a.p.q.ProjectID || a.p.q.State != "" && iv.State != a.p.q.State {
			continue
		}
		contributed = true
		g := a.group(h, tl, iv)
		var q *sizeQty
		if a.p.member != "" {
			q = a.qty(iv.Size)
			nonNumeric = nonNumeric || !q.ok
		}
		if err := a.spread(from, to, g, q); err != nil {
			return err
		}
	}
	if contributed {
		a.warn(h, tl, nonNumeric)
	}
	return nil
}

// qty returns the quantity member of size.
func (a *aggregator) qty(size jsontext.Value) *sizeQty {
	if q, ok := a.qtys[string(size)]; ok {
		return q
	}
	q := &sizeQty{}
	if v, ok := sizeMember(size, a.p.member); ok {
		q.num, q.ok = parseNumber(v)
	}
	if len(a.qtys) >= qtyMemo {
		clear(a.qtys)
	}
	a.qtys[string(size)] = q
	return q
}

// spread adds the span [from, to) of an interval of group g to the cells
// of every window it meets; q is its quantity (nil for seconds).
func (a *aggregator) spread(from, to time.Time, g int, q *sizeQty) error {
	nw := len(a.bounds) - 1
	i := sort.Search(nw, func(i int) bool { return a.bounds[i+1].After(from) })
	for ; i < nw && a.bounds[i].Before(to); i++ {
		f, t := from, to
		if a.bounds[i].After(f) {
			f = a.bounds[i]
		}
		if a.bounds[i+1].Before(t) {
			t = a.bounds[i+1]
		}
		us := t.UnixMicro() - f.UnixMicro()
		if us <= 0 {
			continue
		}
		k := cellKey{i, g}
		c := a.cells[k]
		if c == nil {
			if len(a.cells) >= MaxItems {
				return &TooLargeError{Reason: fmt.Sprintf("the answer would hold more than %d items; narrow the filters or group_by", MaxItems)}
			}
			if a.bytes += 2 * a.groupBytes(g); a.bytes > MaxGroupBytes {
				return &TooLargeError{Reason: fmt.Sprintf("the answer's groups would hold more than %d MiB; narrow the filters or group_by", MaxGroupBytes>>20)}
			}
			c = &cell{last: -1}
			a.cells[k] = c
		}
		if c.us > math.MaxInt64-us {
			if c.usBig == nil {
				c.usBig = new(big.Int)
			}
			c.usBig.Add(c.usBig, big.NewInt(c.us))
			c.us = 0
		}
		c.us += us
		if q == nil {
			c.qty.addInt(us, 6)
		} else if q.ok {
			c.qty.addTimes(&q.num, us)
		}
		if c.last != a.n {
			c.last = a.n
			c.resources++
		}
	}
	return nil
}

// groupBytes is the length of group g's key: its values, each followed by
// a NUL.
func (a *aggregator) groupBytes(g int) int {
	n := 0
	for _, v := range a.groupList[g] {
		n += len(v.Value) + 1
	}
	return n
}

func (a *aggregator) warn(h History, tl timeline.Timeline, nonNumeric bool) {
	add := func(code timeline.Code, msg string) {
		if len(a.warnings) < MaxWarnings {
			a.warnings = append(a.warnings, Warning{Cloud: h.Key.Cloud, ResourceType: h.Key.ResourceType, ResourceID: h.Key.ResourceID, Code: code, Message: msg})
		}
	}
	for _, w := range tl.Warnings {
		add(w.Code, w.Message+" (event "+w.EventID+")")
	}
	if nonNumeric {
		add(CodeNonNumericQuantity, "size."+a.p.member+" is missing or not a number in an interval; that time counts in seconds, not in quantity")
	}
}

// group returns the index of an interval's group in a.groupList, adding
// it when new.
func (a *aggregator) group(h History, tl timeline.Timeline, iv *timeline.Interval) int {
	key := a.keyBuf[:0]
	ends := make([]int, 0, 8)
	for _, k := range a.p.q.GroupBy {
		switch k {
		case "cloud":
			key = appendQuote(key, h.Key.Cloud)
		case "platform":
			key = appendQuote(key, tl.Platform)
		case "project_id":
			key = appendQuote(key, iv.ProjectID)
		case "resource_type":
			key = appendQuote(key, h.Key.ResourceType)
		case "resource_id":
			key = appendQuote(key, h.Key.ResourceID)
		case "state":
			key = appendQuote(key, iv.State)
		default:
			v := jsontext.Value("null")
			if m, ok := sizeMember(iv.Size, k[len(sizePrefix):]); ok {
				if c, err := timeline.Canonical(m); err == nil {
					v = c
				}
			}
			key = append(key, v...)
		}
		ends = append(ends, len(key))
		key = append(key, 0)
	}
	a.keyBuf = key
	if g, ok := a.groups[string(key)]; ok {
		return g
	}
	// A new group: its values are parts of one copy of the key.
	kb := bytes.Clone(key)
	g := make(Group, len(a.p.q.GroupBy))
	start := 0
	for i, k := range a.p.q.GroupBy {
		g[i] = GroupValue{Key: k, Value: kb[start:ends[i]:ends[i]]}
		start = ends[i] + 1
	}
	a.groupList = append(a.groupList, g)
	a.groups[string(kb)] = len(a.groupList) - 1
	return len(a.groupList) - 1
}

// appendQuote appends s as a JSON string; text that is not valid UTF-8
// (never stored) as "".
func appendQuote(b []byte, s string) []byte {
	n := len(b)
	b, err := jsontext.AppendQuote(b, s)
	if err != nil {
		return append(b[:n], `""`...)
	}
	return b
}

// sizeMember returns the value of member name of the size object, if any.
func sizeMember(size jsontext.Value, name string) (jsontext.Value, bool) {
	if size.Kind() != '{' {
		return nil, false
	}
	dec := jsontext.NewDecoder(bytes.NewReader(size))
	if _, err := dec.ReadToken(); err != nil {
		return nil, false
	}
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, false
		}
		key := tok.String()
		v, err := dec.ReadValue()
		if err != nil {
			return nil, false
		}
		if key == name {
			return v, true
		}
	}
	return nil, false
}

// items returns every cell as an Item, in answer order.
func (a *aggregator) items() []Item {
	keys := make([]cellKey, 0, len(a.cells))
	for k := range a.cells {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y cellKey) int {
		return cmp.Or(cmp.Compare(x.window, y.window), compareGroups(a.groupList[x.group], a.groupList[y.group]))
	})
	out := make([]Item, len(keys))
	for i, k := range keys {
		c := a.cells[k]
		var secs decimal
		secs.add(big.NewInt(c.us), 6)
		if c.usBig != nil {
			secs.add(c.usBig, 6)
		}
		out[i] = Item{
			WindowStart: a.bounds[k.window], WindowEnd: a.bounds[k.window+1], Group: a.groupList[k.group], Resources: c.resources,
			Seconds: secs.format(UnitSecond), Quantity: c.qty.format(a.p.unit), Complete: !a.bounds[k.window+1].After(a.asOfAt),
		}
	}
	return out
}

func compareGroups(x, y Group) int {
	for i := range x {
		if c := bytes.Compare(x[i].Value, y[i].Value); c != 0 {
			return c
		}
	}
	return 0
}
