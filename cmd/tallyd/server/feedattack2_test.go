package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/pgtest"
	"github.com/tallyhq/tally/store/pgstore"
)

var attackStores = map[string]func(t *testing.T) Store{
	"memstore": func(t *testing.T) Store { return memStore(t) },
	"pgstore":  func(t *testing.T) Store { return pgStore(pgtest.DB(t, pgstore.Options{})) },
}

type corrPage struct {
	Items []struct {
		Position string          `json:"position"`
		Kind     string          `json:"kind"`
		Event    json.RawMessage `json:"event"`
	} `json:"items"`
	NextCursor string `json:"next_cursor"`
	CaughtUp   bool   `json:"caught_up"`
}

// followAll reads the correlated feed from the start in pages of limit.
func (a *atk) followAll(tok string, limit int) corrPage {
	a.t.Helper()
	var all corrPage
	after := ""
	for range 1000 {
		code, _, b := a.do("GET", fmt.Sprintf("/api/events/feed?limit=%d&after=%s", limit, url.QueryEscape(after)), tok, "", nil)
		var p corrPage
		if err := json.Unmarshal(b, &p); code != 200 || err != nil {
			a.t.Fatalf("feed: %d %s", code, b)
		}
		all.Items = append(all.Items, p.Items...)
		after = p.NextCursor
		if p.CaughtUp {
			return all
		}
	}
	a.t.Fatal("the feed never caught up")
	return all
}

// The correlated feed is scoped as getEvents: each credential sees exactly
// the events getEvents lists for it, across page boundaries with no
// duplicate, and each item's event is byte for byte what getEvents answers.
func TestFeedAttackCorrelatedScope(t *testing.T) {
	for name, st := range attackStores {
		t.Run(name, func(t *testing.T) {
			a := newAtk(t, st(t), Options{})
			for i, tok := range []string{atkEvAU, atkEvAV, atkEvB, atkEvAU, atkEvB, atkEvAV, atkEvAU} {
				code, _, b := a.do("POST", "/api/events", tok, fmt.Sprintf(`{"category":"c","action":"a","correlationKey":"k%d","severity":"error"}`, i), nil)
				if code >= 300 {
					t.Fatalf("create: %d %s", code, b)
				}
			}
			for _, tok := range []string{atkEvAU, atkEvAV, atkEvB, atkReadA, atkReadB} {
				_, _, lb := a.do("GET", "/api/events/list?pageSize=100", tok, "", nil)
				var list struct{ Data []json.RawMessage }
				if err := json.Unmarshal(lb, &list); err != nil {
					t.Fatalf("list: %s", lb)
				}
				want := map[string][]byte{}
				for _, e := range list.Data {
					var id struct{ ID string }
					_ = json.Unmarshal(e, &id)
					want[id.ID] = e
				}
				for _, limit := range []int{1, 2, 100} {
					// The feed reads below its watermark, which another
					// session's open transaction on the shared server can
					// hold back for a moment: follow again until it has
					// caught up with what getEvents lists (at most 10 s).
					all := a.followAll(tok, limit)
					for deadline := time.Now().Add(10 * time.Second); len(all.Items) < len(want) && time.Now().Before(deadline); {
						time.Sleep(100 * time.Millisecond)
						all = a.followAll(tok, limit)
					}
					got := map[string]bool{}
					for _, it := range all.Items {
						var id struct{ ID string }
						_ = json.Unmarshal(it.Event, &id)
						if got[id.ID] {
							t.Errorf("%s limit %d: event %s twice", tok, limit, id.ID)
						}
						got[id.ID] = true
						w, ok := want[id.ID]
						if !ok {
							t.Errorf("%s limit %d: the feed gives event %s that getEvents does not list for it: %s", tok, limit, id.ID, it.Event)
						} else if !bytes.Equal(w, it.Event) {
							t.Errorf("%s: event %s\nfeed     %s\ngetEvents %s", tok, id.ID, it.Event, w)
						}
					}
					if len(got) != len(want) {
						t.Errorf("%s limit %d: %d events in the feed, getEvents lists %d", tok, limit, len(got), len(want))
					}
				}
			}
		})
	}
}

