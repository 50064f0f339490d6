package pgstore

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tallyhq/tally/store"
)

// interpretError marks an unreachable or unanswering database
// store.ErrUnavailable (answered 503 with Retry-After), and nothing else.
func TestInterpretErrorUnavailable(t *testing.T) {
	opErr := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", fmt.Errorf("pgstore: begin: %w", opErr), true},
		{"unexpected EOF", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"conn closed", pgconn.ErrConnClosed, true},
		{"bad conn", driver.ErrBadConn, true},
		{"admin shutdown 57P01", &pgconn.PgError{Code: "57P01"}, true},
		{"starting up 57P03", &pgconn.PgError{Code: "57P03"}, true},
		{"statement timeout 57014", &pgconn.PgError{Code: "57014"}, true},
		{"lock timeout 55P03", &pgconn.PgError{Code: "55P03"}, true},
		{"too many connections 53300", &pgconn.PgError{Code: "53300"}, true},
		// After a failover the old primary is read-only; disk, memory and
		// connection slots run out: the store is unavailable, not the
		// request wrong (503 with Retry-After, never 500).
		{"read-only transaction 25006", &pgconn.PgError{Code: "25006"}, true},
		{"disk full 53100", &pgconn.PgError{Code: "53100"}, true},
		{"out of memory 53200", &pgconn.PgError{Code: "53200"}, true},
		{"configuration limit exceeded 53400", &pgconn.PgError{Code: "53400"}, true},
		{"connection failure 08006", &pgconn.PgError{Code: "08006"}, true},
		{"syntax error 42601", &pgconn.PgError{Code: "42601"}, false},
		{"check violation 23514", &pgconn.PgError{Code: "23514"}, false},
		{"client went away", context.Canceled, false},
		{"plain error", errors.New("boom"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := errors.Is(interpretError(tc.err), store.ErrUnavailable); got != tc.want {
				t.Errorf("errors.Is(interpretError(%v), store.ErrUnavailable) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
