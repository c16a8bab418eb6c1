package lethe_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"regexp"
	"strings"
	"testing"

	"filippo.io/age"
	"filippo.io/age/armor"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/proofs"
)

// Example is the README's library example, as written there (the test
// below keeps the two equal).
func Example() {
	dataDir, err := os.MkdirTemp("", "lethe-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dataDir)

	// README: begin
	ctx := context.Background()
	db, err := lethe.Open(ctx, lethe.Config{DataDir: dataDir})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	hash, err := db.Add(ctx, lethe.Grain{Type: "fact", Subject: "alice", Relation: "likes", Object: "tea", UserID: "u42"})
	if err != nil {
		log.Fatal(err)
	}
	page, err := db.Recall(ctx, lethe.Query{Subject: "alice"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(page.Grains), page.Grains[0].Hash == hash, page.Grains[0].Object)

	// Crypto-erase everything of user u42: one key destroyed, a signed proof back.
	er, err := db.ForgetUser(ctx, "default", "u42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(er.Count, er.Proof != nil) // er.Proof verifies offline: lethe verify
	// README: end

	// Output:
	// 1 true tea
	// 1 true
}

// ExampleOpen opens the embedded default: SQLite, a local age key and the
// audit log, all in one directory.
func ExampleOpen() {
	dataDir, err := os.MkdirTemp("", "lethe-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dataDir)

	db, err := lethe.Open(context.Background(), lethe.Config{DataDir: dataDir})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	_, err = os.Stat(dataDir + "/lethe.db")
	fmt.Println("database created:", err == nil)
	// Output:
	// database created: true
}

// openExample opens the embedded default in a temporary directory, for the
// examples below; done closes it and removes the directory.
func openExample() (db *lethe.DB, done func()) {
	dataDir, err := os.MkdirTemp("", "lethe-example")
	if err != nil {
		log.Fatal(err)
	}
	db, err = lethe.Open(context.Background(), lethe.Config{DataDir: dataDir})
	if err != nil {
		os.RemoveAll(dataDir)
		log.Fatal(err)
	}
	return db, func() { db.Close(); os.RemoveAll(dataDir) }
}

func ExampleDB_Add() {
	db, done := openExample()
	defer done()
	ctx := context.Background()

	hash, err := db.Add(ctx, lethe.Grain{Type: "fact", Subject: "alice", Relation: "likes", Object: "tea",
		UserID: "u42", Scope: "acme/support", Tags: []string{"drink"}, Importance: 0.7})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("hash is", len(hash), "hex digits")

	// Bad input is refused with a stable code, nothing written.
	_, err = db.Add(ctx, lethe.Grain{Type: "fact"})
	fmt.Println(lethe.ErrorCode(err) == lethe.CodeEmptyGrain)
	// Output:
	// hash is 64 hex digits
	// true
}

func ExampleDB_Recall() {
	db, done := openExample()
	defer done()
	ctx := context.Background()
	for _, object := range []string{"tea", "jazz", "rain"} {
		if _, err := db.Add(ctx, lethe.Grain{Type: "fact", Subject: "alice", Relation: "likes", Object: object}); err != nil {
			log.Fatal(err)
		}
	}
	if _, err := db.Add(ctx, lethe.Grain{Type: "fact", Subject: "bob", Relation: "likes", Object: "tea"}); err != nil {
		log.Fatal(err)
	}

	page, err := db.Recall(ctx, lethe.Query{Subject: "alice", Limit: 2})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(page.Grains), "of alice's grains, more:", page.Next != "")
	next, err := db.Recall(ctx, lethe.Query{Subject: "alice", Limit: 2, Cursor: page.Next})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(next.Grains), "more, more:", next.Next != "")

	tea, err := db.Recall(ctx, lethe.Query{Object: "tea"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(tea.Grains), "grains with object tea")
	// Output:
	// 2 of alice's grains, more: true
	// 1 more, more: false
	// 2 grains with object tea
}

func ExampleDB_Supersede() {
	db, done := openExample()
	defer done()
	ctx := context.Background()
	old, err := db.Add(ctx, lethe.Grain{Type: "fact", Subject: "alice", Relation: "lives_in", Object: "Lyon"})
	if err != nil {
		log.Fatal(err)
	}

	hash, err := db.Supersede(ctx, old, lethe.Grain{Type: "fact", Subject: "alice", Relation: "lives_in", Object: "Porto"})
	if err != nil {
		log.Fatal(err)
	}
	page, err := db.Recall(ctx, lethe.Query{Subject: "alice"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(page.Grains), page.Grains[0].Object, page.Grains[0].Hash == hash)
	chain, err := db.History(ctx, "default", hash)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(chain), "versions, the old one superseded:", chain[1].SupersededBy == hash)

	// A version has one successor.
	_, err = db.Supersede(ctx, old, lethe.Grain{Type: "fact", Subject: "alice", Relation: "lives_in", Object: "Oslo"})
	fmt.Println(lethe.ErrorCode(err) == lethe.CodeAlreadySuperseded)
	// Output:
	// 1 Porto true
	// 2 versions, the old one superseded: true
	// true
}

func ExampleDB_Forget() {
	db, done := openExample()
	defer done()
	ctx := context.Background()
	for _, object := range []string{"tea", "jazz"} {
		if _, err := db.Add(ctx, lethe.Grain{Type: "fact", Subject: "alice", Relation: "likes", Object: object}); err != nil {
			log.Fatal(err)
		}
	}

	// Hard-delete every grain about alice, every version, in one audited
	// transaction.
	res, err := db.Forget(ctx, lethe.Selector{Subject: "alice"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, res.Count, "proof:", res.Proof != nil)

	// An empty selector never means everything.
	_, err = db.Forget(ctx, lethe.Selector{})
	fmt.Println(lethe.ErrorCode(err) == lethe.CodeEmptySelector)
	// Output:
	// forgotten 2 proof: true
	// true
}

func ExampleDB_ForgetUser() {
	db, done := openExample()
	defer done()
	ctx := context.Background()
	hash, err := db.Add(ctx, lethe.Grain{Type: "fact", Subject: "alice", Relation: "likes", Object: "tea", UserID: "u42"})
	if err != nil {
		log.Fatal(err)
	}

	// Crypto-erase: destroy the user's key; its grains can never be read.
	er, err := db.ForgetUser(ctx, "default", "u42")
	if err != nil {
		log.Fatal(err)
	}
	_, err = db.Get(ctx, "default", hash)
	fmt.Println(er.Count, "grain erased, readable:", err == nil)

	// The proof verifies offline, with the log's public key only; the
	// nonce opens the leaf's commitment to the user id.
	nonce, err := hex.DecodeString(er.SubjectNonce)
	if err != nil {
		log.Fatal(err)
	}
	v, err := proofs.Verify(er.Proof, proofs.VerifyOptions{LogKey: db.AuditKey(), Subject: "u42", Nonce: nonce})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(v.Leaf.Type, "verified, subject checked:", v.SubjectChecked)
	// Output:
	// 1 grain erased, readable: false
	// key.erase verified, subject checked: true
}

func ExampleDB_ExportUser() {
	db, done := openExample()
	defer done()
	ctx := context.Background()
	for _, object := range []string{"tea", "jazz"} {
		if _, err := db.Add(ctx, lethe.Grain{Type: "fact", Subject: "alice", Relation: "likes", Object: object, UserID: "u42"}); err != nil {
			log.Fatal(err)
		}
	}

	// The requester's age identity; lethe only ever sees the recipient.
	requester, err := age.GenerateX25519Identity()
	if err != nil {
		log.Fatal(err)
	}
	x, err := db.ExportUser(ctx, "default", "u42", requester.Recipient().String())
	if err != nil {
		log.Fatal(err)
	}

	// What the requester does with the file (or: age -d -i key.txt).
	r, err := age.Decrypt(armor.NewReader(strings.NewReader(string(x.Data))), requester)
	if err != nil {
		log.Fatal(err)
	}
	plain, err := io.ReadAll(r)
	if err != nil {
		log.Fatal(err)
	}
	var export lethe.Export
	if err := json.Unmarshal(plain, &export); err != nil {
		log.Fatal(err)
	}
	fmt.Println(export.UserID, export.Count, "grains, audited:", x.EventID != "")
	// Output:
	// u42 2 grains, audited: true
}

func ExampleDB_SetHold() {
	db, done := openExample()
	defer done()
	ctx := context.Background()
	if _, err := db.Add(ctx, lethe.Grain{Type: "fact", Subject: "alice", Relation: "likes", Object: "tea", Scope: "acme/litigation"}); err != nil {
		log.Fatal(err)
	}

	hold, err := db.SetHold(ctx, lethe.HoldSpec{Memory: "default", Scope: "acme/litigation"})
	if err != nil {
		log.Fatal(err)
	}
	// Under the hold, destructive calls refuse (and the refusal is audited).
	_, err = db.Forget(ctx, lethe.Selector{Subject: "alice"})
	fmt.Println(hold.Kind, "hold; forget refused:", lethe.ErrorCode(err) == lethe.CodeHeld)

	if err := db.ReleaseHold(ctx, "default", hold.ID); err != nil {
		log.Fatal(err)
	}
	res, err := db.Forget(ctx, lethe.Selector{Subject: "alice"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("released; forgot", res.Count)
	// Output:
	// scope hold; forget refused: true
	// released; forgot 1
}

func ExampleErrorCode() {
	db, done := openExample()
	defer done()

	_, err := db.Get(context.Background(), "default", strings.Repeat("ab", 32))
	switch lethe.ErrorCode(err) {
	case lethe.CodeNotFound:
		fmt.Println("no such grain")
	case lethe.CodeUnavailable:
		fmt.Println("try again later")
	}
	var le *lethe.Error
	fmt.Println(errors.As(err, &le), le.Code)
	// Output:
	// no such grain
	// true not_found
}

// TestReadmeLibraryExample checks that README.md's Go block is the body of
// Example, line for line.
func TestReadmeLibraryExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```go\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no ```go block")
	}
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	body := regexp.MustCompile(`(?s)// README: begin\n(.*?)\t// README: end`).FindSubmatch(src)
	if body == nil {
		t.Fatal("example_test.go has no README markers")
	}
	var want []string
	for _, l := range strings.Split(strings.TrimRight(string(body[1]), "\n"), "\n") {
		want = append(want, strings.TrimPrefix(l, "\t"))
	}
	if got := strings.TrimRight(string(m[1]), "\n"); got != strings.Join(want, "\n") {
		t.Errorf("README.md's Go block differs from Example's body:\n--- README\n%s\n--- Example\n%s", got, strings.Join(want, "\n"))
	}
}
