package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tallyhq/tally/internal/pgcorrelate"
)

// pgServer is the PostgreSQL server the run uses, and the database it made.
type pgServer struct {
	admin *pgxpool.Pool
	base  *url.URL // the bench database
	name  string
}

// createDatabase creates a database of its own on the server adminURL names
// and returns it; drop removes it.
func createDatabase(ctx context.Context, adminURL string) (*pgServer, error) {
	u, err := url.Parse(adminURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("--database-url: want a postgres:// URL, got %q", adminURL)
	}
	cfg, err := pgxpool.ParseConfig(adminURL)
	if err != nil {
		return nil, fmt.Errorf("--database-url: %w", err)
	}
	cfg.MaxConns = 2
	admin, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("tally_bench_%d_%d", time.Now().Unix(), time.Now().Nanosecond()%100000)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		admin.Close()
		return nil, fmt.Errorf("create database %s: %w", name, err)
	}
	b := *u
	b.Path = "/" + name
	return &pgServer{admin: admin, base: &b, name: name}, nil
}

// drop drops the bench database (connections still open are ended).
func (s *pgServer) drop() error {
	// DROP DATABASE waits for a checkpoint, which takes tens of seconds on a
	// loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	defer s.admin.Close()
	_, err := s.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{s.name}.Sanitize()+" WITH (FORCE)")
	return err
}

// schemaURL is the URL of the bench database whose search_path is schema.
func (s *pgServer) schemaURL(schema string) string {
	u := *s.base
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// newSchema creates schema in the bench database and applies the product's
// migrations to it.
func (s *pgServer) newSchema(ctx context.Context, schema string) (string, error) {
	conn, err := pgx.Connect(ctx, s.base.String())
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return "", fmt.Errorf("create schema %s: %w", schema, err)
	}
	u := s.schemaURL(schema)
	if err := migrate(ctx, u); err != nil {
		return "", fmt.Errorf("migrate schema %s: %w", schema, err)
	}
	return u, nil
}

func pool(ctx context.Context, u string, conns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns, cfg.MinConns = conns, conns
	return pgxpool.NewWithConfig(ctx, cfg)
}

// machinePG reads the server's version and the settings that decide write
// speed.
func machinePG(ctx context.Context, p *pgxpool.Pool) (map[string]string, error) {
	out := map[string]string{}
	for _, name := range []string{"server_version", "fsync", "synchronous_commit", "full_page_writes", "wal_level",
		"shared_buffers", "wal_buffers", "max_wal_size", "checkpoint_timeout", "commit_delay", "max_connections"} {
		var v string
		if err := p.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err != nil {
			return nil, err
		}
		out[name] = v
	}
	return out, nil
}

var eventColumns = []string{"event_id", "timestamp", "event_type", "platform", "cloud", "resource_type",
	"resource_id", "project_id", "source", "payload", "category", "received_at"}

// copyRows turns the valid items of each batch into rows of the events
// table (the same rows the library path stores, payload as sent).
func copyRows(bs []batch) [][][]any {
	now := time.Now().UTC()
	out := make([][][]any, 0, len(bs))
	for _, b := range bs {
		rows := make([][]any, 0, len(b.Items))
		for _, it := range b.Items {
			if it.Kind != itemValid {
				continue
			}
			e := it.Ev
			cat := map[category]string{catCreate: "create", catUpdate: "update", catDelete: "delete"}[e.Category]
			rows = append(rows, []any{e.EventID, e.Timestamp, e.EventType, "openstack", e.Cloud, e.ResourceType,
				e.ResourceID, e.ProjectID, "collector", string(appendPayload(nil, e, false)), cat, now})
		}
		out = append(out, rows)
	}
	return out
}

