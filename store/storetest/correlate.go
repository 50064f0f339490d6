package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/store"
)

// correlateClock is a fixed fake clock for the suite: it reads the same instant until
// a test moves it. Safe for concurrent use.
type correlateClock struct {
	mu sync.Mutex
	t  time.Time
}

// newCorrelateClock returns a clock reading t.
func newCorrelateClock(t time.Time) *correlateClock { return &correlateClock{t: t} }

// Now reads the clock.
func (c *correlateClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *correlateClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// correlateT0 is the instant the suite's clock starts at. It has nanoseconds, so the
// suite also checks that the service truncates to microseconds.
var correlateT0 = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)

// corrT0 is correlateT0 as stored.
var corrT0 = correlateT0.Truncate(time.Microsecond)

var (
	corrAlice   = correlate.Caller{Organization: "org-1", User: "alice"}
	corrBob     = correlate.Caller{Organization: "org-1", User: "bob"}
	corrMallory = correlate.Caller{Organization: "org-2", User: "alice"}
	corrPublic  = correlate.Caller{Organization: "org-1"}
)

type correlateFixture struct {
	t     *testing.T
	store correlate.Store
	clock *correlateClock
	svc   *correlate.Service
}

func newCorrFixture(t *testing.T, newStore func(t *testing.T) correlate.Store, opts correlate.Options) *correlateFixture {
	t.Helper()
	return newCorrFixtureOn(t, newStore(t), opts)
}

func newCorrFixtureOn(t *testing.T, st correlate.Store, opts correlate.Options) *correlateFixture {
	t.Helper()
	f := &correlateFixture{t: t, store: st, clock: newCorrelateClock(correlateT0)}
	opts.Now = f.clock.Now
	svc, err := correlate.New(f.store, opts)
	if err != nil {
		t.Fatalf("correlate.New: %v", err)
	}
	f.svc = svc
	return f
}

// payload decodes a payload written as JSON, failing the test when it is
// refused.
func corrPayload(t *testing.T, js string) correlate.Payload {
	t.Helper()
	p, err := correlate.DecodePayload([]byte(js))
	if err != nil {
		t.Fatalf("DecodePayload(%s): %v", js, err)
	}
	return p
}

func (f *correlateFixture) create(c correlate.Caller, js string) (correlate.Event, correlate.Disposition) {
	f.t.Helper()
	p := corrPayload(f.t, js)
	e, d, err := f.svc.Create(context.Background(), c, p)
	if err != nil {
		f.t.Fatalf("Create(%s): %v", js, err)
	}
	return e, d
}

func (f *correlateFixture) list(c correlate.Caller, q correlate.Query) correlate.Page {
	f.t.Helper()
	p, err := f.svc.List(context.Background(), c, q)
	if err != nil {
		f.t.Fatalf("List: %v", err)
	}
	return p
}

func (f *correlateFixture) get(c correlate.Caller, id string) correlate.Event {
	f.t.Helper()
	e, err := f.svc.Get(context.Background(), c, id)
	if err != nil {
		f.t.Fatalf("Get(%s): %v", id, err)
	}
	return e
}

func corrAt(d time.Duration) *time.Time { t := corrT0.Add(d); return &t }

func corrAbs(s string) *time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return &t
}
func corrN(v int64) *int64 { return &v }

// ev is the event a test expects; Organization and User are set from c.
func corrEvent(c correlate.Caller, e correlate.Event) correlate.Event {
	e.Organization, e.User = c.Organization, c.User
	if e.Status == "" {
		e.Status = correlate.StatusUnread
	}
	if e.Severity == "" {
		e.Severity = correlate.SeverityInformational
	}
	return e
}

func diffCorrEvent(t *testing.T, what string, want, got correlate.Event) {
	t.Helper()
	want.ID = got.ID
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", what, diff)
	}
}

func diffCorrDisposition(t *testing.T, want, got correlate.Disposition) {
	t.Helper()
	if got != want {
		t.Errorf("disposition = %q, want %q", got, want)
	}
}

// testCorrelateTimeOrder: docs/decisions.md, Times that contradict each other in
// one payload: "lastSeenAt before firstSeenAt, or an already-resolved
// insert whose resolvedAt is before its firstSeenAt: 400 naming the later
// member. A resolution of an open event with an earlier resolvedAt still
// closes it (step 4)." A refused create records nothing and binds no key.
func testCorrelateTimeOrder(t *testing.T, newStore func(t *testing.T) correlate.Store) {
	const early = `"firstSeenAt":"2026-03-01T12:00:00Z","resolvedAt":"2026-03-01T11:00:00Z"`
	refused := []struct {
		name   string
		caller correlate.Caller
		js     string
		member string
	}{
		{"lastSeenAt before firstSeenAt", corrAlice, `{"category":"c","action":"a","correlationKey":"ck","firstSeenAt":"2026-03-01T12:00:00Z","lastSeenAt":"2026-03-01T11:00:00Z","idempotencyKey":"k"}`, "/lastSeenAt"},
		{"already-resolved insert (step 4, no open event)", corrAlice, `{"category":"c","action":"a","correlationKey":"ck",` + early + `,"idempotencyKey":"k"}`, "/resolvedAt"},
		{"already-resolved insert of a call that identifies no user (step 2)", corrPublic, `{"category":"c","action":"a","correlationKey":"ck",` + early + `,"idempotencyKey":"k"}`, "/resolvedAt"},
		{"already-resolved insert without correlationKey (step 2)", corrAlice, `{"category":"c","action":"a",` + early + `,"idempotencyKey":"k"}`, "/resolvedAt"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			f := newCorrFixture(t, newStore, correlate.Options{})
			p, err := correlate.DecodePayload([]byte(tt.js))
			if err == nil {
				_, _, err = f.svc.Create(context.Background(), tt.caller, p)
			}
			var ve *event.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, event.ErrInvalid) || len(ve.Problems) != 1 ||
				ve.Problems[0].Member != tt.member || ve.Problems[0].Rule != event.RuleMinimum {
				t.Fatalf("error %v, want one problem naming %s, rule minimum", err, tt.member)
			}
			if page := f.list(tt.caller, correlate.Query{}); page.TotalCount != 0 {
				t.Errorf("a refused create recorded %d events", page.TotalCount)
			}
			// "Refused create binds no key": the corrected retry is created.
			fixed := strings.Replace(tt.js, `"firstSeenAt":"2026-03-01T12:00:00Z"`, `"firstSeenAt":"2026-03-01T10:00:00Z"`, 1)
			if _, d := f.create(tt.caller, fixed); d != correlate.Created {
				t.Errorf("corrected retry: %s, want created", d)
			}
		})
	}
	t.Run("a resolution of an open event with an earlier resolvedAt still closes it", func(t *testing.T) {
		f := newCorrFixture(t, newStore, correlate.Options{})
		opened, _ := f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck","firstSeenAt":"2026-03-01T12:00:00Z"}`)
		got, d := f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck",`+early+`}`)
		diffCorrDisposition(t, correlate.Resolved, d)
		if got.ID != opened.ID || got.ResolvedAt == nil || !got.ResolvedAt.Equal(time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)) ||
			!got.FirstSeenAt.Equal(*opened.FirstSeenAt) {
			t.Errorf("closed %+v, want the open event %s with resolvedAt 11:00 and its own firstSeenAt", got, opened.ID)
		}
	})
}

// runCorrelate runs the conformance suite of event-correlation.md against
// the store newStore returns, one fresh, empty store per test; the
// concurrency claims run on the two handles newStores returns.
func runCorrelate(t *testing.T, newStore func(t *testing.T) correlate.Store, newStores func(t *testing.T) (correlate.Store, correlate.Store)) {
	for _, c := range []struct {
		name string
		run  func(t *testing.T, newStore func(t *testing.T) correlate.Store)
	}{
		{"Step1Replay", testCorrelateReplay},
		{"Step2Record", testCorrelateRecord},
		{"Step3Occurrence", testCorrelateOccurrence},
		{"Step4Resolution", testCorrelateResolution},
		{"Step5Binding", testCorrelateBinding},
		{"TimeOrder", testCorrelateTimeOrder},
		{"Scope", testCorrelateScope},
		{"Fields", testCorrelateFields},
		{"StatusCode", testCorrelateStatusCode},
		{"Cancelled", testCorrelateCancelled},
		{"List", testCorrelateList},
		{"ListBytes", testCorrelateListBytes},
		{"ReadAndWrite", testCorrelateReadWrite},
		{"BulkAndTypes", testCorrelateBulkAndTypes},
		{"SummaryAndAggregate", testCorrelateSummary},
		{"Feed", testCorrelateFeed},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newStore)
		})
	}
	t.Run("Concurrency", func(t *testing.T) {
		t.Parallel()
		runCorrelateConcurrency(t, newStores)
	})
}

