package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lethe-io/lethe/internal/grains"
)

// TestRetryMoved drives retryMoved with transactions that fail a given
// number of times: a chain that moved or a lock conflict (deadlock, lock
// not available) is tried again, five tries in all; a chain still moving
// at the fifth answers code conflict with a hint, a lock conflict at the
// fifth is returned as it is (translate gives it its code:
// TestTranslateLockConflicts); any other error ends the retries at once.
func TestRetryMoved(t *testing.T) {
	deadlock := &pgconn.PgError{Code: "40P01", Message: "deadlock detected"}
	noLock := &pgconn.PgError{Code: "55P03", Message: "could not obtain lock"}
	other := errors.New("disk full")
	for _, tc := range []struct {
		fail      error
		failures  int
		wantTries int
		want      func(error) bool
	}{
		{errChainMoved, 0, 1, isNil},
		{errChainMoved, 4, 5, isNil},
		{errChainMoved, 5, 5, isCode(grains.CodeConflict)},
		{errChainMoved, 9, 5, isCode(grains.CodeConflict)},
		{deadlock, 4, 5, isNil},
		{deadlock, 5, 5, func(err error) bool { return errors.Is(err, deadlock) }},
		{noLock, 1, 2, isNil},
		{fmt.Errorf("delete grains: %w", deadlock), 2, 3, isNil},
		{other, 1, 1, func(err error) bool { return errors.Is(err, other) }},
	} {
		tries := 0
		err := retryMoved(func() error {
			tries++
			if tries <= tc.failures {
				return tc.fail
			}
			return nil
		})
		if tries != tc.wantTries || !tc.want(err) {
			t.Errorf("%v failing %d times: %d tries, %v; want %d tries", tc.fail, tc.failures, tries, err, tc.wantTries)
		}
	}
}

func isNil(err error) bool { return err == nil }

func isCode(code grains.Code) func(error) bool {
	return func(err error) bool {
		var e *grains.Error
		return errors.As(err, &e) && e.Code == code && e.Hint != ""
	}
}

// TestTranslateLockConflicts: PostgreSQL's transient lock errors, wrapped
// as the statements wrap them, answer codes a caller can act on (try
// again), not internal; the database's own text stays out of the message.
func TestTranslateLockConflicts(t *testing.T) {
	for _, tc := range []struct {
		pg   string
		want grains.Code
	}{
		{"40P01", grains.CodeConflict},
		{"40001", grains.CodeConflict},
		{"55P03", grains.CodeUnavailable},
		{"23502", grains.CodeInternal}, // not_null_violation: a bug
	} {
		pe := &pgconn.PgError{Code: tc.pg, Message: "detail from the database"}
		err := translate(fmt.Errorf("delete grains: %w", pe), "forget grains")
		var e *grains.Error
		if !errors.As(err, &e) || e.Code != tc.want || !errors.Is(err, pe) {
			t.Errorf("%s: %v; want code %s wrapping the cause", tc.pg, err, tc.want)
			continue
		}
		if tc.want != grains.CodeInternal && (e.Hint == "" || strings.Contains(e.Message, "detail from the database")) {
			t.Errorf("%s: message %q, hint %q", tc.pg, e.Message, e.Hint)
		}
	}
}
