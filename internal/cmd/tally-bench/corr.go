package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/tallyhq/tally/correlate"
)

// corrConfig shapes the Meshery-like correlation traffic.
type corrConfig struct {
	Seed uint64
	// Org is the organization every credential names.
	Org string
	// Prefix starts every correlationKey.
	Prefix string
	// Creates is how many distinct creates are sent (a retry is not counted
	// here, but is sent and timed).
	Creates   int
	Keys      int     // correlation keys per user (200)
	Users     int     // users, one events credential each (4)
	Producers int     // concurrent producers (64)
	Resolve   float64 // share of creates that resolve (0.12)
	Retry     float64 // share of creates sent with an idempotencyKey and retried (0.10)
}

// corrOp is one create.
type corrOp struct {
	User, Key int
	Resolve   bool
	// IdemKey is "" for a create sent once; else it is sent twice.
	IdemKey string
}

// corrOps returns each producer's creates, spread over (user, key) at
// random: producers share keys, as several Meshery Servers reporting one
// condition do.
func corrOps(cfg corrConfig) [][]corrOp {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0xc0de))
	out := make([][]corrOp, cfg.Producers)
	for i := range cfg.Creates {
		op := corrOp{User: rng.IntN(cfg.Users), Key: rng.IntN(cfg.Keys), Resolve: rng.Float64() < cfg.Resolve}
		if rng.Float64() < cfg.Retry {
			op.IdemKey = fmt.Sprintf("%s-idem-%d-%016x", cfg.Prefix, i, rng.Uint64())
		}
		out[i%cfg.Producers] = append(out[i%cfg.Producers], op)
	}
	return out
}

func (c corrConfig) user(u int) string { return fmt.Sprintf("user-%d", u+1) }
func (c corrConfig) key(k int) string  { return fmt.Sprintf("%s/connection-%03d", c.Prefix, k) }
func (c corrConfig) system() string    { return "6c1bd1ab-1f39-4a0a-9a1f-6a4a6e7b0a01" }
func (c corrConfig) actedUpon(k int) string {
	return fmt.Sprintf("0f1e2d3c-4b5a-4697-8877-%012x", k)
}

// body renders op as a Meshery Server's createEvent payload.
func (c corrConfig) body(op corrOp, now time.Time) []byte {
	var b strings.Builder
	b.WriteString(`{"category":"connection","action":"`)
	if op.Resolve {
		b.WriteString(`connected","severity":"informational","description":"Connection restored"`)
	} else {
		b.WriteString(`failed","severity":"error","description":"Connection to the Kubernetes cluster failed"`)
	}
	fmt.Fprintf(&b, `,"systemId":%q,"actedUpon":%q,"correlationKey":%q`, c.system(), c.actedUpon(op.Key), c.key(op.Key))
	b.WriteString(`,"source":"/meshery/server","type":"io.meshery.connection","specversion":"1.0"`)
	fmt.Fprintf(&b, `,"metadata":{"error":"dial tcp 10.96.0.1:443: i/o timeout","connectionKind":"kubernetes","connectionName":"cluster-%03d"}`, op.Key)
	if op.Resolve {
		fmt.Fprintf(&b, `,"resolvedAt":%q`, now.UTC().Format(time.RFC3339Nano))
	}
	if op.IdemKey != "" {
		fmt.Fprintf(&b, `,"idempotencyKey":%q`, op.IdemKey)
	}
	b.WriteString(`}`)
	return []byte(b.String())
}

// corrAnswer is what one create answered.
type corrAnswer struct {
	Op          corrOp
	Retry       bool
	Disposition string
	ID          string
}

// corrPair is one (user, correlationKey).
type corrPair struct{ User, Key string }

// corrAgg is what a store holds for one pair.
type corrAgg struct {
	Events, Open, Resolved int
	SumCount               int64
}

// checkCorrelation checks the stored aggregates against the answers,
// whatever order the creates ran in (event-correlation.md):
//   - every occurrence is counted: the pair's occurrence counts sum to its
//     occurrences plus the resolutions that recorded a new event;
//   - the pair holds one event per "created" answer, and at most one open;
//   - its resolved events are its "resolved" and resolution-"created"
//     answers;
//   - an occurrence answers created or incremented, a resolution resolved or
//     created, and a retry replays the event its first send answered.
func checkCorrelation(cfg corrConfig, answers []corrAnswer, got map[corrPair]corrAgg) []string {
	var r corrReport
	wants := tallyAnswers(cfg, answers, &r)
	for _, p := range sortedPairs(wants, got) {
		w := wants[p]
		if w == nil { // a pair no create answered for
			w = &corrWant{}
		}
		r.checkPair(p, *w, got[p])
	}
	return r.lines()
}

// corrWant is what the answers say a pair must hold.
type corrWant struct {
	occ, created, resolved, resCreated int
}

// count adds answer a, not a retry, to w, and reports whether its
// disposition is one its kind of create may answer: an occurrence created
// or incremented, a resolution resolved or created.
func (w *corrWant) count(a corrAnswer) bool {
	switch {
	case !a.Op.Resolve && a.Disposition == "created":
		w.occ++
		w.created++
	case !a.Op.Resolve && a.Disposition == "incremented":
		w.occ++
	case a.Op.Resolve && a.Disposition == "resolved":
		w.resolved++
	case a.Op.Resolve && a.Disposition == "created":
		w.resCreated++
		w.created++
	default:
		return false
	}
	return true
}