func testCorrelateReplay(t *testing.T, newStore func(t *testing.T) correlate.Store) {
	// "When the payload carries an idempotencyKey the authenticated caller
	// already used, nothing is recorded or changed. The answer is 200 with
	// the event the key is bound to (Event-Disposition: replayed)."
	t.Run("same key replays the bound event and records nothing", func(t *testing.T) {
		f := newCorrFixture(t, newStore, correlate.Options{})
		first, d := f.create(corrAlice, `{"category":"c","action":"a","description":"one","idempotencyKey":"k1"}`)
		diffCorrDisposition(t, correlate.Created, d)
		f.clock.Advance(time.Minute)
		// docs/decisions.md: "Same idempotencyKey, different body: Replay (200, replayed)".
		got, d := f.create(corrAlice, `{"category":"other","action":"b","description":"two","idempotencyKey":"k1"}`)
		diffCorrDisposition(t, correlate.Replayed, d)
		diffCorrEvent(t, "replayed event", first, got)
		if got.ID != first.ID {
			t.Errorf("replayed id = %s, want %s", got.ID, first.ID)
		}
		if p := f.list(corrAlice, correlate.Query{}); p.TotalCount != 1 {
			t.Errorf("totalCount = %d after a replay, want 1", p.TotalCount)
		}
	})
	t.Run("This runs first, so a retried create never counts an occurrence twice", func(t *testing.T) {
		f := newCorrFixture(t, newStore, correlate.Options{})
		js := `{"category":"c","action":"a","correlationKey":"ck","idempotencyKey":"k1"}`
		f.create(corrAlice, js)
		f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck","idempotencyKey":"k2"}`)
		got, d := f.create(corrAlice, js)
		diffCorrDisposition(t, correlate.Replayed, d)
		if *got.OccurrenceCount != 2 {
			t.Errorf("occurrenceCount = %d, want 2 (the replay counts nothing)", *got.OccurrenceCount)
		}
	})
	t.Run("Replaying returns the bound event as it is now", func(t *testing.T) {
		f := newCorrFixture(t, newStore, correlate.Options{})
		f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck","idempotencyKey":"k1"}`)
		f.clock.Advance(time.Second)
		now, _ := f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck","occurrenceCount":4}`)
		got, d := f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck","idempotencyKey":"k1"}`)
		diffCorrDisposition(t, correlate.Replayed, d)
		diffCorrEvent(t, "replayed event", now, got)
	})
	t.Run("Refused create binds no key", func(t *testing.T) {
		f := newCorrFixture(t, newStore, correlate.Options{})
		bad := correlate.Payload{Category: "c", Action: "a", TraceID: "XYZ", IdempotencyKey: "k1"}
		if _, _, err := f.svc.Create(context.Background(), corrAlice, bad); !errors.Is(err, event.ErrInvalid) {
			t.Fatalf("Create(invalid) error = %v, want ErrInvalid", err)
		}
		_, d := f.create(corrAlice, `{"category":"c","action":"a","idempotencyKey":"k1"}`)
		diffCorrDisposition(t, correlate.Created, d)
	})
	t.Run("Idempotency retention: a key bound longer ago no longer replays", func(t *testing.T) {
		f := newCorrFixture(t, newStore, correlate.Options{IdempotencyRetention: time.Hour})
		first, _ := f.create(corrAlice, `{"category":"c","action":"a","idempotencyKey":"k1"}`)
		f.clock.Advance(59 * time.Minute)
		_, d := f.create(corrAlice, `{"category":"c","action":"a","idempotencyKey":"k1"}`)
		diffCorrDisposition(t, correlate.Replayed, d)
		f.clock.Advance(2 * time.Minute)
		second, d := f.create(corrAlice, `{"category":"c","action":"a","idempotencyKey":"k1"}`)
		diffCorrDisposition(t, correlate.Created, d)
		if second.ID == first.ID {
			t.Errorf("expired key replayed event %s", first.ID)
		}
		got, d := f.create(corrAlice, `{"category":"c","action":"a","idempotencyKey":"k1"}`)
		diffCorrDisposition(t, correlate.Replayed, d)
		if got.ID != second.ID {
			t.Errorf("rebound key replays %s, want %s", got.ID, second.ID)
		}
		f.create(corrAlice, `{"category":"c","action":"a","idempotencyKey":"k2"}`)
		f.clock.Advance(61 * time.Minute)
		purged, err := f.svc.PurgeIdempotencyKeys(context.Background())
		if err != nil || purged != 2 {
			t.Errorf("PurgeIdempotencyKeys = %d, %v; want 2, nil", purged, err)
		}
	})
	t.Run("Default retention keeps every key", func(t *testing.T) {
		f := newCorrFixture(t, newStore, correlate.Options{})
		f.create(corrAlice, `{"category":"c","action":"a","idempotencyKey":"k1"}`)
		f.clock.Advance(10 * 365 * 24 * time.Hour)
		if n, err := f.svc.PurgeIdempotencyKeys(context.Background()); n != 0 || err != nil {
			t.Errorf("PurgeIdempotencyKeys = %d, %v; want 0, nil", n, err)
		}
		_, d := f.create(corrAlice, `{"category":"c","action":"a","idempotencyKey":"k1"}`)
		diffCorrDisposition(t, correlate.Replayed, d)
	})
}

func testCorrelateRecord(t *testing.T, newStore func(t *testing.T) correlate.Store) {
	// "No correlationKey, or a call that identifies no user: a new event is
	// recorded (201, created). The correlation fields are stored exactly as
	// sent: no defaults are applied and no open event is matched."
	all := `"firstSeenAt":"2026-03-01T10:00:00.000000001+02:00","lastSeenAt":"2026-03-01T09:00:00Z","resolvedAt":"2026-03-01T09:30:00Z","occurrenceCount":7`
	tests := []struct {
		name   string
		caller correlate.Caller
		js     string
		want   correlate.Event
	}{{
		name:   "no correlationKey, nothing sent: no defaults",
		caller: corrAlice,
		js:     `{"category":"c","action":"a"}`,
		want:   correlate.Event{Category: "c", Action: "a", CreatedAt: corrT0, UpdatedAt: corrT0},
	}, {
		name:   "no correlationKey: correlation fields exactly as sent",
		caller: corrAlice,
		js:     `{"category":"c","action":"a",` + all + `}`,
		want: correlate.Event{Category: "c", Action: "a", CreatedAt: corrT0, UpdatedAt: corrT0,
			OccurrenceCount: corrN(7), FirstSeenAt: corrAbs("2026-03-01T08:00:00Z"), LastSeenAt: corrAbs("2026-03-01T09:00:00Z"), ResolvedAt: corrAbs("2026-03-01T09:30:00Z")},
	}, {
		name:   "a call that identifies no user stores it exactly as sent, including when omitted",
		caller: corrPublic,
		js:     `{"category":"c","action":"a","correlationKey":"ck"}`,
		want:   correlate.Event{Category: "c", Action: "a", CorrelationKey: "ck", CreatedAt: corrT0, UpdatedAt: corrT0},
	}, {
		name:   "A call that identifies no user stores it as sent and does not close another event",
		caller: corrPublic,
		js:     `{"category":"c","action":"a","correlationKey":"ck",` + all + `}`,
		want: correlate.Event{Category: "c", Action: "a", CorrelationKey: "ck", CreatedAt: corrT0, UpdatedAt: corrT0,
			OccurrenceCount: corrN(7), FirstSeenAt: corrAbs("2026-03-01T08:00:00Z"), LastSeenAt: corrAbs("2026-03-01T09:00:00Z"), ResolvedAt: corrAbs("2026-03-01T09:30:00Z")},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newCorrFixture(t, newStore, correlate.Options{})
			// An open event of the same key exists for the user and for
			// the public caller: step 2 matches neither.
			openU, _ := f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck"}`)
			openP, _ := f.create(corrPublic, `{"category":"c","action":"a","correlationKey":"ck"}`)
			got, d := f.create(tt.caller, tt.js)
			diffCorrDisposition(t, correlate.Created, d)
			diffCorrEvent(t, "recorded event", corrEvent(tt.caller, tt.want), got)
			diffCorrEvent(t, "the user's open event", openU, f.get(corrAlice, openU.ID))
			diffCorrEvent(t, "the public open event", openP, f.get(corrPublic, openP.ID))
			if code := f.svc.StatusCode(corrPayload(t, tt.js), d); code != 201 {
				t.Errorf("status = %d, want 201", code)
			}
		})
	}
	t.Run("incremented and resolved apply only to a call that identifies a user; a call that identifies no user is created", func(t *testing.T) {
		f := newCorrFixture(t, newStore, correlate.Options{})
		for i := 0; i < 3; i++ {
			_, d := f.create(corrPublic, `{"category":"c","action":"a","correlationKey":"ck"}`)
			diffCorrDisposition(t, correlate.Created, d)
		}
		_, d := f.create(corrPublic, `{"category":"c","action":"a","correlationKey":"ck","resolvedAt":"2026-03-01T12:00:00Z"}`)
		diffCorrDisposition(t, correlate.Created, d)
		if p := f.list(corrPublic, correlate.Query{}); p.TotalCount != 4 {
			t.Errorf("totalCount = %d, want 4 events", p.TotalCount)
		}
	})
}

