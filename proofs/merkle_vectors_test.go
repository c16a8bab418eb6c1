package proofs_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lethe-io/lethe/proofs"
)

// merkleVectors returns the directory holding github.com/transparency-dev/
// merkle's golden proof vectors (its testdata/ directory, with inclusion/
// and consistency/ below it); see testdata/merkle/README.md.
func merkleVectors(t *testing.T) string {
	t.Helper()
	for _, dir := range []string{os.Getenv("LETHE_MERKLE_VECTORS"), filepath.Join("testdata", "merkle")} {
		if dir == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "inclusion")); err == nil {
			return dir
		}
	}
	t.Skip("SKIPPED: transparency-dev/merkle vectors not found; set LETHE_MERKLE_VECTORS to a checkout's testdata directory (see testdata/merkle/README.md)")
	return ""
}

// walkVectors calls f for every JSON file under dir/sub and returns how
// many there were.
func walkVectors(t *testing.T, dir string, f func(name string, b []byte)) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n++
		f(strings.TrimPrefix(path, dir), b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestMerkleInclusionVectors(t *testing.T) {
	dir := filepath.Join(merkleVectors(t), "inclusion")
	n := walkVectors(t, dir, func(name string, b []byte) {
		var v struct {
			LeafIdx  uint64   `json:"leafIdx"`
			TreeSize uint64   `json:"treeSize"`
			Root     []byte   `json:"root"`
			LeafHash []byte   `json:"leafHash"`
			Proof    [][]byte `json:"proof"`
			Desc     string   `json:"desc"`
			WantErr  bool     `json:"wantErr"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		err := proofs.VerifyInclusion(v.LeafIdx, v.TreeSize, v.LeafHash, v.Proof, v.Root)
		if (err != nil) != v.WantErr {
			t.Errorf("%s (%s): VerifyInclusion = %v, want error %v", name, v.Desc, err, v.WantErr)
		}
		if err != nil && proofs.FailedCheck(err) != proofs.CheckInclusion {
			t.Errorf("%s: error %v is not an inclusion error", name, err)
		}
	})
	if n < 50 {
		t.Fatalf("only %d inclusion vectors found", n)
	}
	t.Logf("%d inclusion vectors", n)
}

func TestMerkleConsistencyVectors(t *testing.T) {
	dir := filepath.Join(merkleVectors(t), "consistency")
	n := walkVectors(t, dir, func(name string, b []byte) {
		var v struct {
			Size1   uint64   `json:"size1"`
			Size2   uint64   `json:"size2"`
			Root1   []byte   `json:"root1"`
			Root2   []byte   `json:"root2"`
			Proof   [][]byte `json:"proof"`
			Desc    string   `json:"desc"`
			WantErr bool     `json:"wantErr"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		err := proofs.VerifyConsistency(v.Size1, v.Size2, v.Proof, v.Root1, v.Root2)
		if (err != nil) != v.WantErr {
			t.Errorf("%s (%s): VerifyConsistency = %v, want error %v", name, v.Desc, err, v.WantErr)
		}
		if err != nil && proofs.FailedCheck(err) != proofs.CheckConsistency {
			t.Errorf("%s: error %v is not a consistency error", name, err)
		}
	})
	if n < 50 {
		t.Fatalf("only %d consistency vectors found", n)
	}
	t.Logf("%d consistency vectors", n)
}
