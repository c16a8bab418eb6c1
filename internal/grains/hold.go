package grains

// The kinds of legal hold.
const (
	// HoldScope holds every grain under a scope prefix, whatever its user.
	HoldScope = "scope"
	// HoldUser holds every grain of one user, in every scope.
	HoldUser = "user"
)

// HoldCover is what a legal hold covers in its memory: every grain under a
// scope prefix (Kind HoldScope), or every grain of one user (Kind
// HoldUser), the user named by a blind reference, never by id. It is the
// one rule the store (refusing a forget or an erase) and the policies
// (skipping a candidate) apply.
type HoldCover struct {
	Kind    string
	Scope   string
	UserRef []byte
}

// Covers reports whether c covers a grain in scope written for the user
// with ref userRef (nil for a grain without user).
func (c HoldCover) Covers(scope string, userRef []byte) bool {
	switch c.Kind {
	case HoldScope:
		return InScope(scope, c.Scope)
	case HoldUser:
		return userRef != nil && string(c.UserRef) == string(userRef)
	}
	return false
}

// NestsWith reports whether a scope hold and an erase of scope (and
// everything below it) overlap: one scope is under the other, so the
// erase would destroy held grains. A user hold reports false: whether the
// user has grains under scope is a question for the store.
func (c HoldCover) NestsWith(scope string) bool {
	return c.Kind == HoldScope && (InScope(c.Scope, scope) || InScope(scope, c.Scope))
}