func testCorrelateOccurrence(t *testing.T, newStore func(t *testing.T) correlate.Store) {
	// "Otherwise a new event is recorded, which opens the condition.
	// occurrenceCount defaults to 1. firstSeenAt is the payload's
	// firstSeenAt, else its lastSeenAt, else the time of receipt. lastSeenAt
	// is the payload's lastSeenAt, else firstSeenAt. The answer is 201
	// (created)."
	opening := []struct {
		name string
		js   string
		want correlate.Event
	}{{
		name: "occurrenceCount defaults to 1; firstSeenAt else the time of receipt; lastSeenAt else firstSeenAt",
		js:   `{}`,
		want: correlate.Event{OccurrenceCount: corrN(1), FirstSeenAt: corrAt(0), LastSeenAt: corrAt(0)},
	}, {
		name: "firstSeenAt is the payload's firstSeenAt; lastSeenAt else firstSeenAt",
		js:   `{"firstSeenAt":"2026-03-01T11:00:00Z"}`,
		want: correlate.Event{OccurrenceCount: corrN(1), FirstSeenAt: corrAt(-time.Hour - 123456*time.Microsecond), LastSeenAt: corrAt(-time.Hour - 123456*time.Microsecond)},
	}, {
		name: "firstSeenAt else its lastSeenAt",
		js:   `{"lastSeenAt":"2026-03-01T11:00:00Z","occurrenceCount":3}`,
		want: correlate.Event{OccurrenceCount: corrN(3), FirstSeenAt: corrAt(-time.Hour - 123456*time.Microsecond), LastSeenAt: corrAt(-time.Hour - 123456*time.Microsecond)},
	}, {
		name: "both sent",
		js:   `{"firstSeenAt":"2026-03-01T10:00:00Z","lastSeenAt":"2026-03-01T11:00:00Z"}`,
		want: correlate.Event{OccurrenceCount: corrN(1), FirstSeenAt: corrAt(-2*time.Hour - 123456*time.Microsecond), LastSeenAt: corrAt(-time.Hour - 123456*time.Microsecond)},
	}}
	for _, tt := range opening {
		t.Run(tt.name, func(t *testing.T) {
			f := newCorrFixture(t, newStore, correlate.Options{})
			js := `{"category":"c","action":"a","correlationKey":"ck",` + strings.TrimPrefix(tt.js, "{")
			js = strings.Replace(js, ",}", "}", 1)
			got, d := f.create(corrAlice, js)
			diffCorrDisposition(t, correlate.Created, d)
			want := tt.want
			want.Category, want.Action, want.CorrelationKey = "c", "a", "ck"
			want.CreatedAt, want.UpdatedAt = corrT0, corrT0
			diffCorrEvent(t, "opened event", corrEvent(corrAlice, want), got)
			diffCorrEvent(t, "stored event", got, f.get(corrAlice, got.ID))
		})
	}

	// "When the caller has an open event with that key (one with no
	// resolvedAt), nothing new is recorded. The open event's occurrenceCount
	// grows by the payload's occurrenceCount (1 when omitted). Its lastSeenAt
	// becomes the later of its own value and the payload's lastSeenAt (the
	// time of receipt when omitted). Its updatedAt advances. Every other
	// field keeps the value it was first recorded with. The answer is 200
	// (incremented)."
	counting := []struct {
		name          string
		js            string
		wantCount     int64
		wantLastSeen  *time.Time
		wantFirstSeen *time.Time
	}{
		{"grows by 1 when omitted; lastSeenAt the time of receipt when omitted", `{}`, 2, corrAt(time.Hour), corrAt(0)},
		{"grows by the payload's occurrenceCount", `{"occurrenceCount":5}`, 6, corrAt(time.Hour), corrAt(0)},
		{"lastSeenAt the later of its own value and the payload's lastSeenAt: later", `{"lastSeenAt":"2026-03-01T14:00:00Z"}`, 2, corrAt(2*time.Hour - 123456*time.Microsecond), corrAt(0)},
		{"lastSeenAt the later of its own value and the payload's lastSeenAt: earlier keeps its own", `{"lastSeenAt":"2026-03-01T08:00:00Z"}`, 2, corrAt(0), corrAt(0)},
		{"Every other field keeps the value it was first recorded with", `{"firstSeenAt":"2026-01-01T00:00:00Z","severity":"critical","description":"new","metadata":{"x":2},"source":"other","type":"t2","traceId":"0af7651916cd43dd8448eb211c80319d","parentId":"b7ad6b7169203331","owner":"o2","systemId":"s2","actedUpon":"u2","operationId":"op2","extra":1}`, 2, corrAt(time.Hour), corrAt(0)},
	}
	for _, tt := range counting {
		t.Run(tt.name, func(t *testing.T) {
			f := newCorrFixture(t, newStore, correlate.Options{})
			opened, _ := f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck","severity":"error","description":"down","metadata":{"x":1},"source":"meshery-server","type":"io.meshery.x"}`)
			f.clock.Advance(time.Hour)
			js := `{"category":"c2","action":"a2","correlationKey":"ck",` + strings.TrimPrefix(tt.js, "{")
			js = strings.Replace(js, ",}", "}", 1)
			got, d := f.create(corrAlice, js)
			diffCorrDisposition(t, correlate.Incremented, d)
			want := opened
			want.OccurrenceCount = corrN(tt.wantCount)
			want.LastSeenAt = tt.wantLastSeen
			want.FirstSeenAt = tt.wantFirstSeen
			want.UpdatedAt = corrT0.Add(time.Hour) // "Its updatedAt advances."
			diffCorrEvent(t, "incremented event", want, got)
			if got.ID != opened.ID {
				t.Errorf("incremented id %s, want the open event %s (nothing new is recorded)", got.ID, opened.ID)
			}
			if p := f.list(corrAlice, correlate.Query{}); p.TotalCount != 1 {
				t.Errorf("totalCount = %d, want 1: nothing new is recorded", p.TotalCount)
			}
			if code := f.svc.StatusCode(corrPayload(t, js), d); code != 200 {
				t.Errorf("status = %d, want 200", code)
			}
		})
	}
	t.Run("counts beyond 2^31 work", func(t *testing.T) {
		f := newCorrFixture(t, newStore, correlate.Options{})
		f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck","occurrenceCount":3000000000}`)
		got, _ := f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck","occurrenceCount":3000000000}`)
		if *got.OccurrenceCount != 6000000000 {
			t.Errorf("occurrenceCount = %d, want 6000000000", *got.OccurrenceCount)
		}
		// A count saturates at the int64 maximum instead of overflowing.
		got, _ = f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck","occurrenceCount":9223372036854775000}`)
		if *got.OccurrenceCount != 1<<63-1 {
			t.Errorf("occurrenceCount = %d, want saturated %d", *got.OccurrenceCount, int64(1<<63-1))
		}
	})
	t.Run("A caller has at most one open event per correlationKey", func(t *testing.T) {
		f := newCorrFixture(t, newStore, correlate.Options{})
		for i := 0; i < 5; i++ {
			f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck"}`)
		}
		f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"other"}`)
		p := f.list(corrAlice, correlate.Query{Resolved: new(false), CorrelationKey: "ck"})
		if p.TotalCount != 1 || *p.Data[0].OccurrenceCount != 5 {
			t.Errorf("open events of ck: %d (want 1) with count %v (want 5)", p.TotalCount, p.Data)
		}
	})
}

func testCorrelateResolution(t *testing.T, newStore func(t *testing.T) correlate.Store) {
	// "When the caller has an open event with that key, nothing new is
	// recorded. That event gets the resolvedAt. Its severity and description
	// become the payload's when the payload carries them (an omitted field
	// keeps the stored value), so the closed condition reads as cleared. Its
	// lastSeenAt becomes the later of its own value and the payload's
	// lastSeenAt (the time of receipt when omitted). Its updatedAt advances.
	// Every other field keeps the value it was recorded with, so
	// occurrenceCount does not grow. The answer is 200 with the closed event
	// (resolved)."
	closing := []struct {
		name     string
		js       string
		severity correlate.Severity
		desc     string
		lastSeen *time.Time
	}{
		{"severity and description become the payload's", `"severity":"success","description":"Connection to cluster prod-1 restored"`, correlate.SeveritySuccess, "Connection to cluster prod-1 restored", corrAt(time.Hour)},
		{"an omitted field keeps the stored value", `"description":"restored"`, correlate.SeverityError, "restored", corrAt(time.Hour)},
		{"an omitted severity and description keep both", `"occurrenceCount":9`, correlate.SeverityError, "down", corrAt(time.Hour)},
		{"lastSeenAt the later of its own value and the payload's lastSeenAt", `"lastSeenAt":"2026-03-01T15:00:00Z"`, correlate.SeverityError, "down", corrAt(3*time.Hour - 123456*time.Microsecond)},
		{"an earlier payload lastSeenAt keeps its own", `"lastSeenAt":"2026-03-01T00:00:00Z"`, correlate.SeverityError, "down", corrAt(0)},
		{"an explicit empty description is carried", `"description":""`, correlate.SeverityError, "", corrAt(time.Hour)},
	}
	for _, tt := range closing {
		t.Run(tt.name, func(t *testing.T) {
			f := newCorrFixture(t, newStore, correlate.Options{})
			opened, _ := f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck","severity":"error","description":"down"}`)
			f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck"}`)
			f.clock.Advance(time.Hour)
			js := `{"category":"c","action":"a","correlationKey":"ck","resolvedAt":"2026-03-01T12:30:00Z",` + tt.js + `}`
			got, d := f.create(corrAlice, js)
			diffCorrDisposition(t, correlate.Resolved, d)
			want := opened
			want.OccurrenceCount = corrN(2) // "occurrenceCount does not grow"
			// firstSeenAt: "A close keeps the stored time." (want keeps opened's.)
			want.ResolvedAt = corrAt(30*time.Minute - 123456*time.Microsecond)
			want.Severity, want.Description = tt.severity, tt.desc
			want.LastSeenAt = tt.lastSeen
			want.UpdatedAt = corrT0.Add(time.Hour)
			diffCorrEvent(t, "resolved event", want, got)
			diffCorrEvent(t, "stored event", got, f.get(corrAlice, opened.ID))
			if code := f.svc.StatusCode(corrPayload(t, js), d); code != 200 {
				t.Errorf("status = %d, want 200", code)
			}
		})
	}
	// "Otherwise the payload is recorded as a new event that is already
	// resolved (201, created), using the opening defaults: occurrenceCount is
	// the payload's, 1 when omitted, and firstSeenAt and lastSeenAt are the
	// payload's, else resolvedAt." A missing firstSeenAt takes the earliest
	// time given (lastSeenAt or resolvedAt), never one after lastSeenAt.
	inserts := []struct {
		name string
		js   string
		want correlate.Event
	}{
		{"defaults: count 1, firstSeenAt and lastSeenAt resolvedAt", `{}`,
			correlate.Event{OccurrenceCount: corrN(1), FirstSeenAt: corrAt(-time.Hour), LastSeenAt: corrAt(-time.Hour)}},
		{"the payload's count and times", `{"occurrenceCount":4,"firstSeenAt":"2026-03-01T09:00:00.000001Z","lastSeenAt":"2026-03-01T10:00:00Z"}`,
			correlate.Event{OccurrenceCount: corrN(4), FirstSeenAt: corrAt(-3*time.Hour - 123455*time.Microsecond), LastSeenAt: corrAt(-2*time.Hour - 123456*time.Microsecond)}},
		// firstSeenAt defaults to the earliest time given, so it never
		// lies after the lastSeenAt sent.
		{"lastSeenAt before resolvedAt sent, firstSeenAt defaults to lastSeenAt", `{"lastSeenAt":"2026-03-01T10:00:00Z"}`,
			correlate.Event{OccurrenceCount: corrN(1), FirstSeenAt: corrAt(-2*time.Hour - 123456*time.Microsecond), LastSeenAt: corrAt(-2*time.Hour - 123456*time.Microsecond)}},
		{"firstSeenAt sent, lastSeenAt else resolvedAt", `{"firstSeenAt":"2026-03-01T09:00:00Z"}`,
			correlate.Event{OccurrenceCount: corrN(1), FirstSeenAt: corrAt(-3*time.Hour - 123456*time.Microsecond), LastSeenAt: corrAt(-time.Hour)}},
	}
	for _, tt := range inserts {
		t.Run(tt.name, func(t *testing.T) {
			f := newCorrFixture(t, newStore, correlate.Options{})
			// A resolved event and another key's open event do not match.
			f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck"}`)
			f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck","resolvedAt":"2026-03-01T11:00:00.123456Z"}`)
			f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"other"}`)
			js := `{"category":"c","action":"a","correlationKey":"ck","severity":"success","resolvedAt":"2026-03-01T11:00:00.123456Z",` + strings.TrimPrefix(tt.js, "{")
			js = strings.Replace(js, ",}", "}", 1)
			got, d := f.create(corrAlice, js)
			diffCorrDisposition(t, correlate.Created, d)
			want := tt.want
			want.Category, want.Action, want.CorrelationKey, want.Severity = "c", "a", "ck", correlate.SeveritySuccess
			want.ResolvedAt = corrAt(-time.Hour)
			want.CreatedAt, want.UpdatedAt = corrT0, corrT0
			diffCorrEvent(t, "already-resolved event", corrEvent(corrAlice, want), got)
		})
	}
	t.Run("Once closed, the next occurrence opens a new condition with a new event and a new firstSeenAt", func(t *testing.T) {
		f := newCorrFixture(t, newStore, correlate.Options{})
		var got []correlate.Disposition
		first, d := f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck"}`)
		got = append(got, d)
		f.clock.Advance(time.Minute)
		_, d = f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck"}`)
		got = append(got, d)
		f.clock.Advance(time.Minute)
		_, d = f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck","resolvedAt":"2026-03-01T12:02:00Z"}`)
		got = append(got, d)
		f.clock.Advance(time.Minute)
		second, d := f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck"}`)
		got = append(got, d)
		want := []correlate.Disposition{correlate.Created, correlate.Incremented, correlate.Resolved, correlate.Created}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("dispositions (-want +got):\n%s", diff)
		}
		if second.ID == first.ID || !second.FirstSeenAt.Equal(corrT0.Add(3*time.Minute)) || *second.OccurrenceCount != 1 {
			t.Errorf("reopened event = %+v, want a new event first seen at %v with count 1", second, corrT0.Add(3*time.Minute))
		}
	})
}

