package store

import (
	"context"
	"encoding/hex"
	"path/filepath"
	"testing"
)

// BenchmarkResolve reads what a recall by user and one by scope prefix
// need before their statement (Filter.resolve), on SQLite, in a memory of
// 1,000 rows over 8 scopes.
func BenchmarkResolve(b *testing.B) {
	db, err := Open(context.Background(), Config{Dialect: SQLite, DSN: filepath.Join(b.TempDir(), "lethe.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	f := newFixture(b, db, 5)
	ctx := context.Background()
	if _, err := db.InsertGrains(ctx, f.memory, loadRows(f, 0, 1000, 1000), nil); err != nil {
		b.Fatal(err)
	}
	ref, _ := hex.DecodeString(f.users[3].Name)
	for _, c := range []struct {
		name string
		f    Filter
	}{{"user", Filter{Memory: f.memory, UserRef: ref}}, {"scope", Filter{Memory: f.memory, ScopePrefix: "acme"}}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				ff := c.f
				if err := ff.resolve(db.gorm.WithContext(ctx)); err != nil {
					b.Fatal(err)
				}
				if len(ff.userKeyIDs)+len(ff.scopes) == 0 {
					b.Fatal("nothing resolved")
				}
			}
		})
	}
}
