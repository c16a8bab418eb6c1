package history

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lethe-io/lethe/proofs"
)

// h returns a fake grain hash named by a letter.
func h(c string) string { return strings.Repeat(c, 64) }

// rows is an in-memory Rows.
type rows map[string]Row

func (r rows) Rows(_ context.Context, hashes []string) (map[string]Row, error) {
	out := map[string]Row{}
	for _, x := range hashes {
		if row, ok := r[x]; ok {
			out[x] = row
		}
	}
	return out, nil
}

type failing struct{}

func (failing) Rows(context.Context, []string) (map[string]Row, error) {
	return nil, errors.New("store down")
}

// log builds events in commit order.
type log []Event

func (l *log) add(typ proofs.EventType, actor string, fill func(*proofs.Leaf)) {
	n := len(*l)
	lf := &proofs.Leaf{V: 1, ID: strings.Repeat("0", 31) + string(rune('a'+n)), Type: typ, Memory: "m",
		Time: time.Unix(int64(1000+n), 0).UTC(), Actor: actor}
	fill(lf)
	*l = append(*l, Event{Order: int64(n + 1), ID: lf.ID, Leaf: lf, Index: uint64(n), Sequenced: true})
}

func (l *log) supersede(old, new, actor string) {
	l.add(proofs.EventGrainSupersede, actor, func(lf *proofs.Leaf) { lf.Hashes = []string{old, new} })
}

func hashes(c Chain) string {
	var b strings.Builder
	for _, v := range c.Versions {
		b.WriteString(v.Hash[:1] + ":" + v.State + " ")
	}
	return strings.TrimSpace(b.String())
}

func types(c Chain) string {
	var out []string
	for _, e := range c.Events {
		out = append(out, string(e.Leaf.Type))
	}
	return strings.Join(out, ",")
}

func TestChains(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		rows       rows
		log        func(l *log)
		seeds      []string
		want       []string // per chain: hash:state ...
		wantEvents []string // per chain: event types
	}{
		{
			name: "live chain from any version",
			rows: rows{
				h("a"): {SupersededBy: h("b"), Fields: []byte(`{}`)},
				h("b"): {Supersedes: h("a"), SupersededBy: h("c"), Fields: []byte(`{}`)},
				h("c"): {Supersedes: h("b"), Fields: []byte(`{}`)},
			},
			log:        func(l *log) { l.supersede(h("a"), h("b"), "t1"); l.supersede(h("b"), h("c"), "t2") },
			seeds:      []string{h("b"), h("c")},
			want:       []string{"a:superseded b:superseded c:current"},
			wantEvents: []string{"grain.supersede,grain.supersede"},
		},
		{
			name: "forgotten chain: the log alone",
			log: func(l *log) {
				l.supersede(h("a"), h("b"), "t1")
				l.add(proofs.EventGrainForget, "dpo", func(lf *proofs.Leaf) { lf.Hashes = []string{h("a"), h("b")} })
			},
			seeds:      []string{h("a")},
			want:       []string{"a:forgotten b:forgotten"},
			wantEvents: []string{"grain.supersede,grain.forget"},
		},
		{
			name: "erased rows link their key.erase event",
			rows: rows{
				h("a"): {SupersededBy: h("b"), Erased: true, KeyFingerprints: []string{h("f")}},
				h("b"): {Supersedes: h("a"), Erased: true, KeyFingerprints: []string{h("f")}},
			},
			log: func(l *log) {
				l.supersede(h("a"), h("b"), "t1")
				l.add(proofs.EventKeyErase, "dpo", func(lf *proofs.Leaf) { lf.KeyFingerprints = []string{h("e"), h("f")} })
				l.add(proofs.EventKeyErase, "dpo", func(lf *proofs.Leaf) { lf.KeyFingerprints = []string{h("e")} })
			},
			seeds:      []string{h("b")},
			want:       []string{"a:erased b:erased"},
			wantEvents: []string{"grain.supersede,key.erase"},
		},
		{
			name: "erased and cleaned up: linked to its key.erase by the cleaner's link",
			rows: rows{
				h("a"): {Erased: true, Deleted: true, KeyFingerprints: []string{h("f")}, Destroyed: []string{h("f")}},
				h("b"): {Erased: true, Deleted: true, KeyFingerprints: []string{h("f")}, Destroyed: []string{h("f")}},
			},
			log: func(l *log) {
				l.supersede(h("a"), h("b"), "t1")
				l.add(proofs.EventKeyErase, "dpo", func(lf *proofs.Leaf) { lf.KeyFingerprints = []string{h("f")} })
			},
			seeds:      []string{h("a")},
			want:       []string{"a:erased b:erased"},
			wantEvents: []string{"grain.supersede,key.erase"},
		},
		{
			name: "erased and cleaned up before the links were kept: erased, without its key.erase",
			log: func(l *log) {
				l.supersede(h("a"), h("b"), "t1")
				l.add(proofs.EventKeyErase, "dpo", func(lf *proofs.Leaf) { lf.KeyFingerprints = []string{h("f")} })
			},
			seeds:      []string{h("a")},
			want:       []string{"a:erased b:erased"},
			wantEvents: []string{"grain.supersede"},
		},
		{
			name: "a bulk forget found through its stored hash list",
			log: func(l *log) {
				l.supersede(h("a"), h("b"), "t1")
				list := []string{h("b"), h("x"), h("y")}
				l.add(proofs.EventGrainForget, "dpo", func(lf *proofs.Leaf) {
					n := uint64(len(list))
					lf.Count, lf.Digest = &n, proofs.HashesDigest(list)
				})
				(*l)[len(*l)-1].Hashes = list
				// Without its list, a bulk event names nothing.
				l.add(proofs.EventGrainPurge, "local", func(lf *proofs.Leaf) {
					n := uint64(300)
					lf.Count, lf.Digest = &n, proofs.HashesDigest([]string{h("a")})
				})
			},
			seeds:      []string{h("a")},
			want:       []string{"a:erased b:forgotten"},
			wantEvents: []string{"grain.supersede,grain.forget"},
		},
		{
			name: "an erased successor, superseded again from the old version",
			rows: rows{
				h("a"): {SupersededBy: h("c"), Fields: []byte(`{}`)},
				h("b"): {Supersedes: h("a"), Erased: true},
				h("c"): {Supersedes: h("a"), Fields: []byte(`{}`)},
			},
			log:        func(l *log) { l.supersede(h("a"), h("b"), "t1"); l.supersede(h("a"), h("c"), "t2") },
			seeds:      []string{h("c")},
			want:       []string{"a:superseded b:erased c:current"},
			wantEvents: []string{"grain.supersede,grain.supersede"},
		},
		{
			name: "two chains, archive and other chains' events",
			rows: rows{
				h("a"): {Fields: []byte(`{}`)},
				h("d"): {Fields: []byte(`{}`)},
				h("x"): {Fields: []byte(`{}`)},
			},
			log: func(l *log) {
				l.add(proofs.EventGrainArchive, "local", func(lf *proofs.Leaf) { lf.Hashes = []string{h("a"), h("x")} })
				l.supersede(h("x"), h("y"), "t")
			},
			seeds:      []string{h("a"), h("d"), h("a")},
			want:       []string{"a:current", "d:current"},
			wantEvents: []string{"grain.archive", ""},
		},
		{
			name:  "unknown hash: no chain",
			seeds: []string{h("z")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var l log
			if tc.log != nil {
				tc.log(&l)
			}
			got, err := Chains(ctx, tc.rows, l, tc.seeds)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d chains, want %d", len(got), len(tc.want))
			}
			for i, c := range got {
				if hashes(c) != tc.want[i] || types(c) != tc.wantEvents[i] {
					t.Errorf("chain %d: %s [%s], want %s [%s]", i, hashes(c), types(c), tc.want[i], tc.wantEvents[i])
				}
			}
		})
	}
}

