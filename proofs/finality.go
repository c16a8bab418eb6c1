package proofs

import "fmt"

// Finality is what a successful [VerifyFinality] established: the erased
// keys were wrapped under KEK versions up to ErasureKEKVersion, and a later
// event in the same log destroyed every version below TrimMinVersion, which
// is above it. Every copy of the wrapped keys (database residue, WAL
// archives, replicas, backups) is then undecryptable, provided the KEK
// operator's statement that trimmed versions are destroyed holds (Vault
// transit's trim; the local age KEK's identity file rewritten without them).
type Finality struct {
	Erasure, Trim *Verified
	// KEK names the key-encryption key both events concern.
	KEK string
	// ErasureKEKVersion is the erasure's kek_version; TrimMinVersion the
	// trim's kek_min_version.
	ErasureKEKVersion, TrimMinVersion uint64
}

// VerifyFinality checks that erasure (a key.erase proof) and trim (a
// kek.trim proof) from the same log show the erased keys dead everywhere:
//
//  1. erasure verifies as [Verify] checks it, with opts;
//  2. trim verifies likewise, with the erasure's checkpoint pinned: trim's
//     checkpoint must extend it, through trim's consistency proof from the
//     erasure's tree size (opts.Pinned, Subject and Nonce are not used for
//     trim);
//  3. finality: erasure is a key.erase event with a kek_version; trim is a
//     kek.trim event for the same KEK, at a later leaf index; and trim's
//     kek_min_version is above the erasure's kek_version
//     ([*FinalityError]).
//
// The first failure is returned as a [CheckError].
func VerifyFinality(erasure, trim *Proof, opts VerifyOptions) (*Finality, error) {
	ev, err := Verify(erasure, opts)
	if err != nil {
		return nil, err
	}
	topts := opts
	topts.Pinned, topts.Subject, topts.Nonce = []byte(erasure.Checkpoint), "", nil
	tv, err := Verify(trim, topts)
	if err != nil {
		return nil, err
	}
	f := &Finality{Erasure: ev, Trim: tv, KEK: ev.Leaf.KEK}
	if ev.Leaf.KEKVersion != nil {
		f.ErasureKEKVersion = *ev.Leaf.KEKVersion
	}
	if tv.Leaf.KEKMinVersion != nil {
		f.TrimMinVersion = *tv.Leaf.KEKMinVersion
	}
	fail := func(format string, args ...any) (*Finality, error) {
		return nil, &FinalityError{Reason: fmt.Sprintf(format, args...), ErasureKEKVersion: f.ErasureKEKVersion, TrimMinVersion: f.TrimMinVersion}
	}
	switch {
	case ev.Leaf.Type != EventKeyErase:
		return fail("the first proof is a %s event, not %s", ev.Leaf.Type, EventKeyErase)
	case ev.Leaf.KEKVersion == nil:
		return fail("the erasure names no kek_version (logged before lethe recorded it)")
	case tv.Leaf.Type != EventKEKTrim:
		return fail("the second proof is a %s event, not %s", tv.Leaf.Type, EventKEKTrim)
	case tv.Leaf.KEK != ev.Leaf.KEK:
		return fail("the trim concerns KEK %q, the erasure %q", tv.Leaf.KEK, ev.Leaf.KEK)
	case trim.LeafIndex <= erasure.LeafIndex:
		return fail("the trim (index %d) is not logged after the erasure (index %d)", trim.LeafIndex, erasure.LeafIndex)
	case f.TrimMinVersion <= f.ErasureKEKVersion:
		return fail("the trim keeps the KEK version that wrapped the erased keys")
	}
	return f, nil
}
