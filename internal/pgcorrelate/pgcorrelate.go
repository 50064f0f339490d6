// Package pgcorrelate is the SQL of createEvent on PostgreSQL: the write
// statement of each step of event-correlation.md, "Correlation"
// (docs/spec/event-correlation.md), with its arguments in order, the
// idempotencyKey's lock and lookup, and the columns they return. It is the
// one source of these statements for store/pgstore, which runs them, and for
// the bench tool's bare-SQL ceiling, which runs them without tally's HTTP,
// JSON and Go around them, so that the ceiling cannot drift from the
// product.
package pgcorrelate

import (
	"fmt"
	"strings"

	"github.com/tallyhq/tally/correlate"
)

// Columns are the columns of correlated_events, in the order of the
// INSERT parameters $1 to $27 (see insertArgs) and of the rows every write
// statement returns before its disposition code.
const Columns = `id, organization, user_id, owner, system_id, acted_upon, operation_id,
	category, action, severity, status, description, metadata, extra,
	created_at, updated_at, deleted_at, correlation_key, occurrence_count,
	first_seen_at, last_seen_at, resolved_at, source, type, specversion, trace_id, parent_id`

const insertValues = `($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13::json, $14::json,
	$15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27)`

// OpenPredicate is the predicate of the partial unique index
// correlated_events_open_key (migration 00007): the rows that count as the
// open event of their (organization, user_id, correlation_key). ON CONFLICT
// names it verbatim so that PostgreSQL infers that index.
const OpenPredicate = `resolved_at IS NULL AND deleted_at IS NULL AND user_id <> '' AND correlation_key IS NOT NULL`

// orNull is nil (NULL) for "", else s.
func orNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func insertArgs(e correlate.Event) ([]any, error) {
	var metadata, extra any
	if e.Metadata != nil {
		metadata = string(e.Metadata)
	}
	if len(e.Extra) > 0 {
		b, err := correlate.EncodeExtra(e.Extra)
		if err != nil {
			return nil, fmt.Errorf("encode extra: %w", err)
		}
		extra = string(b)
	}
	return []any{
		e.ID, e.Organization, e.User, e.Owner, e.SystemID, e.ActedUpon, e.OperationID,
		e.Category, e.Action, string(e.Severity), string(e.Status), e.Description, metadata, extra,
		e.CreatedAt, e.UpdatedAt, e.DeletedAt, orNull(e.CorrelationKey), e.OccurrenceCount,
		e.FirstSeenAt, e.LastSeenAt, e.ResolvedAt, orNull(e.Source), orNull(e.Type),
		orNull(e.Specversion), orNull(e.TraceID), orNull(e.ParentID),
	}, nil
}

// insertCast is insertValues as a SELECT list, each parameter cast to its
// column's type (an INSERT … SELECT does not infer them).
const insertCast = `$1::uuid, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, $8::text, $9::text,
	$10::text, $11::text, $12::text, $13::json, $14::json, $15::timestamptz, $16::timestamptz, $17::timestamptz,
	$18::text, $19::bigint, $20::timestamptz, $21::timestamptz, $22::timestamptz, $23::text, $24::text, $25::text,
	$26::text, $27::text`