// runCopy is the ceiling: pgx CopyFrom of each batch's rows into events,
// one COPY (one transaction) per batch, on conns connections.
func runCopy(ctx context.Context, p *pgxpool.Pool, batches [][][]any, conns int, prog *progress) (lat []time.Duration, err error) {
	work := make(chan [][]any)
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for range conns {
		wg.Go(func() {
			var mine []time.Duration
			for rows := range work {
				t := time.Now()
				_, err := p.CopyFrom(ctx, pgx.Identifier{"events"}, eventColumns, pgx.CopyFromRows(rows))
				mine = append(mine, time.Since(t))
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
				prog.add(len(rows))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	for _, b := range batches {
		select {
		case work <- b:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	return lat, errors.Join(errs...)
}

// pgReader reads what a run stored in one schema, with plain SQL.
type pgReader struct{ p *pgxpool.Pool }

func (r pgReader) eventCount(ctx context.Context) (int, error) {
	var n int
	err := r.p.QueryRow(ctx, "SELECT count(*) FROM events").Scan(&n)
	return n, err
}

func (r pgReader) deadLetterCount(ctx context.Context) (int, error) {
	var n int
	err := r.p.QueryRow(ctx, "SELECT count(*) FROM dead_letters").Scan(&n)
	return n, err
}

func (r pgReader) resources(ctx context.Context) (map[resKey]row, error) {
	rows, err := r.p.Query(ctx, `SELECT cloud, resource_type, resource_id, platform, project_id, state, size::text,
		created_at, deleted_at, first_event_at, last_event_at, last_event_type, last_event_id FROM current_resources`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[resKey]row{}
	for rows.Next() {
		var (
			k    resKey
			v    row
			size *string
		)
		if err := rows.Scan(&k.Cloud, &k.ResourceType, &k.ResourceID, &v.Platform, &v.ProjectID, &v.State, &size,
			&v.CreatedAt, &v.DeletedAt, &v.FirstEventAt, &v.LastEventAt, &v.LastEventType, &v.LastEventID); err != nil {
			return nil, err
		}
		if size != nil {
			v.Size = []byte(*size)
		}
		out[k] = v
	}
	return out, rows.Err()
}

func (r pgReader) correlation(ctx context.Context, org string) (map[corrPair]corrAgg, error) {
	rows, err := r.p.Query(ctx, `SELECT user_id, correlation_key, count(*),
			count(*) FILTER (WHERE resolved_at IS NULL AND deleted_at IS NULL),
			count(*) FILTER (WHERE resolved_at IS NOT NULL),
			coalesce(sum(occurrence_count), 0)::bigint
		FROM correlated_events WHERE organization = $1 GROUP BY 1, 2`, org)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[corrPair]corrAgg{}
	for rows.Next() {
		var (
			p corrPair
			a corrAgg
		)
		if err := rows.Scan(&p.User, &p.Key, &a.Events, &a.Open, &a.Resolved, &a.SumCount); err != nil {
			return nil, err
		}
		out[p] = a
	}
	return out, rows.Err()
}

// The bare-SQL correlation ceiling runs the product's own statements for
// each step of createEvent (internal/pgcorrelate, which store/pgstore runs
// too), with the product's arguments, in the same round trips, through pgx
// on its own connections, without HTTP, JSON, validation or database/sql: a
// create without an idempotency key is one statement (a resolution closes
// the open event or records one, in one statement); one with a key is a
// transaction of two pipelined batches, BEGIN, the key's lock and its
// lookup, then the write with the key's binding (one statement) and COMMIT,
// or ROLLBACK when the key replays.

// sqlCreate applies one create as bare SQL and returns its disposition and
// event id.
func sqlCreate(ctx context.Context, p *pgxpool.Pool, cfg corrConfig, op corrOp) (disp, id string, err error) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	c := cfg.planned(op, now)
	query, args, err := pgcorrelate.Write(c)
	if err != nil {
		return "", "", err
	}
	if op.IdemKey == "" {
		return scanWritten(p.Query(ctx, query, args...))
	}
	pc, err := p.Acquire(ctx)
	if err != nil {
		return "", "", err
	}
	defer pc.Release()
	conn := pc.Conn()
	defer func() {
		if conn.PgConn().TxStatus() != 'I' && !conn.IsClosed() {
			_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	var begin pgx.Batch
	begin.Queue("BEGIN")
	begin.Queue(pgcorrelate.LockSQL, pgcorrelate.LockKey(c.Caller.Organization, c.Caller.User, c.IdempotencyKey))
	begin.Queue(pgcorrelate.LookupSQL, c.Caller.Organization, c.Caller.User, c.IdempotencyKey, c.KeyNotBefore).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			v, err := rows.Values()
			if err != nil {
				return err
			}
			id, disp = uuidText(v[0]), "replayed"
		}
		return rows.Err()
	})
	if err := conn.SendBatch(ctx, &begin).Close(); err != nil {
		return "", "", err
	}
	if disp == "replayed" {
		_, err := conn.Exec(ctx, "ROLLBACK")
		return disp, id, err
	}
	var commit pgx.Batch
	var werr error
	commit.Queue(query, args...).Query(func(rows pgx.Rows) error {
		disp, id, werr = scanWritten(rows, nil)
		return nil
	})
	commit.Queue("COMMIT")
	if err := conn.SendBatch(ctx, &commit).Close(); err != nil && werr == nil {
		return "", "", err
	}
	return disp, id, werr
}

// scanWritten reads the one row a pgcorrelate.Write statement returns,
// decoding every column as the product does: the event's id and its
// disposition.
func scanWritten(rows pgx.Rows, err error) (disp, id string, _ error) {
	if err != nil {
		return "", "", err
	}
	defer rows.Close()
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			return "", "", err
		}
		code, _ := v[len(v)-1].(int32)
		id, disp = uuidText(v[0]), [...]string{"created", "incremented", "resolved"}[code]
	}
	if err := rows.Err(); err != nil {
		return "", "", err
	}
	if id == "" {
		return "", "", errors.New("the write returned no row")
	}
	return disp, id, nil
}

// uuidText is a uuid column's value as text.
func uuidText(v any) string {
	if b, ok := v.([16]byte); ok {
		return uuid.UUID(b).String()
	}
	return fmt.Sprint(v)
}
