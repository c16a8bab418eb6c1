package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/lethe-io/lethe/internal/keys"
)

// TestPreviewEraseCountsReadableRows checks PreviewErase against a model:
// random writes of grains (a user, a scope), user and scope erasures, and
// previews of erasing a user, a scope or the memory. No cleaner runs (it
// is the library's), so the rows of earlier erasures stay in the table:
// a preview must count only the rows still readable, exactly what the
// erase would then make unreadable, per scope.
func TestPreviewEraseCountsReadableRows(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		run := 0
		rapid.Check(t, func(rt *rapid.T) {
			run++
			memory := fmt.Sprintf("pv%d", run)
			mk := newKey(t, db, memory, keys.KindMemory, "")
			scopes := []string{"a", "b", "c"}
			users := []string{"u0", "u1", "u2", "u3"}
			live := map[string]keys.Record{} // "scope:a", "user:u0" -> live key
			for _, s := range scopes {
				live["scope:"+s] = newKey(t, db, memory, keys.KindScope, s)
			}
			for _, u := range users {
				live["user:"+u] = newKey(t, db, memory, keys.KindUser, ref(u))
			}
			type grain struct{ user, scope string }
			var readable []grain // the model: readable grains
			n := 0
			count := func(keep func(g grain) bool) (int64, map[string]int64) {
				per := map[string]int64{}
				var total int64
				for _, g := range readable {
					if keep(g) {
						per[g.scope]++
						total++
					}
				}
				return total, per
			}
			specOf := func(kind keys.Kind, name string) (EraseSpec, func(grain) bool) {
				switch kind {
				case keys.KindUser:
					r, _ := hex.DecodeString(ref(name))
					return EraseSpec{Memory: memory, Kind: kind, Name: ref(name), UserRef: r, Now: time.Now().UnixMicro()},
						func(g grain) bool { return g.user == name }
				case keys.KindScope:
					return EraseSpec{Memory: memory, Kind: kind, Name: name, Now: time.Now().UnixMicro()},
						func(g grain) bool { return g.scope == name }
				}
				return EraseSpec{Memory: memory, Kind: kind, Now: time.Now().UnixMicro()}, func(grain) bool { return true }
			}
			pick := func(rt *rapid.T, label string) (keys.Kind, string) {
				if rapid.Bool().Draw(rt, label+"IsUser") {
					return keys.KindUser, rapid.SampledFrom(users).Draw(rt, label+"User")
				}
				return keys.KindScope, rapid.SampledFrom(scopes).Draw(rt, label+"Scope")
			}
			rt.Repeat(map[string]func(*rapid.T){
				"add": func(rt *rapid.T) {
					u, s := rapid.SampledFrom(users).Draw(rt, "user"), rapid.SampledFrom(scopes).Draw(rt, "scope")
					uk, uok := live["user:"+u]
					sk, sok := live["scope:"+s]
					if !uok || !sok {
						rt.Skip("erased")
					}
					k := rapid.IntRange(1, 4).Draw(rt, "rows")
					rows := make([]*GrainRow, k)
					for i := range rows {
						n++
						h := sha256.Sum256([]byte(fmt.Sprint(memory, "grain", n)))
						r, _ := hex.DecodeString(uk.Name)
						rows[i] = &GrainRow{Hash: hex.EncodeToString(h[:]), Memory: memory, Type: "fact", Namespace: "default", Scope: s,
							Importance: 0.5, Confidence: 1, Salience: 1, CreatedUS: 1,
							KeyChain:  fmt.Sprintf("%d.%d.%d", mk.ID, sk.ID, uk.ID),
							UserKeyID: uk.ID, UserRef: r, SubjectTok: tok(fmt.Sprint("s", n)), RelationTok: tok("r"), ObjectTok: tok("o"),
							DedupTok: tok(fmt.Sprint(memory, "dedup", n)), Blob: []byte("sealed")}
						readable = append(readable, grain{u, s})
					}
					if _, err := db.InsertGrains(ctx, memory, rows, nil); err != nil {
						rt.Fatal(err)
					}
				},
				"erase": func(rt *rapid.T) {
					kind, name := pick(rt, "erase")
					if _, ok := live[string(kind)+":"+name]; !ok {
						rt.Skip("erased")
					}
					spec, keep := specOf(kind, name)
					want, _ := count(keep)
					er, err := db.EraseKey(ctx, spec, func(context.Context, *Erasure) ([]Event, error) { return nil, nil })
					if err != nil {
						rt.Fatal(err)
					}
					if er.Count != want {
						rt.Fatalf("erase %s %s: count %d, model %d", kind, name, er.Count, want)
					}
					delete(live, string(kind)+":"+name)
					kept := readable[:0]
					for _, g := range readable {
						if !keep(g) {
							kept = append(kept, g)
						}
					}
					readable = kept
				},
				"preview": func(rt *rapid.T) {
					kind, name := pick(rt, "preview")
					if rapid.IntRange(0, 5).Draw(rt, "memory") == 0 {
						kind, name = keys.KindMemory, ""
					} else if _, ok := live[string(kind)+":"+name]; !ok {
						rt.Skip("erased")
					}
					spec, keep := specOf(kind, name)
					want, per := count(keep)
					pv, err := db.PreviewErase(ctx, spec)
					if err != nil {
						rt.Fatal(err)
					}
					if pv.Count != want || !maps.Equal(pv.Scopes, per) {
						rt.Fatalf("preview %s %q: %d %v, model %d %v", kind, name, pv.Count, pv.Scopes, want, per)
					}
				},
			})
		})
	})
}

// ref is the hex user reference of user u in these tests.
func ref(u string) string { return hex.EncodeToString(tok("user" + u)) }