// corrReport collects the problems checkCorrelation finds: the first ten,
// and how many there are.
type corrReport struct {
	problems []string
	bad      int
}

func (r *corrReport) add(format string, args ...any) {
	r.bad++
	if len(r.problems) < 10 {
		r.problems = append(r.problems, fmt.Sprintf(format, args...))
	}
}

// lines returns the problems kept, then a line counting the rest if any;
// nil when there is none.
func (r *corrReport) lines() []string {
	if r.bad > len(r.problems) {
		return append(r.problems, fmt.Sprintf("correlation: %d more problems", r.bad-len(r.problems)))
	}
	return r.problems
}

// tallyAnswers returns what the answers say each pair must hold, reporting
// to r every retry that did not replay its first send's event and every
// disposition a create may not answer.
func tallyAnswers(cfg corrConfig, answers []corrAnswer, r *corrReport) map[corrPair]*corrWant {
	first := map[string]string{} // idempotency key → id of the first answer
	for _, a := range answers {
		if !a.Retry && a.Op.IdemKey != "" {
			first[a.Op.IdemKey] = a.ID
		}
	}
	wants := map[corrPair]*corrWant{}
	for _, a := range answers {
		p := corrPair{cfg.user(a.Op.User), cfg.key(a.Op.Key)}
		w := wants[p]
		if w == nil {
			w = &corrWant{}
			wants[p] = w
		}
		if a.Retry {
			if a.Disposition != "replayed" || a.ID != first[a.Op.IdemKey] {
				r.add("correlation: the retry of %s answered %s %s, want replayed %s", a.Op.IdemKey, a.Disposition, a.ID, first[a.Op.IdemKey])
			}
			continue
		}
		if !w.count(a) {
			r.add("correlation: a create (resolution %t) of %v answered %q", a.Op.Resolve, p, a.Disposition)
		}
	}
	return wants
}

// sortedPairs returns the pairs of wants and of got, each once, sorted by
// user, then key.
func sortedPairs(wants map[corrPair]*corrWant, got map[corrPair]corrAgg) []corrPair {
	pairs := make([]corrPair, 0, len(wants))
	for p := range wants {
		pairs = append(pairs, p)
	}
	for p := range got {
		if wants[p] == nil {
			pairs = append(pairs, p)
		}
	}
	slices.SortFunc(pairs, func(a, b corrPair) int { return strings.Compare(a.User+"\x00"+a.Key, b.User+"\x00"+b.Key) })
	return pairs
}

// checkPair reports to r where g, what the store holds for pair p, breaks
// what the answers say: at most one open event, every occurrence counted,
// one event per "created" answer, the resolved events answered.
func (r *corrReport) checkPair(p corrPair, w corrWant, g corrAgg) {
	if g.Open > 1 {
		r.add("correlation: %v has %d open events (at most one)", p, g.Open)
	}
	if g.SumCount != int64(w.occ+w.resCreated) {
		r.add("correlation: %v counts %d occurrences, %d were sent (%d occurrences, %d resolutions recorded new)", p, g.SumCount, w.occ+w.resCreated, w.occ, w.resCreated)
	}
	if g.Events != w.created {
		r.add("correlation: %v holds %d events, %d creates answered created", p, g.Events, w.created)
	}
	if g.Resolved != w.resolved+w.resCreated {
		r.add("correlation: %v holds %d resolved events, want %d", p, g.Resolved, w.resolved+w.resCreated)
	}
}

// planned is op as correlate.Service plans it for the store, for the
// bare-SQL ceiling: the event body renders, with the step, count and times
// of event-correlation.md's steps 3 and 4 (an open create counts one
// occurrence; a resolution closes the open event or records one already
// resolved).
func (c corrConfig) planned(op corrOp, now time.Time) correlate.Create {
	desc := "Connection to the Kubernetes cluster failed"
	e := correlate.Event{
		ID: uuid.Must(uuid.NewV7()).String(), Organization: c.Org, User: c.user(op.User),
		SystemID: c.system(), ActedUpon: c.actedUpon(op.Key),
		Category: "connection", Action: "failed", Severity: correlate.SeverityError, Status: correlate.StatusUnread,
		Metadata:  fmt.Appendf(nil, `{"error":"dial tcp 10.96.0.1:443: i/o timeout","connectionKind":"kubernetes","connectionName":"cluster-%03d"}`, op.Key),
		CreatedAt: now, UpdatedAt: now, CorrelationKey: c.key(op.Key),
		Source: "/meshery/server", Type: "io.meshery.connection", Specversion: "1.0",
		OccurrenceCount: ptr(int64(1)), FirstSeenAt: ptr(now), LastSeenAt: ptr(now),
	}
	cr := correlate.Create{Caller: correlate.Caller{Organization: c.Org, User: e.User}, IdempotencyKey: op.IdemKey,
		Step: correlate.StepOccurrence, Count: 1, LastSeenAt: now, Now: now}
	if op.Resolve {
		desc = "Connection restored"
		e.Action, e.Severity, e.ResolvedAt = "connected", correlate.SeverityInformational, ptr(now)
		cr.Step, cr.ResolvedAt, cr.Severity, cr.Description = correlate.StepResolution, now, e.Severity, &desc
	}
	e.Description = desc
	cr.Event = e
	return cr
}

func ptr[T any](v T) *T { return &v }