func TestChainLinks(t *testing.T) {
	var l log
	l.supersede(h("a"), h("b"), "tok-1")
	l.supersede(h("a"), h("c"), "tok-2")
	r := rows{h("a"): {SupersededBy: h("c"), Fields: []byte(`{}`)}, h("c"): {Supersedes: h("a"), Fields: []byte(`{}`)}}
	got, err := Chains(context.Background(), r, l, []string{h("a")})
	if err != nil || len(got) != 1 {
		t.Fatal(err, len(got))
	}
	a, b := got[0].Versions[0], got[0].Versions[1]
	if a.SupersededBy != h("c") || a.SupersededByActor != "tok-2" || !a.SupersededAt.Equal(l[1].Leaf.Time) {
		t.Errorf("a: superseded by %s (%s at %v), want c by tok-2", a.SupersededBy, a.SupersededByActor, a.SupersededAt)
	}
	if b.Supersedes != h("a") || b.SupersededBy != "" || b.Fields != nil {
		t.Errorf("b (no row): %+v", b)
	}
	if Latest(got) != &got[0].Events[1] {
		t.Error("Latest is not the last committed event")
	}
	if _, err := Chains(context.Background(), failing{}, l, []string{h("a")}); err == nil {
		t.Error("a store error was swallowed")
	}
}

// TestErasedBy checks that an erased version names the destroyed keys that
// a key.erase event of the log names, whether its row remains or only the
// cleaner's link does, and that a readable version names none.
func TestErasedBy(t *testing.T) {
	var l log
	l.supersede(h("a"), h("b"), "t1")
	l.supersede(h("b"), h("c"), "t1")
	l.add(proofs.EventKeyErase, "dpo", func(lf *proofs.Leaf) { lf.KeyFingerprints = []string{h("f"), h("g")} })
	r := rows{
		h("a"): {Erased: true, Deleted: true, KeyFingerprints: []string{h("f")}, Destroyed: []string{h("f")}},
		// h("e") was destroyed, but no event of this memory names it.
		h("b"): {Supersedes: h("a"), SupersededBy: h("c"), Erased: true, KeyFingerprints: []string{h("f"), h("g"), h("e")},
			Destroyed: []string{h("g"), h("f"), h("e")}},
		h("c"): {Supersedes: h("b"), Fields: []byte(`{}`), KeyFingerprints: []string{h("k")}},
	}
	got, err := Chains(context.Background(), r, l, []string{h("c")})
	if err != nil || len(got) != 1 || len(got[0].Versions) != 3 {
		t.Fatal(err, got)
	}
	want := [][]string{{h("f")}, {h("f"), h("g")}, nil}
	for i, v := range got[0].Versions {
		if strings.Join(v.ErasedBy, ",") != strings.Join(want[i], ",") {
			t.Errorf("version %d erased by %v, want %v", i, v.ErasedBy, want[i])
		}
	}
	if types(got[0]) != "grain.supersede,grain.supersede,key.erase" {
		t.Errorf("events %s", types(got[0]))
	}
}
