// Package proofs defines lethe's audit leaves, signed checkpoints and proof
// documents, and verifies proofs offline. It is pure: no I/O, no clock, no
// logging. Everything an auditor needs to check a proof is the proof and the
// log's public key.
//
// The package is public so that an auditor, a portal or another tool can
// check lethe's proofs in Go without lethe's service code, as sumdb's tlog
// and note packages are for the Go checksum database; `lethe verify` is a
// thin command over it. Its only dependencies are the standard library,
// golang.org/x/mod/sumdb/note and github.com/transparency-dev/merkle.
//
// # Leaves
//
// A leaf is one audited event, encoded as compact JSON with a fixed field
// order (see [Leaf]). [ParseLeaf] accepts only the exact bytes
// [Leaf.Marshal] produces, so a leaf has one encoding and one hash. A leaf
// never carries personal data: a data subject appears only as a salted
// [Commitment], SHA-256("lethe/subject/v1" || nonce || subject).
//
// # Signatures
//
// The log has one Ed25519 key, written as a [signed note] key. It signs
// every leaf (a raw Ed25519 signature over the exact leaf bytes, see
// [Signer.SignLeaf]) and every checkpoint (a [tlog-checkpoint] body signed as
// a note, see [Signer.SignCheckpoint]). A leaf never ends in a newline and a
// checkpoint body always does, so one signature can never stand for the
// other.
//
// # Tree
//
// The audit log is an [RFC 6962] Merkle tree over SHA-256: the leaf hash is
// SHA-256(0x00 || leaf) and an interior node is SHA-256(0x01 || left ||
// right). Inclusion and consistency proofs are RFC 6962's (section 2.1.1 and
// 2.1.2), verified with github.com/transparency-dev/merkle.
//
// # Proofs
//
// A [Proof] bundles a leaf, its signature, its index, an inclusion proof and a
// signed checkpoint, optionally with a consistency proof from an older tree
// size. It is written as JSON ([Proof.Marshal], format "lethe.proof/v1") or
// as a [tlog-proof] text file ([Proof.MarshalTlogProof]) whose extra data
// carries the lethe-specific fields. [Verify] checks a proof and returns a
// typed error, implementing [CheckError], that names the first check that
// failed.
//
// [signed note]: https://c2sp.org/signed-note
// [tlog-checkpoint]: https://c2sp.org/tlog-checkpoint
// [tlog-proof]: https://c2sp.org/tlog-proof
// [RFC 6962]: https://www.rfc-editor.org/rfc/rfc6962
package proofs
