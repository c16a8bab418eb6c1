package lethe_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/lethe-io/lethe"
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
