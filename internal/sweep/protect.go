package sweep

import (
	"github.com/lethe-io/lethe/internal/store"
)

// Protected returns the first of rows that a protection rule of the policy
// keeps from an explicit forget, with the rule's refusal (code protected),
// or perr nil when none is. The rows are those a forget's transaction is
// about to delete (store.Deletion's Ops), every version of the chains it
// names, so a version a concurrent supersede added is checked as well.
// Forgets by subject or user are erasure requests about a person: their
// callers do not check (holds still refuse them).
func (s *Sweeper) Protected(rows []store.OpRow) (hash string, perr error) {
	for i := range rows {
		if perr := s.policy.CheckForget(factsOf(&rows[i])); perr != nil {
			return rows[i].Hash, perr
		}
	}
	return "", nil
}

// protectedRow reports whether a protection rule of the policy keeps r. A
// policy that deletes a chain (the decay purge, the risk sweep's drops)
// skips the whole chain when any of its versions is protected, as an
// explicit forget of it is refused: a chain whose newest version was
// unpinned on purpose still holds its pinned older version.
func (s *Sweeper) protectedRow(r store.OpRow) bool {
	prot, _, _ := s.policy.Protected(factsOf(&r))
	return prot
}
