package lethe_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lethe-io/lethe"
)

// TestInputBounds: every identifier that enters the library is validated
// (NUL, size), every list in a query or batch is bounded, and a malformed
// scope path in an irreversible call is refused, never normalised (issue
// 15). Each case runs on every backend: PostgreSQL answered 500 for a NUL.
func TestInputBounds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		kept := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "s", UserID: "u1", Scope: "acme"})
		long := strings.Repeat("u", 100_000)
		many := make([]string, 65)
		for i := range many {
			many[i] = fmt.Sprintf("t%d", i)
		}
		batch := make([]lethe.Grain, 1025)
		tags64 := many[:64]
		for i := range batch {
			batch[i] = lethe.Grain{Type: "fact", Subject: fmt.Sprintf("b%d", i), Tags: tags64}
		}
		call := func(name string, code lethe.Code, err error) {
			t.Helper()
			if got := lethe.ErrorCode(err); got != code {
				t.Errorf("%s: code %q (%v), want %q", name, got, err, code)
			}
		}
		_, err := db.Recall(ctx, lethe.Query{Tags: many})
		call("recall 65 tags", "too_large", err)
		_, err = db.Recall(ctx, lethe.Query{Tags: []string{"t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t",
			"t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t",
			"t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t", "t"}})
		call("recall 65 repeated tags", "too_large", err)
		_, err = db.Recall(ctx, lethe.Query{Namespace: "a\x00b"})
		call("recall NUL namespace", "invalid_argument", err)
		_, err = db.Recall(ctx, lethe.Query{UserID: long})
		call("recall long user", "too_large", err)
		_, err = db.AddBatch(ctx, batch)
		call("batch of 65,600 tags", "too_large", err)
		_, err = db.Forget(ctx, lethe.Selector{UserID: "u\x00"})
		call("forget NUL user", "invalid_argument", err)
		_, err = db.Forget(ctx, lethe.Selector{Subject: long})
		call("forget long subject", "too_large", err)
		_, err = db.ForgetUser(ctx, "default", "u\x00")
		call("forget-user NUL", "invalid_argument", err)
		_, err = db.ForgetUser(ctx, "default", long)
		call("forget-user long", "too_large", err)
		_, err = db.SetHold(ctx, lethe.HoldSpec{UserID: long})
		call("hold long user", "too_large", err)
		_, err = db.SetHold(ctx, lethe.HoldSpec{Scope: "/acme//"})
		call("hold /acme//", "invalid_scope", err)
		_, err = db.SetHold(ctx, lethe.HoldSpec{Scope: "acme\x00"})
		call("hold NUL scope", "invalid_scope", err)
		for _, p := range []string{"/acme//", "acme//", "//acme", "acme//prod"} {
			_, err = db.EraseScope(ctx, "default", p)
			call("erase "+p, "invalid_scope", err)
			_, err = db.Add(ctx, lethe.Grain{Type: "fact", Subject: "x", Scope: p})
			call("add "+p, "invalid_scope", err)
		}
		_, err = db.ExportUser(ctx, "default", "u\x00", "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p")
		call("export NUL user", "invalid_argument", err)
		_, err = db.Proof(ctx, 0, 1<<64-1)
		call("proof size 2^64-1", "invalid_argument", err)
		// Nothing was erased or held: the grain under acme is still there.
		if _, err := db.Get(ctx, "default", kept); err != nil {
			t.Errorf("after the refused calls: %v", err)
		}
		if hs, err := db.Holds(ctx, "default"); err != nil || len(hs) != 0 {
			t.Errorf("holds after refused calls: %v %v", hs, err)
		}
		// One leading and one trailing slash are still accepted.
		if _, err := db.SetHold(ctx, lethe.HoldSpec{Scope: "/acme/"}); err != nil {
			t.Errorf("hold /acme/: %v", err)
		}
	})
}

// TestEmptyTags: an empty tag (or one of white space only) is refused,
// naming it, by Add, AddBatch and Supersede: Normalize dropped it, and the
// grain kept less than it was given. Nothing is written.
func TestEmptyTags(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		h := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "s", Tags: []string{"x"}})
		field := func(err error) string {
			var e *lethe.Error
			if !errors.As(err, &e) || e.Code != lethe.CodeInvalidArgument {
				return fmt.Sprintf("not invalid_argument: %v", err)
			}
			return e.Field
		}
		_, err := db.Add(ctx, lethe.Grain{Type: "fact", Subject: "t", Tags: []string{""}})
		if f := field(err); f != "tags[0]" {
			t.Errorf("add [\"\"]: %s, want tags[0]", f)
		}
		_, err = db.AddBatch(ctx, []lethe.Grain{{Type: "fact", Subject: "u"}, {Type: "fact", Subject: "v", Tags: []string{"a", " \t"}}})
		if f := field(err); f != "grains[1].tags[1]" {
			t.Errorf("batch: %s, want grains[1].tags[1]", f)
		}
		_, err = db.Supersede(ctx, h, lethe.Grain{Tags: []string{"y", ""}})
		if f := field(err); f != "tags[1]" {
			t.Errorf("supersede: %s, want tags[1]", f)
		}
		// An empty list still clears the tags.
		if _, err := db.Supersede(ctx, h, lethe.Grain{Tags: []string{}}); err != nil {
			t.Errorf("supersede tags []: %v", err)
		}
		p, err := db.Recall(ctx, lethe.Query{IncludeSuperseded: true})
		if err != nil || len(p.Grains) != 2 {
			t.Errorf("after the refused writes: %d grains, %v; want the first and its new version", len(p.Grains), err)
		}
	})
}

// TestHashListItems: a malformed hash in a list is refused naming the item
// (hashes[1]), not the list, by Forget and ArchiveGrains.
func TestHashListItems(t *testing.T) {
	db := openDB(t, lethe.Config{})
	ctx := context.Background()
	h := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "s"})
	for name, call := range map[string]func(hs []string) error{
		"forget": func(hs []string) error {
			_, err := db.Forget(ctx, lethe.Selector{Hashes: hs, DryRun: true})
			return err
		},
		"archive": func(hs []string) error { _, err := db.ArchiveGrains(ctx, "", hs); return err },
	} {
		var e *lethe.Error
		if err := call([]string{h, strings.ToUpper(h)}); !errors.As(err, &e) || e.Code != lethe.CodeInvalidArgument || e.Field != "hashes[1]" {
			t.Errorf("%s [h, H]: %v, want invalid_argument on hashes[1]", name, err)
		}
	}
}