func testCorrelateBinding(t *testing.T, newStore func(t *testing.T) correlate.Store) {
	// "When the create also carried an idempotencyKey, that key is bound to
	// the event step 2, 3 or 4 recorded, incremented or resolved. A retry
	// then answers 200 with that event and changes nothing."
	for _, tt := range []struct {
		name, js string
		want     correlate.Disposition
	}{
		{"bound to the event step 2 recorded", `{"category":"c","action":"a","idempotencyKey":"k"}`, correlate.Created},
		{"bound to the event step 3 incremented", `{"category":"c","action":"a","correlationKey":"ck","idempotencyKey":"k"}`, correlate.Incremented},
		{"bound to the event step 4 resolved", `{"category":"c","action":"a","correlationKey":"ck","resolvedAt":"2026-03-01T12:00:00Z","idempotencyKey":"k"}`, correlate.Resolved},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newCorrFixture(t, newStore, correlate.Options{})
			f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck"}`)
			effect, d := f.create(corrAlice, tt.js)
			diffCorrDisposition(t, tt.want, d)
			before := f.list(corrAlice, correlate.Query{Order: correlate.OrderAsc})
			f.clock.Advance(time.Minute)
			replay, d := f.create(corrAlice, tt.js)
			diffCorrDisposition(t, correlate.Replayed, d)
			diffCorrEvent(t, "replayed event", effect, replay)
			if replay.ID != effect.ID {
				t.Errorf("replayed %s, want %s", replay.ID, effect.ID)
			}
			after := f.list(corrAlice, correlate.Query{Order: correlate.OrderAsc})
			if diff := cmp.Diff(before, after); diff != "" {
				t.Errorf("a retry changed the events (-before +after):\n%s", diff)
			}
		})
	}
}

