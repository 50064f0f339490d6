package pgstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// FeedChannel is the PostgreSQL notification channel of the change feeds'
// wake-ups ([DB.NotifyFeed], [DB.ListenFeed]).
const FeedChannel = "tally_feed"

// The wake-ups of the change feeds across replicas (tallyd --feed-notify).
// They only make a replica's waiting readers look now instead of at their
// next poll: a lost or doubled one loses or doubles nothing, as the feeds
// read the store. NOTIFY is never sent inside a write transaction (every
// committing transaction with a pending notification takes a cluster-wide
// lock), but after the commit, payload-less, and coalesced: while one is
// being sent, any number of further commits send one more. PgBouncer in
// transaction mode does not carry LISTEN: leave the option off there, and
// the feeds poll.

// wakeups sends the coalesced notifications of one DB.
type wakeups struct {
	mu     sync.Mutex
	kick   chan struct{}
	done   chan struct{}
	closed bool
}

// NotifyFeed tells the other replicas' change feeds, after a commit, that
// something was stored: one NOTIFY on [FeedChannel], sent by a goroutine of
// its own (started by the first call, stopped by Close), coalesced with
// the calls that come while it is sent. It never blocks the caller; a
// NOTIFY that fails is dropped (the feeds poll).
func (db *DB) NotifyFeed() {
	w := &db.wakeups
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	if w.kick == nil {
		w.kick, w.done = make(chan struct{}, 1), make(chan struct{})
		go db.sendWakeups(w.kick, w.done)
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (db *DB) sendWakeups(kick <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for range kick {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, _ = db.conn.pool.Exec(ctx, `SELECT pg_notify($1, '')`, FeedChannel)
		cancel()
	}
}

func (w *wakeups) stop() {
	w.mu.Lock()
	w.closed = true
	kick, done := w.kick, w.done
	w.kick = nil
	w.mu.Unlock()
	if kick != nil {
		close(kick)
		<-done
	}
}

// ListenFeed calls wake for each notification on [FeedChannel], over a
// connection of its own (not one of the pool's), until ctx ends; it then
// returns nil. A lost connection is made again after a second, and wake is
// called once then, as notifications may have been missed meanwhile.
func (db *DB) ListenFeed(ctx context.Context, wake func()) error {
	for {
		err := db.listen(ctx, wake)
		if ctx.Err() != nil {
			return nil
		}
		_ = err
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
		wake()
	}
}

func (db *DB) listen(ctx context.Context, wake func()) error {
	c, err := pgx.ConnectConfig(ctx, db.conn.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("pgstore: listen: %w", err)
	}
	defer func() { _ = c.Close(context.WithoutCancel(ctx)) }()
	if _, err := c.Exec(ctx, `LISTEN `+pgx.Identifier{FeedChannel}.Sanitize()); err != nil {
		return fmt.Errorf("pgstore: listen: %w", err)
	}
	for {
		if _, err := c.WaitForNotification(ctx); err != nil {
			return fmt.Errorf("pgstore: listen: %w", err)
		}
		wake()
	}
}