// The write statements' common table expressions, each naming w the row it
// wrote with its disposition code.
const (
	// recordCTE is step 2: insert the event ($1 to $27).
	recordCTE = `w AS (INSERT INTO correlated_events (` + Columns + `) VALUES ` + insertValues + `
			RETURNING ` + Columns + `, 0 AS disposition)`
	// occurrenceCTE is step 3: insert the opening event, or, when the
	// partial unique index already holds an open event of the key, count
	// the occurrence ($28) on it. PostgreSQL makes INSERT … ON CONFLICT DO
	// UPDATE atomic under concurrency: of 64 simultaneous first
	// occurrences one inserts and 63 update, each update waiting for the
	// row lock of the previous, so none is lost. When the open event is
	// resolved meanwhile, the conflict disappears and the insert opens a
	// new event instead. The count saturates at the bigint maximum instead
	// of failing with 22003.
	occurrenceCTE = `w AS (INSERT INTO correlated_events AS e (` + Columns + `) VALUES ` + insertValues + `
			ON CONFLICT (organization, user_id, correlation_key) WHERE ` + OpenPredicate + `
			DO UPDATE SET
				occurrence_count = CASE WHEN e.occurrence_count > 9223372036854775807 - $28::bigint
					THEN 9223372036854775807 ELSE e.occurrence_count + $28::bigint END,
				last_seen_at = GREATEST(e.last_seen_at, $29::timestamptz),
				updated_at = GREATEST(e.updated_at, $30::timestamptz)
			RETURNING ` + Columns + `, CASE WHEN xmax = 0 THEN 0 ELSE 1 END AS disposition)`
	// resolutionCTE is step 4: close the open event when there is one,
	// else record the event (unless its insert is refused: $33). The
	// UPDATE takes the open event's row lock, so a concurrent occurrence
	// either is counted before (and the resolution sees its count) or
	// waits and, finding the event closed, opens a new one. The insert, of
	// an event already resolved, never meets the open-key index.
	resolutionCTE = `closed AS (UPDATE correlated_events SET
				resolved_at = $28,
				severity = COALESCE($29, severity),
				description = COALESCE($30, description),
				last_seen_at = GREATEST(last_seen_at, $31::timestamptz),
				updated_at = GREATEST(updated_at, $32::timestamptz)
			WHERE organization = $2 AND user_id = $3 AND correlation_key = $18 AND ` + OpenPredicate + `
			RETURNING ` + Columns + `),
		opened AS (INSERT INTO correlated_events (` + Columns + `)
			SELECT ` + insertCast + ` WHERE $33::boolean AND NOT EXISTS (SELECT FROM closed)
			RETURNING ` + Columns + `),
		w AS (SELECT *, 2 AS disposition FROM closed UNION ALL SELECT *, 0 FROM opened)`
	// bindCTE is step 5, after a step's CTEs whose arguments end at $n: bind
	// the key ($n+3) of the caller ($n+1, $n+2) to the written event at
	// $n+4. A binding older than the retention is replaced.
	bindCTE = `,
		bound AS (INSERT INTO correlated_event_idempotency_keys (organization, user_id, key, event_id, bound_at)
			SELECT $%d::text, $%d::text, $%d::text, id, $%d::timestamptz FROM w
			ON CONFLICT (organization, user_id, key) DO UPDATE
				SET event_id = EXCLUDED.event_id, bound_at = EXCLUDED.bound_at)`
)

// ChangeColumns are the columns of correlated_event_changes a change row
// is written with (tx and seq take their defaults).
const ChangeColumns = `kind, event_id, organization, user_id, category, action, severity, status, resolved,
	correlation_key, description, snapshot`

// ChangeValues is the SELECT list of a change row of kind (an SQL text
// expression) from a row r of correlated_events' [Columns]: the filter
// columns, and the row itself as its snapshot.
func ChangeValues(kind, r string) string {
	return kind + `, ` + r + `.id, ` + r + `.organization, ` + r + `.user_id, ` + r + `.category, ` + r + `.action, ` +
		r + `.severity, ` + r + `.status, ` + r + `.resolved_at IS NOT NULL, ` + r + `.correlation_key, ` + r + `.description, ` +
		`json_build_object(` + jsonPairs(r) + `)`
}

// jsonPairs is the arguments of json_build_object naming each of Columns
// with its value in row r.
func jsonPairs(r string) string {
	parts := strings.Split(Columns, ",")
	for i, p := range parts {
		c := strings.TrimSpace(p)
		parts[i] = `'` + c + `', ` + r + `.` + c
	}
	return strings.Join(parts, ", ")
}

