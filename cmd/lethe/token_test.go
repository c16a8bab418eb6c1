package main

import (
	"errors"
	"testing"
	"time"

	"github.com/lethe-io/lethe/internal/api"
)

func TestTokenState(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	later, earlier := now.Add(time.Hour), now.Add(-time.Hour)
	for _, tt := range []struct {
		name string
		info api.TokenInfo
		want string
	}{
		{"live", api.TokenInfo{}, "live"},
		{"expires", api.TokenInfo{ExpiresAt: &later}, "live, expires 2026-05-01T13:00:00Z"},
		{"expires now", api.TokenInfo{ExpiresAt: &now}, "expired 2026-05-01T12:00:00Z"},
		{"expired", api.TokenInfo{ExpiresAt: &earlier}, "expired 2026-05-01T11:00:00Z"},
		{"revoked, expiring", api.TokenInfo{RevokedAt: &earlier, ExpiresAt: &later}, "revoked 2026-05-01T11:00:00Z"},
		{"revoked, expired", api.TokenInfo{RevokedAt: &earlier, ExpiresAt: &earlier}, "revoked 2026-05-01T11:00:00Z"},
	} {
		if got := tokenState(tt.info, now); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestTokenExpiryFlags(t *testing.T) {
	at := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name, in, at string
		wantIn       int64 // 0: none
		wantAt       *time.Time
		wantErr      bool
	}{
		{"neither", "", "", 0, nil, false},
		{"8h", "8h", "", 28800, nil, false},
		{"90m", "90m", "", 5400, nil, false},
		{"negative is the store's to refuse", "-1h", "", -3600, nil, false},
		{"at", "", "2026-07-01T00:00:00Z", 0, &at, false},
		{"at with an offset", "", "2026-07-01T02:00:00+02:00", 0, &at, false},
		{"days", "30d", "", 0, nil, true},
		{"a fraction of a second", "1500ms", "", 0, nil, true},
		{"a number", "3600", "", 0, nil, true},
		{"at a date", "", "2026-07-01", 0, nil, true},
		{"both", "1h", "2026-07-01T00:00:00Z", 0, nil, true},
	} {
		in, gotAt, err := tokenExpiry(tt.in, tt.at)
		switch {
		case tt.wantErr:
			var ue *usageError
			if err == nil || !errors.As(err, &ue) {
				t.Errorf("%s: %v %v, %v; want a usage error", tt.name, in, gotAt, err)
			}
			continue
		case err != nil:
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if (in == nil) != (tt.wantIn == 0) || (in != nil && *in != tt.wantIn) {
			t.Errorf("%s: expires_in %v, want %d", tt.name, in, tt.wantIn)
		}
		if (gotAt == nil) != (tt.wantAt == nil) || (gotAt != nil && !gotAt.Equal(*tt.wantAt)) {
			t.Errorf("%s: expires_at %v, want %v", tt.name, gotAt, tt.wantAt)
		}
	}
}
