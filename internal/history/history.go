// Package history assembles and builds version-chain audit exports
// ([proofs.HistoryExport]): from seed grain hashes, the whole chain of each,
// read from the audit log's grain.supersede events and the grain rows that
// remain, with the events that concern each chain. The [Exporter] proves
// each event against one signed checkpoint, signs the document, encrypts
// it with age to its reader and audits the disclosure; it states its ports
// ([Store], [Opener], [Recaller], [Journal], [Prover]) and never imports
// package lethe.
//
// # Chains
//
// A chain is the set of versions linked by supersession. The links come
// from two places: the rows (supersedes, superseded_by) while they exist,
// and the grain.supersede events, which outlive the rows: a forgotten chain
// (rows hard-deleted) and a purged erased version are still found through
// the log. Versions are ordered by the log index of the event that created
// them (the first version has none).
//
// # Events
//
// A chain's events are its grain.supersede events, the grain.forget,
// grain.purge and grain.archive events listing one of its hashes, and the
// key.erase events naming the fingerprint of a destroyed key of one of its
// versions. An erased version whose row the cleaner has deleted is known by
// the link the cleaner left (its hash and the erasure key's fingerprint), so
// its key.erase event is still found. Bulk events past 256 hashes carry a
// digest, not hashes, in their leaf; the store keeps their hash lists
// ([Event].Hashes), which find them and let a verifier check the digest.
package history

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"time"

	"github.com/lethe-io/lethe/proofs"
)

// EventTypes are the event types a chain's events can have.
var EventTypes = []string{
	string(proofs.EventGrainSupersede), string(proofs.EventGrainForget), string(proofs.EventGrainPurge),
	string(proofs.EventGrainArchive), string(proofs.EventKeyErase),
}

// Event is a committed audit event of the memory.
type Event struct {
	Order     int64 // commit order
	ID        string
	Raw       []byte
	Leaf      *proofs.Leaf
	Index     uint64
	Sequenced bool
	// Hashes is the full hash list of a bulk event whose leaf carries a
	// digest instead; nil otherwise.
	Hashes []string
}

// Row is what the store holds about a version: its links and state, and
// the grain as JSON when it is readable.
type Row struct {
	Supersedes, SupersededBy string
	Erased                   bool
	KeyFingerprints          []string
	// Destroyed are the fingerprints of the destroyed keys of an erased
	// version.
	Destroyed []string
	// Deleted is set for an erased version whose row the cleaner deleted:
	// only Erased and Destroyed are known, the links come from the log.
	Deleted bool
	// Fields is the grain's JSON, nil when Erased.
	Fields json.RawMessage
}

// Rows reads versions: the consumer's port to the store.
type Rows interface {
	// Rows returns the Row of each of hashes that has a row; the others
	// are absent from the map. It must return a complete map or an error.
	Rows(ctx context.Context, hashes []string) (map[string]Row, error)
}

// Chain is one chain: its versions, and its events in log order.
type Chain struct {
	Versions []proofs.HistoryVersion
	Events   []Event
}

// Chains returns the chains of seeds (each chain once, in the order of its
// first seed), given the memory's events of [EventTypes] in commit order.
func Chains(ctx context.Context, rows Rows, events []Event, seeds []string) ([]Chain, error) {
	ix := index(events)
	known := map[string]Row{}
	present := map[string]bool{}
	done := map[string]bool{}
	var out []Chain
	for _, seed := range seeds {
		if done[seed] {
			continue
		}
		// Walk the links both ways, reading rows a frontier at a time.
		members := map[string]bool{seed: true}
		frontier := []string{seed}
		for len(frontier) > 0 {
			var need []string
			for _, h := range frontier {
				if _, ok := present[h]; !ok {
					need = append(need, h)
				}
			}
			if len(need) > 0 {
				got, err := rows.Rows(ctx, need)
				if err != nil {
					return nil, err
				}
				for _, h := range need {
					r, ok := got[h]
					present[h] = ok
					if ok {
						known[h] = r
					}
				}
			}
			var next []string
			add := func(h string) {
				if h != "" && !members[h] {
					members[h] = true
					next = append(next, h)
				}
			}
			for _, h := range frontier {
				if r, ok := known[h]; ok {
					add(r.Supersedes)
					add(r.SupersededBy)
				}
				if e := ix.creator[h]; e != nil {
					add(e.Leaf.Hashes[0])
				}
				for _, e := range ix.successors[h] {
					add(e.Leaf.Hashes[1])
				}
			}
			frontier = next
		}
		if len(members) == 1 && !present[seed] && len(ix.listing[seed]) == 0 {
			continue // the log and the store know nothing of it
		}
		for h := range members {
			done[h] = true
		}
		out = append(out, ix.chain(members, known))
	}
	return out, nil
}