func testCorrelateScope(t *testing.T, newStore func(t *testing.T) correlate.Store) {
	// "Correlation is scoped like idempotencyKey: to the authenticated
	// caller's organization and user, never to the client-settable owner."
	t.Run("never to the client-settable owner", func(t *testing.T) {
		f := newCorrFixture(t, newStore, correlate.Options{})
		f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck","owner":"o1"}`)
		_, d := f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck","owner":"o2"}`)
		diffCorrDisposition(t, correlate.Incremented, d)
		f.create(corrAlice, `{"category":"c","action":"a","idempotencyKey":"k","owner":"o1"}`)
		_, d = f.create(corrAlice, `{"category":"c","action":"a","idempotencyKey":"k","owner":"o2"}`)
		diffCorrDisposition(t, correlate.Replayed, d)
	})
	for _, other := range []correlate.Caller{corrBob, corrMallory, corrPublic} {
		t.Run(fmt.Sprintf("to the caller's organization and user: %+v", other), func(t *testing.T) {
			f := newCorrFixture(t, newStore, correlate.Options{})
			mine, _ := f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck","idempotencyKey":"k"}`)
			_, d := f.create(other, `{"category":"c","action":"a","correlationKey":"ck","resolvedAt":"2026-03-01T12:00:00Z"}`)
			diffCorrDisposition(t, correlate.Created, d)
			_, d = f.create(other, `{"category":"c","action":"a","correlationKey":"ck","idempotencyKey":"k"}`)
			diffCorrDisposition(t, correlate.Created, d)
			diffCorrEvent(t, "alice's event", mine, f.get(corrAlice, mine.ID))
			if _, err := f.svc.Get(context.Background(), other, mine.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Get of another scope's event: error %v, want store.ErrNotFound", err)
			}
			if _, err := f.svc.SetStatus(context.Background(), other, mine.ID, correlate.StatusRead); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("SetStatus of another scope's event: error %v, want store.ErrNotFound", err)
			}
			if _, err := f.svc.Delete(context.Background(), other, mine.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Delete of another scope's event: error %v, want store.ErrNotFound", err)
			}
			for _, e := range f.list(other, correlate.Query{}).Data {
				if e.ID == mine.ID {
					t.Errorf("List of %+v shows alice's event", other)
				}
			}
			diffCorrEvent(t, "alice's event after the others' calls", mine, f.get(corrAlice, mine.ID))
		})
	}
	// docs/decisions.md, Who reads correlated events: "an events caller reads its
	// own (organization, user); a read credential of an organization reads
	// every event of that organization."
	t.Run("a reader of the organization lists every user's events, and only those", func(t *testing.T) {
		f := newCorrFixture(t, newStore, correlate.Options{})
		var want []string
		for _, c := range []correlate.Caller{corrAlice, corrBob, corrPublic} {
			e, _ := f.create(c, `{"category":"c","action":"a","correlationKey":"ck"}`)
			want = append(want, e.ID)
			f.clock.Advance(time.Second)
		}
		f.create(corrMallory, `{"category":"c","action":"a","correlationKey":"ck"}`)
		gone, _ := f.create(corrBob, `{"category":"c","action":"a"}`)
		if _, err := f.svc.Delete(context.Background(), corrBob, gone.ID); err != nil {
			t.Fatal(err)
		}
		for _, reader := range []correlate.Caller{
			{Organization: "org-1", AllUsers: true},
			{Organization: "org-1", User: "alice", AllUsers: true},
		} {
			page := f.list(reader, correlate.Query{Order: correlate.OrderAsc})
			var got []string
			for _, e := range page.Data {
				got = append(got, e.ID)
			}
			if diff := cmp.Diff(want, got); diff != "" || page.TotalCount != 3 {
				t.Errorf("List(%+v): totalCount %d, events (-want +got):\n%s", reader, page.TotalCount, diff)
			}
			if _, err := f.svc.Get(context.Background(), reader, want[1]); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Get(%+v) of bob's event: error %v, want store.ErrNotFound (only List widens)", reader, err)
			}
		}
		if p := f.list(corrAlice, correlate.Query{}); p.TotalCount != 1 {
			t.Errorf("List(alice) without AllUsers: totalCount %d, want 1", p.TotalCount)
		}
	})
}

func testCorrelateFields(t *testing.T, newStore func(t *testing.T) correlate.Store) {
	t.Run("severity when omitted is informational", func(t *testing.T) {
		f := newCorrFixture(t, newStore, correlate.Options{})
		got, _ := f.create(corrAlice, `{"category":"c","action":"a"}`)
		if got.Severity != correlate.SeverityInformational {
			t.Errorf("severity = %q, want informational", got.Severity)
		}
	})
	t.Run("every field round-trips through the store", func(t *testing.T) {
		f := newCorrFixture(t, newStore, correlate.Options{})
		js := `{"owner":"o","systemId":"s","actedUpon":"u","operationId":"op","category":"c","action":"a","severity":"warning","description":"d ✓","metadata":{"n": 1.50, "z":[true,null], "nul":"\u0000\u00e9"},"correlationKey":"meshery-server/k8s-connection/5b0b/unreachable","source":"meshery-server","type":"io.meshery.user.signup","specversion":"1.0","traceId":"4bf92f3577b34da6a3ce929d0e0e4736","parentId":"00f067aa0ba902b7","x-extra":{"a": [1, 2.0]},"Category":"mis-cased"}`
		got, _ := f.create(corrAlice, js)
		want := corrEvent(corrAlice, correlate.Event{Owner: "o", SystemID: "s", ActedUpon: "u", OperationID: "op", Category: "c", Action: "a",
			Severity: correlate.SeverityWarning, Description: "d ✓", Metadata: jsontext.Value(`{"n": 1.50, "z":[true,null], "nul":"\u0000\u00e9"}`), // byte for byte as sent (docs/decisions.md, Faithfulness)
			CreatedAt: corrT0, UpdatedAt: corrT0, CorrelationKey: "meshery-server/k8s-connection/5b0b/unreachable", OccurrenceCount: corrN(1),
			FirstSeenAt: corrAt(0), LastSeenAt: corrAt(0), Source: "meshery-server", Type: "io.meshery.user.signup", Specversion: "1.0",
			TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", ParentID: "00f067aa0ba902b7",
			Extra: map[string]jsontext.Value{"x-extra": jsontext.Value(`{"a": [1, 2.0]}`), "Category": jsontext.Value(`"mis-cased"`)}})
		diffCorrEvent(t, "created event", want, got)
		diffCorrEvent(t, "stored event", want, f.get(corrAlice, got.ID))
		// Further members are kept in the row but "do not return them at the
		// top level of an event (the listed event shape is closed)".
		b, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		var members map[string]jsontext.Value
		if err := json.Unmarshal(b, &members); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"x-extra", "Category", "organization", "user"} {
			if _, ok := members[name]; ok {
				t.Errorf("event JSON has member %q: %s", name, b)
			}
		}
	})
	t.Run("Times are stored in UTC with microsecond precision", func(t *testing.T) {
		f := newCorrFixture(t, newStore, correlate.Options{})
		p := correlate.Payload{Category: "c", Action: "a", CorrelationKey: "ck",
			FirstSeenAt: new(time.Date(2026, 1, 1, 1, 0, 0, 999, time.FixedZone("x", 3600)))}
		got, _, err := f.svc.Create(context.Background(), corrAlice, p)
		if err != nil {
			t.Fatal(err)
		}
		want := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		if !got.FirstSeenAt.Equal(want) || !got.CreatedAt.Equal(corrT0) {
			t.Errorf("firstSeenAt %v createdAt %v, want %v and %v", got.FirstSeenAt, got.CreatedAt, want, corrT0)
		}
		if stored := f.get(corrAlice, got.ID); !stored.FirstSeenAt.Equal(want) || !stored.CreatedAt.Equal(corrT0) {
			t.Errorf("stored firstSeenAt %v createdAt %v, want %v and %v", stored.FirstSeenAt, stored.CreatedAt, want, corrT0)
		}
	})
	t.Run("a refused create records nothing and lists every problem", func(t *testing.T) {
		f := newCorrFixture(t, newStore, correlate.Options{})
		p := correlate.Payload{Action: "a", TraceID: "00000000000000000000000000000000", ParentID: "ABCDEF0123456789",
			Specversion: "2.0", OccurrenceCount: corrN(0), Severity: "fatal"}
		_, _, err := f.svc.Create(context.Background(), corrAlice, p)
		var ve *event.ValidationError
		if !errors.As(err, &ve) || !errors.Is(err, event.ErrInvalid) {
			t.Fatalf("error %v, want a *ValidationError matching ErrInvalid", err)
		}
		var got []string
		for _, p := range ve.Problems {
			got = append(got, p.Member+" "+p.Rule)
		}
		want := []string{"/category required", "/severity enum", "/occurrenceCount minimum", "/specversion enum", "/traceId format", "/parentId format"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("problems (-want +got):\n%s", diff)
		}
		if p := f.list(corrAlice, correlate.Query{}); p.TotalCount != 0 {
			t.Errorf("a refused create recorded %d events", p.TotalCount)
		}
		if _, _, err := f.svc.Create(context.Background(), correlate.Caller{User: "x"}, corrPayload(t, `{"category":"c","action":"a"}`)); !errors.Is(err, correlate.ErrNoOrganization) {
			t.Errorf("Create without organization: %v, want ErrNoOrganization", err)
		}
	})
	// X1: a caller PostgreSQL cannot store (NUL, invalid UTF-8) made
	// pgstore fail with SQLSTATE 22021 (a 500 in tallyd, for a credentials
	// file naming such an organization) while memstore stored it: both
	// stores now refuse it alike, before any write.
	t.Run("a caller with NUL or invalid UTF-8 is refused by every operation, nothing written", func(t *testing.T) {
		f := newCorrFixture(t, newStore, correlate.Options{})
		ctx := context.Background()
		p := corrPayload(t, `{"category":"c","action":"a","correlationKey":"k"}`)
		for _, c := range []struct {
			name   string
			caller correlate.Caller
		}{
			{"NUL in organization", correlate.Caller{Organization: "org\x00", User: "alice"}},
			{"invalid UTF-8 in organization", correlate.Caller{Organization: "org\xff", User: "alice"}},
			{"NUL in user", correlate.Caller{Organization: "org-1", User: "al\x00ice"}},
			{"invalid UTF-8 in user", correlate.Caller{Organization: "org-1", User: "al\xffice"}},
		} {
			got := map[string]bool{}
			_, _, err := f.svc.Create(ctx, c.caller, p)
			got["Create"] = errors.Is(err, correlate.ErrInvalidCaller)
			_, err = f.svc.Get(ctx, c.caller, "x")
			got["Get"] = errors.Is(err, correlate.ErrInvalidCaller)
			_, err = f.svc.List(ctx, c.caller, correlate.Query{})
			got["List"] = errors.Is(err, correlate.ErrInvalidCaller)
			_, err = f.svc.SetStatus(ctx, c.caller, "x", correlate.StatusRead)
			got["SetStatus"] = errors.Is(err, correlate.ErrInvalidCaller)
			_, err = f.svc.Delete(ctx, c.caller, "x")
			got["Delete"] = errors.Is(err, correlate.ErrInvalidCaller)
			want := map[string]bool{"Create": true, "Get": true, "List": true, "SetStatus": true, "Delete": true}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: operations returning ErrInvalidCaller (-want +got):\n%s", c.name, diff)
			}
		}
		if p := f.list(correlate.Caller{Organization: "org-1", AllUsers: true}, correlate.Query{}); p.TotalCount != 0 {
			t.Errorf("refused callers recorded %d events", p.TotalCount)
		}
	})
}

