package grains

import "testing"

func TestHoldCover(t *testing.T) {
	scope := HoldCover{Kind: HoldScope, Scope: "acme/prod"}
	user := HoldCover{Kind: HoldUser, UserRef: []byte("ref-1")}
	tests := []struct {
		name    string
		cover   HoldCover
		scope   string
		userRef []byte
		want    bool
	}{
		{"scope itself", scope, "acme/prod", nil, true},
		{"below the scope", scope, "acme/prod/bot1", []byte("ref-2"), true},
		{"a sibling sharing a prefix", scope, "acme/production", nil, false},
		{"above the scope", scope, "acme", nil, false},
		{"the root scope", scope, "", nil, false},
		{"the user", user, "any/where", []byte("ref-1"), true},
		{"another user", user, "", []byte("ref-2"), false},
		{"no user", user, "", nil, false},
		{"an unknown kind", HoldCover{Kind: "other", Scope: ""}, "", []byte("ref-1"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.cover.Covers(tt.scope, tt.userRef); got != tt.want {
				t.Errorf("Covers(%q, %q) = %v, want %v", tt.scope, tt.userRef, got, tt.want)
			}
		})
	}
}

func TestHoldCoverNestsWith(t *testing.T) {
	scope := HoldCover{Kind: HoldScope, Scope: "acme/prod"}
	tests := []struct {
		erase string
		want  bool
	}{
		{"acme/prod", true},
		{"acme", true},           // the erase destroys the held scope
		{"acme/prod/bot1", true}, // the erase destroys grains under the hold
		{"acme/dev", false},
		{"acme/production", false},
	}
	for _, tt := range tests {
		if got := scope.NestsWith(tt.erase); got != tt.want {
			t.Errorf("NestsWith(%q) = %v, want %v", tt.erase, got, tt.want)
		}
	}
	if (HoldCover{Kind: HoldUser, UserRef: []byte("r")}).NestsWith("acme") {
		t.Error("a user hold nests with a scope: the store decides that")
	}
}
