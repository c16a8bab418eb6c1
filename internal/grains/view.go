package grains

import (
	"context"
	"slices"
)

// A View is a caller's partial view of one memory: a scope-limited API
// token sees the grains within its scopes, a locked MCP session those of
// its namespace and scope. What a view hides, it hides as if it did not
// exist:
//
//   - a hidden grain is [NoGrain], the answer for a hash that names none;
//   - a link (Supersedes, SupersededBy) to a hidden version is no link;
//   - a version chain leaves its hidden versions out;
//   - a forget passes over a hidden hash of a list as over a missing one,
//     and refuses, naming no hash, a grain whose chain holds a hidden
//     version (forgetting a grain forgets its whole chain).
//
// An erased version is always hidden: its namespace and scope can no
// longer be read. Every surface that serves a partial view (internal/api,
// internal/mcp) applies these rules through a View, so their answers
// agree.
type View struct {
	// Memory is the memory viewed ("" is the default one).
	Memory string
	// Sees reports whether the view shows g, a readable version.
	Sees func(g *Grain) bool
	// Get and History read the memory as the library's methods of the same
	// name do.
	Get     func(ctx context.Context, hash string) (*Grain, error)
	History func(ctx context.Context, hash string) ([]Grain, error)
	// Locate, when set, reads where several grains are in one call, as
	// lethe.DB.Locate does: each readable grain of hashes with its Hash,
	// Namespace and Scope (what Sees must decide by). HideLinks uses it for
	// the linked versions it does not hold; without it, it reads each with
	// Get.
	Locate func(ctx context.Context, hashes []string) (map[string]Grain, error)
	// Refuse is the error of a forget whose chain holds a hidden version,
	// for the field that named the grain; it must name no hash.
	Refuse func(field string) error
}

// Shows reports whether the view shows g.
func (v *View) Shows(g *Grain) bool { return !g.Erased && v.Sees(g) }

// Grain returns the grain hash, or NoGrain when the view hides it. Its
// links are as stored: see HideLinks.
func (v *View) Grain(ctx context.Context, hash string) (*Grain, error) {
	g, err := v.Get(ctx, hash)
	if err != nil {
		return nil, err
	}
	if !v.Shows(g) {
		return nil, NoGrain(v.Memory, hash)
	}
	return g, nil
}

// HideLinks clears the links of gs that name a version the view hides, or
// one that cannot be read (missing or erased), so that the caller learns
// no hash of a version it cannot get. The linked versions gs does not hold
// are looked up to learn whether the view shows them: in one call with
// Locate, else one Get each.
func (v *View) HideLinks(ctx context.Context, gs []Grain) error {
	shown := make(map[string]bool, len(gs))
	for i := range gs {
		shown[gs[i].Hash] = v.Shows(&gs[i])
	}
	var elsewhere []string
	for i := range gs {
		for _, link := range []string{gs[i].Supersedes, gs[i].SupersededBy} {
			if _, known := shown[link]; link != "" && !known {
				shown[link] = false // until looked up below
				elsewhere = append(elsewhere, link)
			}
		}
	}
	if err := v.lookUp(ctx, elsewhere, shown); err != nil {
		return err
	}
	for i := range gs {
		for _, link := range []*string{&gs[i].Supersedes, &gs[i].SupersededBy} {
			if *link != "" && !shown[*link] {
				*link = ""
			}
		}
	}
	return nil
}

// lookUp sets shown[h] for each of hashes: whether it names a readable
// grain the view shows.
func (v *View) lookUp(ctx context.Context, hashes []string, shown map[string]bool) error {
	if len(hashes) == 0 {
		return nil
	}
	if v.Locate != nil {
		found, err := v.Locate(ctx, hashes)
		if err != nil {
			return err
		}
		for _, h := range hashes {
			g, ok := found[h]
			shown[h] = ok && v.Shows(&g)
		}
		return nil
	}
	for _, h := range hashes {
		g, err := v.Get(ctx, h)
		switch code := ErrorCode(err); {
		case err == nil:
			shown[h] = v.Shows(g)
		case code == CodeNotFound || code == CodeErased:
		default:
			return err
		}
	}
	return nil
}

// Chain returns the version chain of hash, newest first, without the
// versions the view hides and with its links hidden (HideLinks); when the
// view hides hash itself it is NoGrain.
func (v *View) Chain(ctx context.Context, hash string) ([]Grain, error) {
	chain, err := v.History(ctx, hash)
	if err != nil {
		return nil, err
	}
	kept := chain[:0]
	for i := range chain {
		if v.Shows(&chain[i]) {
			kept = append(kept, chain[i])
		} else if chain[i].Hash == hash {
			return nil, NoGrain(v.Memory, hash)
		}
	}
	if err := v.HideLinks(ctx, kept); err != nil {
		return nil, err
	}
	if kept == nil {
		kept = []Grain{}
	}
	return kept, nil
}

// Forgettable returns the hashes of a forget the view may pass on, and
// refuses with Refuse(field(i)) the hash at index i when its chain holds a
// hidden version (field names what the caller sent: "hashes[i]" for an
// item of its list). A hash the view hides, or that names no grain or an
// erased one, is passed over; a forget by one hash (single) answers
// NoGrain for it instead, as the library does for a missing one. A hash
// of a chain already kept is passed over: its chain is forgotten once.
func (v *View) Forgettable(ctx context.Context, hashes []string, single bool, field func(i int) string) ([]string, error) {
	kept := make([]string, 0, len(hashes))
	seen := map[string]bool{}
	for i, h := range hashes {
		if seen[h] {
			continue
		}
		chain, err := v.History(ctx, h)
		if code := ErrorCode(err); code == CodeNotFound || code == CodeErased {
			if single {
				return nil, NoGrain(v.Memory, h)
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		if j := slices.IndexFunc(chain, func(g Grain) bool { return g.Hash == h }); j < 0 || !v.Shows(&chain[j]) {
			if single {
				return nil, NoGrain(v.Memory, h)
			}
			continue
		}
		for j := range chain {
			if !v.Shows(&chain[j]) {
				return nil, v.Refuse(field(i))
			}
			seen[chain[j].Hash] = true
		}
		kept = append(kept, h)
	}
	return kept, nil
}