// testCorrelateCancelled: a create whose context is cancelled fails and
// leaves no trace (memstore: "a failure, including a cancelled context,
// leaves no trace of it"; pgstore: the transaction never commits).
func testCorrelateCancelled(t *testing.T, newStore func(t *testing.T) correlate.Store) {
	f := newCorrFixture(t, newStore, correlate.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := corrPayload(t, `{"category":"c","action":"a","correlationKey":"ck","idempotencyKey":"k"}`)
	if _, _, err := f.svc.Create(ctx, corrAlice, p); !errors.Is(err, context.Canceled) {
		t.Fatalf("Create with a cancelled context: %v, want context.Canceled", err)
	}
	if page := f.list(corrAlice, correlate.Query{}); page.TotalCount != 0 {
		t.Errorf("a cancelled create recorded %d events", page.TotalCount)
	}
	_, d := f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck","idempotencyKey":"k"}`)
	diffCorrDisposition(t, correlate.Created, d) // the key was not bound
}

func testCorrelateStatusCode(t *testing.T, newStore func(t *testing.T) correlate.Store) {
	// "A server MAY instead answer a legacy create, one carrying neither
	// correlationKey nor idempotencyKey, with 200 and Event-Disposition:
	// created". docs/decisions.md: "201 by default; 200 behind an option".
	for _, tt := range []struct {
		name   string
		legacy bool
		js     string
		want   int
	}{
		{"legacy create, default", false, `{"category":"c","action":"a"}`, 201},
		{"legacy create, option on", true, `{"category":"c","action":"a"}`, 200},
		{"with idempotencyKey, option on", true, `{"category":"c","action":"a","idempotencyKey":"k"}`, 201},
		{"with correlationKey, option on", true, `{"category":"c","action":"a","correlationKey":"k"}`, 201},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newCorrFixture(t, newStore, correlate.Options{LegacyCreate200: tt.legacy})
			p := corrPayload(t, tt.js)
			_, d, err := f.svc.Create(context.Background(), corrAlice, p)
			if err != nil {
				t.Fatal(err)
			}
			diffCorrDisposition(t, correlate.Created, d)
			if got := f.svc.StatusCode(p, d); got != tt.want {
				t.Errorf("StatusCode = %d, want %d", got, tt.want)
			}
		})
	}
}