// logCTE writes the change row of the written event w, its kind from the
// disposition code: in the write statement, so in its transaction.
var logCTE = `,
		logged AS (INSERT INTO correlated_event_changes (` + ChangeColumns + `)
			SELECT ` + ChangeValues(`(ARRAY['created','incremented','resolved'])[w.disposition + 1]`, "w") + ` FROM w)`

// writeKind is what selects a write statement: the step, and whether an
// idempotencyKey is bound.
type writeKind struct {
	step  correlate.Step
	keyed bool
}

// writeSQL is every write statement, made once: building the text on
// every create was a tenth of tallyd's allocations per create.
var writeSQL = func() map[writeKind]string {
	steps := []struct {
		step correlate.Step
		ctes string
		args int // the step's arguments: $1 to $args
	}{
		{correlate.StepRecord, recordCTE, 27},
		{correlate.StepOccurrence, occurrenceCTE, 30},
		{correlate.StepResolution, resolutionCTE, 33},
	}
	m := make(map[writeKind]string, 2*len(steps))
	for _, s := range steps {
		n := s.args
		m[writeKind{s.step, false}] = `WITH ` + s.ctes + logCTE + ` SELECT * FROM w`
		m[writeKind{s.step, true}] = `WITH ` + s.ctes + fmt.Sprintf(bindCTE, n+1, n+2, n+3, n+4) + logCTE + ` SELECT * FROM w`
	}
	return m
}()

// Write is the one statement of a planned create's write, and its
// arguments: steps 2, 3 or 4 as c.Step says, and, with an idempotencyKey,
// step 5 (binding the key to the written event, in the same statement and
// so the same transaction as the effect). The statement returns one row:
// the written event's [Columns], then its disposition code (0 created, 1
// incremented, 2 resolved); or no row when a resolution has nothing to close
// and its insert is refused. The error is for an unknown step or an Extra
// that cannot be encoded.
func Write(c correlate.Create) (string, []any, error) {
	args, err := insertArgs(c.Event)
	if err != nil {
		return "", nil, err
	}
	switch c.Step {
	case correlate.StepRecord:
	case correlate.StepOccurrence:
		args = append(args, c.Count, c.LastSeenAt, c.Now)
	case correlate.StepResolution:
		args = append(args, c.ResolvedAt, orNull(string(c.Severity)), c.Description, c.LastSeenAt, c.Now, c.InsertRefused == nil)
	default:
		return "", nil, fmt.Errorf("unknown step %d", c.Step)
	}
	keyed := c.IdempotencyKey != ""
	if keyed {
		args = append(args, c.Caller.Organization, c.Caller.User, c.IdempotencyKey, c.Now)
	}
	return writeSQL[writeKind{c.Step, keyed}], args, nil
}

// LookupSQL reads the event an idempotencyKey is bound to (step 1): its
// [Columns], from the arguments organization, user, key and the oldest
// binding that still replays (correlate.Create's KeyNotBefore).
var LookupSQL = `SELECT ` + prefixed("e.", Columns) + `
		FROM correlated_event_idempotency_keys k JOIN correlated_events e ON e.id = k.event_id
		WHERE k.organization = $1 AND k.user_id = $2 AND k.key = $3 AND k.bound_at >= $4`

// prefixed qualifies every column of a column list with prefix.
func prefixed(prefix, columns string) string {
	parts := strings.Split(columns, ",")
	for i, p := range parts {
		parts[i] = prefix + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}

// LockSQL takes the transaction-scoped advisory lock of an idempotencyKey
// (step 1), its one argument [LockKey]. Two creates with one key serialise
// on it; a hash collision between two keys only makes them wait for each
// other.
const LockSQL = `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`

// LockKey is the text whose hash [LockSQL] locks for an idempotencyKey of
// (organization, user): each part length-prefixed, so that no two triples
// give one text.
func LockKey(organization, user, key string) string {
	return fmt.Sprintf("tally.correlate.idempotency:%d:%s:%d:%s:%s", len(organization), organization, len(user), user, key)
}
