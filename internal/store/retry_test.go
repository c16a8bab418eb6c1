package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lethe-io/lethe/internal/grains"
)

// TestRetryMoved drives retryMoved with transactions that fail a given
// number of times: a chain that moved or a lock conflict (deadlock, lock
// not available) is tried again, five tries in all; a chain still moving
// at the fifth answers code conflict with a hint, a lock conflict at the
// fifth is returned as it is (translate makes it unavailable); any other
// error ends the retries at once.
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
