package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// payload is the part of a createEvent payload this producer sends.
type payload struct {
	Category       string `json:"category"`
	Action         string `json:"action"`
	Severity       string `json:"severity"`
	Description    string `json:"description"`
	CorrelationKey string `json:"correlationKey"`
	ResolvedAt     string `json:"resolvedAt,omitempty"`
	Source         string `json:"source"`
	IdempotencyKey string `json:"idempotencyKey"`
}

func occurrence(key string) payload {
	return payload{
		Category: "connection", Action: "ping", Severity: "error",
		Description: "Connection to cluster prod-1 failed", CorrelationKey: key,
		Source: "example-producer",
	}
}

// resolution closes the condition: same key and category, the time it
// cleared, and a severity and description that say what cleared
// (event-correlation.md, Resolution events).
func resolution(key string, at time.Time) payload {
	return payload{
		Category: "connection", Action: "ping", Severity: "success",
		Description: "Connection to cluster prod-1 restored", CorrelationKey: key,
		ResolvedAt: at.UTC().Format(time.RFC3339Nano), Source: "example-producer",
	}
}

type answer struct {
	status      int
	disposition string
	event       struct {
		ID              string `json:"id"`
		OccurrenceCount int64  `json:"occurrenceCount"`
	}
}

type producer struct {
	server, token string
	client        *http.Client
	clock         func() time.Time
}

func (p *producer) now() time.Time {
	if p.clock != nil {
		return p.clock()
	}
	return time.Now()
}

// create sends one create with a fresh idempotency key, retrying transport
// failures and 5xx answers up to four times with the same key.
func (p *producer) create(ctx context.Context, pl payload) (answer, error) {
	var k [16]byte
	_, _ = rand.Read(k[:])
	pl.IdempotencyKey = hex.EncodeToString(k[:])
	body, err := json.Marshal(pl)
	if err != nil {
		return answer{}, err
	}
	client := p.client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	backoff := 200 * time.Millisecond
	var last error
	for attempt := 0; attempt < 5; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return answer{}, ctx.Err()
			case <-time.After(backoff):
			}
			backoff *= 2
		}
		a, retry, err := p.send(ctx, client, body)
		if err == nil {
			return a, nil
		}
		if !retry {
			return answer{}, err
		}
		last = err
	}
	return answer{}, fmt.Errorf("giving up after 5 attempts: %w", last)
}

func (p *producer) send(ctx context.Context, client *http.Client, body []byte) (answer, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.server+"/api/events", bytes.NewReader(body))
	if err != nil {
		return answer{}, false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+p.token)
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, ctx.Err() == nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return answer{}, true, err
	}
	if resp.StatusCode >= 500 {
		return answer{}, true, fmt.Errorf("server answered %s", resp.Status)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return answer{}, false, fmt.Errorf("server answered %s: %s", resp.Status, bytes.TrimSpace(b))
	}
	a := answer{status: resp.StatusCode, disposition: resp.Header.Get("Event-Disposition")}
	if a.disposition == "" {
		return answer{}, false, errors.New("the answer has no Event-Disposition header: the server does not implement correlation")
	}
	if err := json.Unmarshal(b, &a.event); err != nil {
		return answer{}, false, fmt.Errorf("decode event: %w", err)
	}
	return a, false, nil
}