// A filter that selects nothing over more than MaxFeedScan events still
// moves next_cursor on and reaches caught_up; the lifecycle pages have no
// duplicate across their boundaries.
func TestFeedAttackFilterNothing(t *testing.T) {
	for name, st := range attackStores {
		t.Run(name, func(t *testing.T) {
			a := newAtk(t, st(t), Options{})
			a.ingest("f", 0, 10500)
			after, reads, stalls := "", 0, 0
			for {
				reads++
				if reads > 10 {
					t.Fatal("a filter selecting nothing never caught up in 10 reads")
				}
				code, _, b := a.do("GET", "/api/v1/events/feed?cloud=nowhere&after="+url.QueryEscape(after), atkReadA, "", nil)
				var p lifecyclePage
				if err := json.Unmarshal(b, &p); code != 200 || err != nil {
					t.Fatalf("%d %.300s", code, b)
				}
				if p.NextCursor == after && !p.CaughtUp && stalls < 100 {
					// Another session's open transaction on the shared
					// server holds the feed's watermark back: nothing is
					// readable past it yet; read again (not counted).
					stalls++
					reads--
					time.Sleep(100 * time.Millisecond)
					continue
				}
				if len(p.Items) != 0 || p.NextCursor == "" || p.NextCursor == after {
					t.Fatalf("read %d after %q: %d items, next %q", reads, after, len(p.Items), p.NextCursor)
				}
				after = p.NextCursor
				if p.CaughtUp {
					break
				}
			}
			seen := map[string]bool{}
			after = ""
			for {
				_, _, b := a.do("GET", "/api/v1/events/feed?limit=997&after="+url.QueryEscape(after), atkReadA, "", nil)
				var p lifecyclePage
				_ = json.Unmarshal(b, &p)
				for _, it := range p.Items {
					if seen[it.EventID] {
						t.Fatalf("event %s twice", it.EventID)
					}
					seen[it.EventID] = true
				}
				after = p.NextCursor
				if p.CaughtUp {
					if len(seen) < 10500 && stalls < 100 {
						// caught_up at the watermark, which another
						// session's open transaction on the shared server
						// holds back (as above): read on from the cursor.
						stalls++
						time.Sleep(100 * time.Millisecond)
						continue
					}
					break
				}
			}
			if len(seen) != 10500 {
				t.Errorf("%d events read, want 10500", len(seen))
			}
		})
	}
}

// A long poll with wait answers promptly when an event is stored, on both
// feeds.
func TestFeedAttackLongPollPrompt(t *testing.T) {
	for name, st := range attackStores {
		t.Run(name, func(t *testing.T) {
			a := newAtk(t, st(t), Options{})
			a.ingest("w", 0, 1)
			for _, c := range []struct {
				path, tok string
				start     string // the query whose next_cursor the long poll starts at
				store     func()
			}{
				// From the beginning, waiting for w0: on a shared PostgreSQL
				// server another session's open transaction can hold w0
				// below the readable head for a while, and a poll from
				// after=now would then get w0 with the new item.
				{"/api/v1/events/feed", atkReadA, "?wait=30", func() { a.ingest("w", 100, 1) }},
				{"/api/events/feed", atkEvAU, "?after=now", func() {
					a.do("POST", "/api/events", atkEvAU, `{"category":"c","action":"a","correlationKey":"w"}`, nil)
				}},
			} {
				_, _, b := a.do("GET", c.path+c.start, c.tok, "", nil)
				var p lifecyclePage
				_ = json.Unmarshal(b, &p)
				done := make(chan time.Time, 1)
				var got []byte
				go func() {
					_, _, got = a.do("GET", c.path+"?wait=30&after="+url.QueryEscape(p.NextCursor), c.tok, "", nil)
					done <- time.Now()
				}()
				time.Sleep(300 * time.Millisecond)
				stored := time.Now()
				c.store()
				select {
				case at := <-done:
					// Woken by the commit, not by the end of its wait (on
					// PostgreSQL the item is readable once the server's
					// oldest open transaction, maybe another test's, ends).
					if d := at.Sub(stored); d > 20*time.Second {
						t.Errorf("%s: answered %v after the store: the wait ran out", c.path, d)
					}
					var q lifecyclePage
					_ = json.Unmarshal(got, &q)
					if len(q.Items) != 1 {
						t.Errorf("%s: %s, want the one new item", c.path, got)
					}
				case <-time.After(40 * time.Second):
					t.Fatalf("%s: no answer", c.path)
				}
			}
		})
	}
}

// Two replicas on one database: a follower on one gets, within a few
// seconds, everything written through the other, and resumes with its
// last cursor on a fresh replica.
func TestFeedAttackReplicas(t *testing.T) {
	u := pgtest.URL(t)
	r1 := newAtk(t, pgStore(pgtest.Open(t, u, pgstore.Options{})), Options{})
	r2 := newAtk(t, pgStore(pgtest.Open(t, u, pgstore.Options{})), Options{})
	_, _, b := r1.do("GET", "/api/v1/events/feed?after=now", atkReadA, "", nil)
	var p lifecyclePage
	_ = json.Unmarshal(b, &p)
	after := p.NextCursor
	var got []string
	follow := func(a *atk, until int) {
		// The feed's watermark is the server's: another test's open
		// transaction can hold every reader back for seconds.
		deadline := time.Now().Add(30 * time.Second)
		for len(got) < until && time.Now().Before(deadline) {
			_, _, b := a.do("GET", "/api/v1/events/feed?wait=2&after="+url.QueryEscape(after), atkReadA, "", nil)
			var p lifecyclePage
			_ = json.Unmarshal(b, &p)
			for _, it := range p.Items {
				got = append(got, it.EventID)
			}
			after = p.NextCursor
		}
	}
	r2.ingest("r", 0, 30)
	follow(r1, 30)
	// A replica restarted: a fresh handler on a fresh pool.
	r3 := newAtk(t, pgStore(pgtest.Open(t, u, pgstore.Options{})), Options{})
	r2.ingest("r", 30, 30)
	follow(r3, 60)
	var want []string
	for i := range 60 {
		want = append(want, fmt.Sprintf("r%d", i))
	}
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("followed across replicas (-want +got):\n%s", diff)
	}
}

// A long-open writing transaction in another session holds the feed back;
// once it ends every item arrives, none lost.
func TestFeedAttackOpenTransaction(t *testing.T) {
	u := pgtest.URL(t)
	db := pgtest.Open(t, u, pgstore.Options{})
	a := newAtk(t, pgStore(db), Options{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_current_xact_id()"); err != nil {
		t.Fatal(err)
	}
	a.ingest("o", 0, 5)
	_, _, b := a.do("GET", "/api/v1/events/feed", atkReadA, "", nil)
	var p lifecyclePage
	_ = json.Unmarshal(b, &p)
	if len(p.Items) != 0 {
		t.Errorf("%d items readable while an older writing transaction is open; want 0", len(p.Items))
	}
	_, _, mb := a.do("GET", "/metrics", "", "", nil)
	if l := grepLines(mb, "tally_feed_lag_seconds "); l == "" || l == "tally_feed_lag_seconds 0" {
		t.Errorf("metrics while a transaction is open: %q; want a lag", l)
	}
	done := make(chan []byte, 1)
	go func() {
		_, _, b := a.do("GET", "/api/v1/events/feed?wait=4&after="+url.QueryEscape(p.NextCursor), atkReadA, "", nil)
		done <- b
	}()
	time.Sleep(500 * time.Millisecond)
	if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-done:
		var q lifecyclePage
		_ = json.Unmarshal(b, &q)
		if len(q.Items) != 5 {
			t.Errorf("after the transaction ended: %s; want the 5 events", b)
		}
	case <-time.After(6 * time.Second):
		t.Fatal("no answer")
	}
}
