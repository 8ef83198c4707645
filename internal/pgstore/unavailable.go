package pgstore

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// Unavailable reports whether err means the database cannot be reached or
// the connection to it was lost: a store answers such an error with the
// retryable code unavailable. A refused statement (a constraint violation,
// a syntax error, a statement timeout) is not: the database answered.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return unavailableCode(pgErr.Code)
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connectErr), errors.As(err, &netErr):
		return true
	case errors.Is(err, pgconn.ErrConnClosed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	// pgconn wraps a connection lost mid-query in an unexported error
	// whose only mark is its text.
	return strings.Contains(err.Error(), "conn closed")
}

// unavailableCode reports whether a server's SQLSTATE says it cannot serve
// the session: class 08 (connection exception), the server shutting down
// or starting (57P01-57P03), or no connection slot left (53300).
func unavailableCode(code string) bool {
	switch code {
	case "57P01", "57P02", "57P03", "53300":
		return true
	}
	return strings.HasPrefix(code, "08")
}
