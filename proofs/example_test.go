package proofs_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lethe-io/lethe/proofs"
)

// A log of one event: sign the leaf and the checkpoint, assemble the proof,
// verify it as an auditor would, with the verifier key only.
func Example() {
	// A test key from a fixed seed; a real log uses GenerateKey.
	skey, vkey, _ := proofs.NewKeyFromSeed("lethe.example/audit", make([]byte, 32))
	signer, _ := proofs.NewSigner(skey)

	nonce := make([]byte, proofs.NonceSize)                                // proofs.NewNonce() in real use
	grains := []string{strings.Repeat("ab", 32), strings.Repeat("cd", 32)} // hashes of the erased grains
	n := uint64(len(grains))
	leaf := &proofs.Leaf{
		V: proofs.LeafVersion, ID: "00112233445566778899aabbccddeeff", Type: proofs.EventKeyErase,
		Memory: "customer-support", Time: time.Date(2026, 11, 21, 10, 15, 30, 0, time.UTC), Actor: "local",
		Count: &n, Digest: proofs.HashesDigest(grains), Commitment: proofs.Commitment(nonce, "acme/prod/bot1"),
	}
	leafBytes, _ := leaf.Marshal()

	// A tree of one leaf: its root is the leaf hash, its inclusion proof empty.
	root := sha256.Sum256(append([]byte{0}, leafBytes...))
	note, _ := signer.SignCheckpoint(proofs.Checkpoint{Origin: "lethe.example/audit", Size: 1, Hash: root})
	proof, _ := proofs.NewProof(leafBytes, signer.SignLeaf(leafBytes), 0, 1, nil, note)

	v, err := proofs.Verify(proof, proofs.VerifyOptions{LogKey: vkey, Subject: "acme/prod/bot1", Nonce: nonce})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(v.Leaf.Type, v.Leaf.GrainCount(), "grains, tree size", v.Checkpoint.Size, "subject checked:", v.SubjectChecked)

	_, err = proofs.Verify(proof, proofs.VerifyOptions{LogKey: vkey, Subject: "acme/prod/bot2", Nonce: nonce})
	fmt.Println(proofs.FailedCheck(err))
	// Output:
	// key.erase 2 grains, tree size 1 subject checked: true
	// subject_commitment
}

// An auditor's offline check of a proof file (JSON or tlog-proof text, as
// "lethe verify" reads them): the file, the log's public key, an older
// checkpoint the auditor already trusts, and the subject with the nonce the
// data subject was given. No lethe service, database or network is involved.
func ExampleParseAnyProof() {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "vectors", name))
		if err != nil {
			log.Fatal(err)
		}
		return b
	}
	logKey := strings.TrimSpace(string(read("log.vkey")))
	pinned := read("checkpoint-9.txt")
	nonce, _ := hex.DecodeString("d1afa20fd60cdb36451920b68b6d88c7c81df6b68b116684f7d12d9ce5d36b96")

	for _, file := range []string{"valid-key-erase-pinned.json", "valid-key-erase-pinned.tlog-proof"} {
		p, err := proofs.ParseAnyProof(read(file))
		if err != nil {
			log.Fatal(err)
		}
		v, err := proofs.Verify(p, proofs.VerifyOptions{LogKey: logKey, Pinned: pinned, Subject: "acme/prod/bot1", Nonce: nonce})
		if err != nil {
			fmt.Println(file, "failed check:", proofs.FailedCheck(err))
			continue
		}
		fmt.Println(filepath.Ext(file), v.Leaf.Type, v.Leaf.GrainCount(), "grains; tree", v.Checkpoint.Size,
			"extends pinned", v.Pinned.Size, "subject:", v.SubjectChecked)
	}

	// The same file with another subject: the commitment does not open.
	p, _ := proofs.ParseAnyProof(read("valid-key-erase-pinned.json"))
	_, err := proofs.Verify(p, proofs.VerifyOptions{LogKey: logKey, Subject: "acme/prod/bot2", Nonce: nonce})
	fmt.Println(proofs.FailedCheck(err))
	// Output:
	// .json key.erase 3 grains; tree 24 extends pinned 9 subject: true
	// .tlog-proof key.erase 3 grains; tree 24 extends pinned 9 subject: true
	// subject_commitment
}