// eventIndex indexes the events by grain hash and key fingerprint.
type eventIndex struct {
	creator    map[string]*Event   // new hash -> its supersede event
	successors map[string][]*Event // old hash -> supersede events, in order
	listing    map[string][]*Event // hash -> other events listing it
	keyErase   map[string][]*Event // key fingerprint -> key.erase events
}

func index(events []Event) *eventIndex {
	ix := &eventIndex{creator: map[string]*Event{}, successors: map[string][]*Event{}, listing: map[string][]*Event{}, keyErase: map[string][]*Event{}}
	for i := range events {
		e := &events[i]
		switch l := e.Leaf; {
		case l.Type == proofs.EventGrainSupersede && len(l.Hashes) == 2:
			ix.creator[l.Hashes[1]] = e
			ix.successors[l.Hashes[0]] = append(ix.successors[l.Hashes[0]], e)
		case l.Type == proofs.EventKeyErase:
			for _, f := range l.KeyFingerprints {
				ix.keyErase[f] = append(ix.keyErase[f], e)
			}
		default:
			hs := l.Hashes
			if l.Digest != "" {
				hs = e.Hashes
			}
			for _, h := range hs {
				ix.listing[h] = append(ix.listing[h], e)
			}
		}
	}
	return ix
}

// chain orders members and collects their events.
func (ix *eventIndex) chain(members map[string]bool, known map[string]Row) Chain {
	hashes := make([]string, 0, len(members))
	for h := range members {
		hashes = append(hashes, h)
	}
	order := func(h string) int64 {
		if e := ix.creator[h]; e != nil {
			return e.Order
		}
		return -1
	}
	sort.Slice(hashes, func(i, j int) bool {
		if oi, oj := order(hashes[i]), order(hashes[j]); oi != oj {
			return oi < oj
		}
		return hashes[i] < hashes[j]
	})
	var c Chain
	evs := map[*Event]bool{}
	for _, h := range hashes {
		v := proofs.HistoryVersion{Hash: h}
		r, ok := known[h]
		if ok && !r.Deleted {
			v.Supersedes, v.SupersededBy = r.Supersedes, r.SupersededBy
		} else {
			if e := ix.creator[h]; e != nil {
				v.Supersedes = e.Leaf.Hashes[0]
			}
			if s := ix.successors[h]; len(s) > 0 {
				v.SupersededBy = s[len(s)-1].Leaf.Hashes[1]
			}
		}
		if v.SupersededBy != "" {
			for _, e := range ix.successors[h] {
				if e.Leaf.Hashes[1] == v.SupersededBy {
					t := e.Leaf.Time
					v.SupersededAt, v.SupersededByActor = &t, e.Leaf.Actor
				}
			}
		}
		switch {
		case ok && !r.Erased:
			v.State, v.Fields = proofs.VersionCurrent, r.Fields
			if v.SupersededBy != "" {
				v.State = proofs.VersionSuperseded
			}
		case ok || !slices.ContainsFunc(ix.listing[h], isDeletion):
			v.State = proofs.VersionErased
		default:
			v.State = proofs.VersionForgotten
		}
		if v.State == proofs.VersionErased {
			for _, f := range r.Destroyed {
				if len(ix.keyErase[f]) > 0 && !slices.Contains(v.ErasedBy, f) {
					v.ErasedBy = append(v.ErasedBy, f)
				}
			}
			sort.Strings(v.ErasedBy)
		}
		c.Versions = append(c.Versions, v)
		if e := ix.creator[h]; e != nil {
			evs[e] = true
		}
		for _, e := range ix.listing[h] {
			evs[e] = true
		}
		for _, f := range r.KeyFingerprints {
			for _, e := range ix.keyErase[f] {
				evs[e] = true
			}
		}
	}
	for e := range evs {
		c.Events = append(c.Events, *e)
	}
	sort.Slice(c.Events, func(i, j int) bool { return c.Events[i].Order < c.Events[j].Order })
	return c
}

func isDeletion(e *Event) bool {
	return e.Leaf.Type == proofs.EventGrainForget || e.Leaf.Type == proofs.EventGrainPurge
}

// Latest returns the event of chains committed last, or nil.
func Latest(chains []Chain) *Event {
	var last *Event
	for i := range chains {
		for j := range chains[i].Events {
			if e := &chains[i].Events[j]; last == nil || e.Order > last.Order {
				last = e
			}
		}
	}
	return last
}

// Sorted returns a sorted copy of hashes: a bulk event's list as
// [proofs.HashesDigest] hashes it.
func Sorted(hashes []string) []string {
	out := slices.Clone(hashes)
	slices.Sort(out)
	return out
}

// Truncate returns t in UTC at whole seconds, the precision of leaf times.
func Truncate(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }
