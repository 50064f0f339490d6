package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/pgtest"
)

// POST /api/events (createEvent) from a thousand concurrent clients, a few
// of them vanishing mid-request, occurrences of four correlationKeys,
// pipelined by pgstore: every answer is 2xx (the database is available),
// its Event-Disposition matches its status (201 created, 200
// incremented), and what is stored is what was answered: each key has at
// most one open event (event-correlation.md, "Scope and invariant"), and
// its occurrence counts sum to the occurrences answered, plus at most the
// ones whose client vanished.
func TestCreateEventConcurrentClients(t *testing.T) {
	if testing.Short() {
		t.Skip("a thousand clients")
	}
	u := pgtest.URL(t)
	d := startTallyd(t, "--credentials-file", writeCredentials(t), "--database-url", u)
	keys := []string{"k0", "k1", "k2", "k3"}
	const clients, each = 1000, 2
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	var (
		mu       sync.Mutex
		answered = map[string]int{}
		vanished = map[string]int{}
	)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(i), 3))
			for range each {
				key := keys[r.IntN(len(keys))]
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				gone := r.IntN(10) == 0
				if gone {
					time.AfterFunc(time.Duration(r.IntN(20))*time.Millisecond, cancel)
				}
				body := fmt.Appendf(nil, `{"category":"connection","action":"fail","severity":"error","description":"down","correlationKey":%q}`, key)
				req, err := http.NewRequestWithContext(ctx, "POST", d.base+"/api/events", bytes.NewReader(body))
				if err != nil {
					t.Error(err)
					cancel()
					return
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+tokEvents)
				resp, err := client.Do(req)
				if err == nil {
					b, rerr := io.ReadAll(resp.Body)
					resp.Body.Close()
					if rerr != nil {
						err = rerr
					} else if disp := resp.Header.Get("Event-Disposition"); !(resp.StatusCode == 201 && disp == "created" || resp.StatusCode == 200 && disp == "incremented") {
						t.Errorf("POST /api/events: %d %q %s", resp.StatusCode, disp, b)
					}
				}
				cancel()
				mu.Lock()
				switch {
				case err == nil:
					answered[key]++
				case gone:
					vanished[key]++
				default:
					t.Errorf("POST /api/events: %v", err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, k := range keys {
		var sum, open int64
		if err := conn.QueryRow(ctx, `SELECT coalesce(sum(occurrence_count), 0), count(*) FILTER (WHERE resolved_at IS NULL)
			FROM correlated_events WHERE correlation_key = $1`, k).Scan(&sum, &open); err != nil {
			t.Fatal(err)
		}
		if open > 1 || sum < int64(answered[k]) || sum > int64(answered[k]+vanished[k]) {
			t.Errorf("%s: %d open events, occurrences summing to %d; %d answered, %d vanished", k, open, sum, answered[k], vanished[k])
		}
	}
	t.Logf("answered %v, vanished %v", answered, vanished)
}