func testCorrelateList(t *testing.T, newStore func(t *testing.T) correlate.Store) {
	f := newCorrFixture(t, newStore, correlate.Options{})
	ids := map[string]string{}
	add := func(name, js string) {
		e, _ := f.create(corrAlice, js)
		ids[name] = e.ID
		f.clock.Advance(time.Second)
	}
	add("a", `{"category":"connection","action":"connect","severity":"error","description":"Cluster prod-1 UNREACHABLE","correlationKey":"k1"}`)
	add("b", `{"category":"connection","action":"connect","severity":"critical","description":"cluster prod-2 unreachable","correlationKey":"k2"}`)
	add("c", `{"category":"design","action":"deploy","description":"deployed 100% of it_"}`)
	add("d", `{"category":"connection","action":"disconnect","severity":"success","description":"restored","correlationKey":"k3","resolvedAt":"2026-03-01T12:00:00Z"}`)
	add("e", `{"category":"design","action":"deploy","description":"deployed"}`)
	f.create(corrBob, `{"category":"connection","action":"connect","description":"bob's"}`)
	f.create(corrMallory, `{"category":"connection","action":"connect","description":"other org"}`)
	del, _ := f.create(corrAlice, `{"category":"connection","action":"connect","description":"deleted"}`)
	if _, err := f.svc.Delete(context.Background(), corrAlice, del.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.SetStatus(context.Background(), corrAlice, ids["e"], correlate.StatusRead); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		q     correlate.Query
		want  []string
		total int64
	}{
		{"default order is newest first; deleted events are excluded", correlate.Query{}, []string{"e", "d", "c", "b", "a"}, 5},
		{"order asc", correlate.Query{Order: correlate.OrderAsc}, []string{"a", "b", "c", "d", "e"}, 5},
		{"page and pageSize", correlate.Query{Order: correlate.OrderAsc, Page: 1, PageSize: 2}, []string{"c", "d"}, 5},
		{"a page past the end is empty", correlate.Query{Page: 3, PageSize: 2}, []string{}, 5},
		{"category", correlate.Query{Category: []string{"design"}}, []string{"e", "c"}, 2},
		{"action", correlate.Query{Action: []string{"disconnect", "deploy"}}, []string{"e", "d", "c"}, 3},
		{"severity", correlate.Query{Severity: []correlate.Severity{correlate.SeverityError, correlate.SeverityCritical}}, []string{"b", "a"}, 2},
		{"status", correlate.Query{Status: []correlate.Status{correlate.StatusRead}}, []string{"e"}, 1},
		{"open", correlate.Query{Resolved: new(false), Category: []string{"connection"}}, []string{"b", "a"}, 2},
		{"resolved", correlate.Query{Resolved: new(true)}, []string{"d"}, 1},
		{"correlationKey", correlate.Query{CorrelationKey: "k1"}, []string{"a"}, 1},
		{"search ignores case", correlate.Query{Search: "unreachable"}, []string{"b", "a"}, 2},
		{"search takes % and _ literally", correlate.Query{Search: "100% of it_"}, []string{"c"}, 1},
		{"search with no match", correlate.Query{Search: "nothing"}, []string{}, 0},
		// the existing-clients rules, getEvents: "sort (on the fields the schema lists)",
		// then createdAt and id in the same order; text byte by byte.
		{"sort category asc", correlate.Query{Sort: correlate.SortCategory, Order: correlate.OrderAsc}, []string{"a", "b", "d", "c", "e"}, 5},
		{"sort category desc", correlate.Query{Sort: correlate.SortCategory}, []string{"e", "c", "d", "b", "a"}, 5},
		{"sort severity asc", correlate.Query{Sort: correlate.SortSeverity, Order: correlate.OrderAsc}, []string{"b", "a", "c", "e", "d"}, 5},
		{"sort description asc, upper case first", correlate.Query{Sort: correlate.SortDescription, Order: correlate.OrderAsc}, []string{"a", "b", "e", "c", "d"}, 5},
		{"sort status asc", correlate.Query{Sort: correlate.SortStatus, Order: correlate.OrderAsc}, []string{"e", "a", "b", "c", "d"}, 5},
		{"sort updatedAt desc", correlate.Query{Sort: correlate.SortUpdatedAt}, []string{"e", "d", "c", "b", "a"}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page := f.list(corrAlice, tt.q)
			got := []string{}
			for _, e := range page.Data {
				name := "?"
				for k, id := range ids {
					if id == e.ID {
						name = k
					}
				}
				got = append(got, name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if page.TotalCount != tt.total {
				t.Errorf("totalCount = %d, want %d", page.TotalCount, tt.total)
			}
			wantSize := tt.q.PageSize
			if wantSize == 0 {
				wantSize = correlate.DefaultPageSize
			}
			if page.Page != tt.q.Page || page.PageSize != wantSize {
				t.Errorf("page %d size %d, want %d and %d", page.Page, page.PageSize, tt.q.Page, wantSize)
			}
		})
	}
	// the existing-clients rules, getEvents: "an EventsPage that carries readCount and
	// countBySeverityLevel, which the UI's summary reads"; readCount
	// ignores the status filter (correlate.Listing).
	for _, tt := range []struct {
		name       string
		q          correlate.Query
		total      int64
		read       int64
		bySeverity []correlate.SeverityCount
	}{
		{"every event", correlate.Query{}, 5, 1, []correlate.SeverityCount{{Severity: "critical", Count: 1}, {Severity: "error", Count: 1}, {Severity: "informational", Count: 2}, {Severity: "success", Count: 1}}},
		{"unread: read counts ignore the status filter", correlate.Query{Status: []correlate.Status{correlate.StatusUnread}, PageSize: 1},
			4, 1, []correlate.SeverityCount{{Severity: "critical", Count: 1}, {Severity: "error", Count: 1}, {Severity: "informational", Count: 1}, {Severity: "success", Count: 1}}},
		{"category", correlate.Query{Category: []string{"design"}}, 2, 1, []correlate.SeverityCount{{Severity: "informational", Count: 2}}},
		{"nothing matches", correlate.Query{Search: "nothing"}, 0, 0, []correlate.SeverityCount{}},
	} {
		t.Run("counts: "+tt.name, func(t *testing.T) {
			p := f.list(corrAlice, tt.q)
			if diff := cmp.Diff(tt.bySeverity, p.CountBySeverityLevel); diff != "" || p.TotalCount != tt.total || p.ReadCount != tt.read {
				t.Errorf("totalCount %d readCount %d, want %d and %d; countBySeverityLevel (-want +got):\n%s", p.TotalCount, p.ReadCount, tt.total, tt.read, diff)
			}
		})
	}
	t.Run("a bad query lists every problem", func(t *testing.T) {
		_, err := f.svc.List(context.Background(), corrAlice, correlate.Query{Page: -1, PageSize: 1000, Order: "up", Sort: "firstName",
			Severity: []correlate.Severity{"x"}, Status: []correlate.Status{"archived"}, Search: "a\x00", Category: []string{"\xff"}})
		var ve *event.ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) != 8 {
			t.Errorf("error %v, want a ValidationError with 8 problems", err)
		}
		if _, err := f.svc.List(context.Background(), corrAlice, correlate.Query{Page: correlate.MaxPage + 1}); !errors.Is(err, event.ErrInvalid) {
			t.Errorf("List(page beyond MaxPage): %v, want ErrInvalid", err)
		}
		if p := f.list(corrAlice, correlate.Query{Page: correlate.MaxPage, PageSize: correlate.MaxPageSize}); len(p.Data) != 0 || p.TotalCount != 5 {
			t.Errorf("the last page: %d events of %d, want 0 of 5", len(p.Data), p.TotalCount)
		}
	})
}

func testCorrelateReadWrite(t *testing.T, newStore func(t *testing.T) correlate.Store) {
	f := newCorrFixture(t, newStore, correlate.Options{})
	e, _ := f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck","idempotencyKey":"k"}`)
	ctx := context.Background()
	f.clock.Advance(time.Minute)
	t.Run("status update", func(t *testing.T) {
		got, err := f.svc.SetStatus(ctx, corrAlice, strings.ToUpper(e.ID), correlate.StatusRead)
		if err != nil {
			t.Fatal(err)
		}
		want := e
		want.Status, want.UpdatedAt = correlate.StatusRead, corrT0.Add(time.Minute)
		diffCorrEvent(t, "updated event", want, got)
		diffCorrEvent(t, "stored event", want, f.get(corrAlice, e.ID))
		if _, err := f.svc.SetStatus(ctx, corrAlice, e.ID, "archived"); !errors.Is(err, event.ErrInvalid) {
			t.Errorf("SetStatus(archived): %v, want ErrInvalid", err)
		}
	})
	t.Run("unknown and malformed ids are not found", func(t *testing.T) {
		for _, id := range []string{"not-a-uuid", "0190c1d2-0000-7000-8000-000000000000"} {
			if _, err := f.svc.Get(ctx, corrAlice, id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Get(%s): %v, want store.ErrNotFound", id, err)
			}
		}
	})
	t.Run("soft delete", func(t *testing.T) {
		f.clock.Advance(time.Minute)
		got, err := f.svc.Delete(ctx, corrAlice, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.DeletedAt == nil || !got.DeletedAt.Equal(corrT0.Add(2*time.Minute)) {
			t.Errorf("deletedAt = %v, want %v", got.DeletedAt, corrT0.Add(2*time.Minute))
		}
		if _, err := f.svc.Get(ctx, corrAlice, e.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get of a deleted event: %v, want store.ErrNotFound", err)
		}
		if _, err := f.svc.Delete(ctx, corrAlice, e.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("second Delete: %v, want store.ErrNotFound", err)
		}
		// A key bound to a deleted event still replays it, as it is now.
		replay, d := f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck","idempotencyKey":"k"}`)
		diffCorrDisposition(t, correlate.Replayed, d)
		diffCorrEvent(t, "replayed deleted event", got, replay)
		// A deleted event is no longer the open event of its key.
		next, d := f.create(corrAlice, `{"category":"c","action":"a","correlationKey":"ck"}`)
		diffCorrDisposition(t, correlate.Created, d)
		if next.ID == e.ID {
			t.Errorf("an occurrence counted on a deleted event")
		}
	})
}

// runCorrelateConcurrency proves the concurrency claims of
// event-correlation.md (Scope and invariant) and docs/decisions.md. newStores
// returns two handles on one fresh, empty database (for PostgreSQL, two
// pools), or the same store twice; the tests create through two Services,
// one on each.
func runCorrelateConcurrency(t *testing.T, newStores func(t *testing.T) (correlate.Store, correlate.Store)) {
	two := func(t *testing.T) (*correlateFixture, [2]*correlate.Service) {
		a, b := newStores(t)
		f := newCorrFixtureOn(t, a, correlate.Options{})
		s2, err := correlate.New(b, correlate.Options{Now: f.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		return f, [2]*correlate.Service{f.svc, s2}
	}
	t.Run("64 concurrent first occurrences of one key: one created, 63 incremented, count 64", func(t *testing.T) {
		// "so two concurrent first occurrences cannot both open the condition"
		f, svcs := two(t)
		got := corrConcurrently(t, 64, func(i int) (correlate.Event, correlate.Disposition, error) {
			return svcs[i%2].Create(context.Background(), corrAlice, correlate.Payload{Category: "c", Action: "a", CorrelationKey: "hot"})
		})
		want := map[correlate.Disposition]int{correlate.Created: 1, correlate.Incremented: 63}
		if diff := cmp.Diff(want, got.dispositions); diff != "" {
			t.Errorf("dispositions (-want +got):\n%s", diff)
		}
		p := f.list(corrAlice, correlate.Query{})
		if p.TotalCount != 1 || *p.Data[0].OccurrenceCount != 64 {
			t.Errorf("%d events, first %+v; want one event with count 64", p.TotalCount, p.Data)
		}
	})
	t.Run("16 concurrent creates with one idempotency key: one effect, 15 replayed", func(t *testing.T) {
		// docs/decisions.md: "Two creates with one idempotencyKey in flight:
		// Exactly one effect; the other waits for it and replays."
		f, svcs := two(t)
		got := corrConcurrently(t, 16, func(i int) (correlate.Event, correlate.Disposition, error) {
			return svcs[i%2].Create(context.Background(), corrAlice, correlate.Payload{Category: "c", Action: "a", CorrelationKey: "ck", IdempotencyKey: "once"})
		})
		want := map[correlate.Disposition]int{correlate.Created: 1, correlate.Replayed: 15}
		if diff := cmp.Diff(want, got.dispositions); diff != "" {
			t.Errorf("dispositions (-want +got):\n%s", diff)
		}
		p := f.list(corrAlice, correlate.Query{})
		if p.TotalCount != 1 || *p.Data[0].OccurrenceCount != 1 || len(got.ids) != 1 {
			t.Errorf("%d events (%d ids answered), first %+v; want one event with count 1", p.TotalCount, len(got.ids), p.Data)
		}
	})
	t.Run("occurrences racing resolutions: never two open events, no occurrence lost", func(t *testing.T) {
		f, svcs := two(t)
		const occurrences, resolutions = 48, 16
		got := corrConcurrently(t, occurrences+resolutions, func(i int) (correlate.Event, correlate.Disposition, error) {
			p := correlate.Payload{Category: "c", Action: "a", CorrelationKey: "race"}
			if i%4 == 3 {
				p.ResolvedAt = new(correlateT0)
				p.OccurrenceCount = corrN(1000) // a resolution of an open event never adds it
			}
			return svcs[i%2].Create(context.Background(), corrAlice, p)
		})
		var all []correlate.Event
		for page := 0; ; page++ {
			p := f.list(corrAlice, correlate.Query{Page: page, PageSize: correlate.MaxPageSize})
			all = append(all, p.Data...)
			if len(p.Data) < correlate.MaxPageSize {
				break
			}
		}
		open, counted := 0, int64(0)
		for _, e := range all {
			if e.ResolvedAt == nil {
				open++
			}
			if e.OccurrenceCount != nil && *e.OccurrenceCount < 1000 {
				counted += *e.OccurrenceCount
			}
		}
		if open > 1 {
			t.Errorf("%d open events, want at most 1", open)
		}
		// Every occurrence is counted on exactly one event; an
		// already-resolved insert carries its own count of 1000.
		if counted != occurrences {
			t.Errorf("occurrences counted = %d, want %d (dispositions %v)", counted, occurrences, got.dispositions)
		}
		if got.dispositions[correlate.Resolved]+got.dispositions[correlate.Created]+got.dispositions[correlate.Incremented] != occurrences+resolutions {
			t.Errorf("dispositions %v do not add up to %d", got.dispositions, occurrences+resolutions)
		}
	})
}

type corrConcurrentResult struct {
	dispositions map[correlate.Disposition]int
	ids          map[string]bool
}

// corrConcurrently runs fn in n goroutines released at once and collects the
// dispositions; any error fails the test.
func corrConcurrently(t *testing.T, n int, fn func(i int) (correlate.Event, correlate.Disposition, error)) corrConcurrentResult {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		start = make(chan struct{})
		res   = corrConcurrentResult{dispositions: map[correlate.Disposition]int{}, ids: map[string]bool{}}
		errs  []error
	)
	for i := range n {
		wg.Go(func() {
			<-start
			e, d, err := fn(i)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			res.dispositions[d]++
			res.ids[e.ID] = true
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("%d of %d creates failed: %v", len(errs), n, err)
	}
	return res
}

// the existing-clients rules: bulkUpdateEventStatus, bulkDeleteEvents and getEventTypes of
// @meshery/schemas v1beta3, scoped to the caller as one event's status
// update and delete are.
func testCorrelateBulkAndTypes(t *testing.T, newStore func(t *testing.T) correlate.Store) {
	f := newCorrFixture(t, newStore, correlate.Options{})
	ctx := context.Background()
	a, _ := f.create(corrAlice, `{"category":"istio","action":"deploy"}`)
	b, _ := f.create(corrAlice, `{"category":"connection","action":"connect","correlationKey":"k"}`)
	c, _ := f.create(corrAlice, `{"category":"istio","action":"deploy"}`)
	bob, _ := f.create(corrBob, `{"category":"bob","action":"x"}`)
	f.clock.Advance(time.Second)
	missing := "00000000-0000-4000-8000-000000000000"
	got, err := f.svc.SetStatuses(ctx, corrAlice, []string{c.ID, strings.ToUpper(a.ID), bob.ID, missing, c.ID}, correlate.StatusRead)
	if diff := cmp.Diff([]string{c.ID, a.ID}, got); err != nil || diff != "" {
		t.Errorf("SetStatuses: %v; updated (-want +got):\n%s", err, diff)
	}
	if e := f.get(corrAlice, a.ID); e.Status != correlate.StatusRead || !e.UpdatedAt.After(a.UpdatedAt) {
		t.Errorf("after SetStatuses: status %s updatedAt %v", e.Status, e.UpdatedAt)
	}
	if e := f.get(corrBob, bob.ID); e.Status != correlate.StatusUnread {
		t.Errorf("another user's event changed: %s", e.Status)
	}
	types, err := f.svc.Types(ctx, corrAlice, 0, 0)
	want := []correlate.EventType{{Category: "connection", Action: "connect"}, {Category: "istio", Action: "deploy"}}
	if diff := cmp.Diff(want, types); err != nil || diff != "" {
		t.Errorf("Types: %v (-want +got):\n%s", err, diff)
	}
	if types, _ := f.svc.Types(ctx, corrAlice, 1, 1); len(types) != 1 || types[0].Category != "istio" {
		t.Errorf("Types page 1 of size 1: %v", types)
	}
	got, err = f.svc.DeleteMany(ctx, corrAlice, []string{b.ID, bob.ID, c.ID})
	if diff := cmp.Diff([]string{b.ID, c.ID}, got); err != nil || diff != "" {
		t.Errorf("DeleteMany: %v; deleted (-want +got):\n%s", err, diff)
	}
	if p := f.list(corrAlice, correlate.Query{}); p.TotalCount != 1 || p.Data[0].ID != a.ID {
		t.Errorf("after DeleteMany alice lists %d events", p.TotalCount)
	}
	// The deleted open event no longer counts as open: the key opens anew.
	if _, d := f.create(corrAlice, `{"category":"connection","action":"connect","correlationKey":"k"}`); d != correlate.Created {
		t.Errorf("an occurrence after the bulk delete: %s, want created", d)
	}
	if got, err := f.svc.DeleteMany(ctx, corrAlice, []string{b.ID}); err != nil || len(got) != 0 {
		t.Errorf("deleting again: %v %v, want none", got, err)
	}
	types, _ = f.svc.Types(ctx, corrAlice, 0, 0)
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("Types after delete (-want +got):\n%s", diff)
	}
	for _, tt := range []struct {
		name string
		ids  []string
		want []string
	}{
		{"no ids", nil, []string{"/ids"}},
		{"not a UUID", []string{a.ID, "nope"}, []string{"/ids/1"}},
		{"too many", make([]string, correlate.MaxBulkIDs+1), []string{"/ids"}},
	} {
		_, err := f.svc.DeleteMany(ctx, corrAlice, tt.ids)
		var ve *event.ValidationError
		var members []string
		if errors.As(err, &ve) {
			for _, p := range ve.Problems {
				members = append(members, p.Member)
			}
		}
		if diff := cmp.Diff(tt.want, members); diff != "" {
			t.Errorf("%s: %v (-want +got):\n%s", tt.name, err, diff)
		}
	}
	if _, err := f.svc.SetStatuses(ctx, corrAlice, []string{a.ID}, "archived"); !errors.Is(err, event.ErrInvalid) {
		t.Errorf("SetStatuses(archived): %v, want ErrInvalid", err)
	}
}
