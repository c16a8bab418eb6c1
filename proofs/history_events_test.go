package proofs_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lethe-io/lethe/proofs"
	"github.com/lethe-io/lethe/proofs/internal/prooftest"
)

// bulkExport is a signed export of two single-version chains over a real
// log: a version forgotten by a bulk grain.forget event (300 hashes, so its
// leaf carries their count and digest) and a version erased by a key.erase
// event; the export holds the forget event's hash list and names the
// erasure's key on the erased version.
type bulkExport struct {
	log       *prooftest.Log
	forgotten string
	erased    string
	key       string
	list      []string
	digest    string
}

func newBulkExport(t testing.TB, count uint64) (*bulkExport, *proofs.HistoryExport) {
	t.Helper()
	r := prooftest.NewRand("bulk export")
	b := &bulkExport{log: prooftest.NewLog("bulk export", "lethe.test/audit"), key: r.Hex("key", 32)}
	for i := 0; i < 300; i++ {
		b.list = append(b.list, r.Hex(fmt.Sprintf("grain %d", i), 32))
	}
	b.forgotten, b.erased = b.list[117], r.Hex("erased grain", 32)
	slices.Sort(b.list)
	b.digest = proofs.HashesDigest(b.list)
	at := prooftest.Epoch
	b.log.Append(&proofs.Leaf{V: proofs.LeafVersion, ID: r.Hex("forget", 16), Type: proofs.EventGrainForget, Memory: "m",
		Time: at, Actor: "local", Count: &count, Digest: b.digest})
	one := uint64(1)
	b.log.Append(&proofs.Leaf{V: proofs.LeafVersion, ID: r.Hex("erase", 16), Type: proofs.EventKeyErase, Memory: "m",
		Time: at, Actor: "local", Count: &one, KeyFingerprints: []string{b.key}})
	cp := string(b.log.Checkpoint(2))
	x := &proofs.HistoryExport{Format: proofs.HistoryExportFormat, Memory: "m", ExportedAt: at.Add(time.Hour), Selector: "subject",
		Checkpoint: cp, HashLists: map[string][]string{b.digest: slices.Clone(b.list)},
		Chains: []proofs.HistoryChain{
			{Versions: []proofs.HistoryVersion{{Hash: b.forgotten, State: proofs.VersionForgotten}},
				Events: []proofs.HistoryEvent{{Type: proofs.EventGrainForget, Proof: b.log.Proof(0, 2)}}},
			{Versions: []proofs.HistoryVersion{{Hash: b.erased, State: proofs.VersionErased, ErasedBy: []string{b.key}}},
				Events: []proofs.HistoryEvent{{Type: proofs.EventKeyErase, Proof: b.log.Proof(1, 2)}}},
		}}
	return b, x
}

// TestVerifyHistoryBulkAndErasure checks the rules of bulk events' hash
// lists and erased versions' keys on a real log's proofs: each broken rule
// fails the chain check, and the export as lethe writes it verifies.
func TestVerifyHistoryBulkAndErasure(t *testing.T) {
	other := prooftest.NewRand("other").Hex("other", 32)
	tests := []struct {
		name  string
		count uint64
		edit  func(b *bulkExport, x *proofs.HistoryExport)
		want  proofs.Check
	}{
		{"valid", 300, nil, ""},
		{"no hash list", 300, func(b *bulkExport, x *proofs.HistoryExport) { x.HashLists = nil }, proofs.CheckChain},
		{"a hash changed", 300, func(b *bulkExport, x *proofs.HistoryExport) { x.HashLists[b.digest][3] = b.erased }, proofs.CheckChain},
		{"a hash dropped", 300, func(b *bulkExport, x *proofs.HistoryExport) {
			x.HashLists[b.digest] = x.HashLists[b.digest][1:]
		}, proofs.CheckChain},
		{"unsorted", 300, func(b *bulkExport, x *proofs.HistoryExport) {
			l := x.HashLists[b.digest]
			l[0], l[1] = l[1], l[0]
		}, proofs.CheckChain},
		{"a list no event carries", 300, func(b *bulkExport, x *proofs.HistoryExport) {
			x.HashLists[proofs.HashesDigest([]string{other})] = []string{other}
		}, proofs.CheckChain},
		{"the count differs", 301, nil, proofs.CheckChain},
		{"the version is not in the list", 300, func(b *bulkExport, x *proofs.HistoryExport) {
			x.Chains[0].Versions[0].Hash = other
		}, proofs.CheckChain},
		{"erased by another key", 300, func(b *bulkExport, x *proofs.HistoryExport) {
			x.Chains[1].Versions[0].ErasedBy = []string{other}
		}, proofs.CheckChain},
		{"erased_by on a forgotten version", 300, func(b *bulkExport, x *proofs.HistoryExport) {
			x.Chains[0].Versions[0].ErasedBy = []string{b.key}
		}, proofs.CheckChain},
		{"erased without erased_by", 300, func(b *bulkExport, x *proofs.HistoryExport) { x.Chains[1].Versions[0].ErasedBy = nil }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, x := newBulkExport(t, tc.count)
			if tc.edit != nil {
				tc.edit(b, x)
			}
			file, err := proofs.SealHistoryExport(x, b.log.Signer)
			if err != nil {
				t.Fatal(err)
			}
			v, err := proofs.VerifyHistoryExport(file, proofs.VerifyOptions{LogKey: b.log.VKey})
			if got := proofs.FailedCheck(err); got != tc.want || (tc.want == "") != (err == nil) {
				t.Fatalf("check %q (%v), want %q", got, err, tc.want)
			}
			if err == nil && (v.Versions != 2 || v.Events != 2) {
				t.Errorf("verified %d versions and %d events, want 2 and 2", v.Versions, v.Events)
			}
		})
	}
}
