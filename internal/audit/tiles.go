package audit

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// This file serves the log as [c2sp.org/tlog-tiles]: tiles of 256 Merkle
// tree hashes and bundles of 256 entries, read from either backend through
// Log.NodeHashes and Log.Leaves.
//
// [c2sp.org/tlog-tiles]: https://c2sp.org/tlog-tiles

// TileWidth is the number of hashes in a full tile and of entries in a full
// entry bundle; TileHeight is log2 of it.
const (
	TileWidth  = 256
	TileHeight = 8
)

// maxEntryBytes is the largest entry an entry bundle can hold: entries are
// prefixed with a big-endian uint16 length.
const maxEntryBytes = 1<<16 - 1

// ErrTileNotFound means a tile or entry bundle that the tree of the given
// size does not (yet) contain was asked for.
var ErrTileNotFound = errors.New("audit: no such tile at this tree size")

// TilePath is a tlog-tiles resource: the Merkle tree tile
// tile/<L>/<N>[.p/<W>], or the entry bundle tile/entries/<N>[.p/<W>].
type TilePath struct {
	// Entries is true for an entry bundle; Level is then 0.
	Entries bool
	// Level is the tile's level, 0 to 63: its hashes are those of the
	// subtrees of 256^Level leaves.
	Level uint8
	// Index is the tile's index within its level.
	Index uint64
	// Width is the number of hashes or entries: 256 for a full tile, 1 to
	// 255 for a partial one (the ".p/<W>" suffix).
	Width int
}

// ParseTilePath parses a tile path relative to the log's prefix, such as
// "tile/0/x001/x234/067.p/8" or "tile/entries/000". It is strict: levels and
// widths have no leading zeros, every index element has three digits, all
// but the last start with "x", and the index has no superfluous leading
// "x000" element, so that each resource has exactly one path.
func ParseTilePath(p string) (TilePath, error) {
	var t TilePath
	rest, ok := strings.CutPrefix(p, "tile/")
	if !ok {
		return t, fmt.Errorf("tile path %q does not start with tile/", p)
	}
	level, rest, ok := strings.Cut(rest, "/")
	if !ok {
		return t, fmt.Errorf("tile path %q has no index", p)
	}
	if level == "entries" {
		t.Entries = true
	} else {
		l, err := parseSmall(level, 0, 63)
		if err != nil {
			return t, fmt.Errorf("tile path %q: level: %w", p, err)
		}
		t.Level = uint8(l)
	}
	t.Width = TileWidth
	if index, width, partial := strings.Cut(rest, ".p/"); partial {
		w, err := parseSmall(width, 1, TileWidth-1)
		if err != nil {
			return t, fmt.Errorf("tile path %q: width: %w", p, err)
		}
		t.Width, rest = w, index
	}
	elems := strings.Split(rest, "/")
	if len(elems) > 7 { // 2^64 has 20 digits: at most 7 elements
		return t, fmt.Errorf("tile path %q: index too long", p)
	}
	for i, e := range elems {
		last := i == len(elems)-1
		if !last {
			var ok bool
			if e, ok = strings.CutPrefix(e, "x"); !ok {
				return t, fmt.Errorf("tile path %q: index element %q does not start with x", p, elems[i])
			}
			if i == 0 && e == "000" {
				return t, fmt.Errorf("tile path %q: index has a leading x000 element", p)
			}
		}
		if len(e) != 3 || strings.Trim(e, "0123456789") != "" {
			return t, fmt.Errorf("tile path %q: index element %q is not three digits", p, elems[i])
		}
		d, _ := strconv.ParseUint(e, 10, 64)
		hi, lo := bits.Mul64(t.Index, 1000)
		if hi != 0 || lo+d < lo {
			return t, fmt.Errorf("tile path %q: index overflows", p)
		}
		t.Index = lo + d
	}
	return t, nil
}

// parseSmall parses a decimal in [min, max] with no leading zeros.
func parseSmall(s string, min, max int) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < min || n > max || strconv.Itoa(n) != s {
		return 0, fmt.Errorf("%q is not a decimal in [%d, %d] without leading zeros", s, min, max)
	}
	return n, nil
}

// String returns the tile's path, the inverse of [ParseTilePath].
func (t TilePath) String() string {
	var b strings.Builder
	b.WriteString("tile/")
	if t.Entries {
		b.WriteString("entries")
	} else {
		b.WriteString(strconv.Itoa(int(t.Level)))
	}
	b.WriteByte('/')
	b.WriteString(encodeTileIndex(t.Index))
	if t.Width < TileWidth {
		b.WriteString(".p/")
		b.WriteString(strconv.Itoa(t.Width))
	}
	return b.String()
}

// encodeTileIndex encodes n as zero-padded three-digit path elements, all
// but the last prefixed with "x": 1234067 is "x001/x234/067".
func encodeTileIndex(n uint64) string {
	s := fmt.Sprintf("%03d", n%1000)
	for n >= 1000 {
		n /= 1000
		s = fmt.Sprintf("x%03d/%s", n%1000, s)
	}
	return s
}

// span returns the node level the tile's hashes are at and the range of
// node indices [start, end) they cover; ok is false when the range does not
// fit in 64 bits.
func (t TilePath) span() (level uint, start, end uint64, ok bool) {
	level = uint(t.Level) * TileHeight
	hi, start := bits.Mul64(t.Index, TileWidth)
	end = start + uint64(t.Width)
	return level, start, end, hi == 0 && end >= start
}

// covered reports whether the tree of size contains every hash (or entry)
// of the tile: the nodes at level covering leaves up to end<<level.
func covered(level uint, end, size uint64) bool {
	if level >= 64 {
		return false
	}
	leaves := end << level
	return leaves>>level == end && leaves <= size
}

// ReadTile returns the tile at t in the tree of size, which must not exceed
// the log's integrated size: the Width hashes, concatenated, of the level
// 8*t.Level subtrees it lists. A tile the tree of size does not contain
// entirely fails with ErrTileNotFound; its contents never change once it
// exists.
func ReadTile(ctx context.Context, l Log, t TilePath, size uint64) ([]byte, error) {
	if t.Entries || t.Width < 1 || t.Width > TileWidth {
		return nil, fmt.Errorf("%w: %s is not a hash tile", ErrInvalidArgument, t)
	}
	level, start, end, ok := t.span()
	if !ok || !covered(level, end, size) {
		return nil, fmt.Errorf("%w: %s in tree size %d", ErrTileNotFound, t, size)
	}
	hashes, err := l.NodeHashes(ctx, level, start, end)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(hashes)*32)
	for _, h := range hashes {
		out = append(out, h...)
	}
	return out, nil
}

// ReadEntryBundle returns the entry bundle at t in the tree of size, which
// must not exceed the log's integrated size: its leaves, each prefixed with
// its length as a big-endian uint16. As for [ReadTile], a bundle the tree
// does not contain entirely fails with ErrTileNotFound.
func ReadEntryBundle(ctx context.Context, l Log, t TilePath, size uint64) ([]byte, error) {
	if !t.Entries || t.Width < 1 || t.Width > TileWidth {
		return nil, fmt.Errorf("%w: %s is not an entry bundle", ErrInvalidArgument, t)
	}
	_, start, end, ok := t.span()
	if !ok || !covered(0, end, size) {
		return nil, fmt.Errorf("%w: %s in tree size %d", ErrTileNotFound, t, size)
	}
	leaves, err := l.Leaves(ctx, start, end)
	if err != nil {
		return nil, err
	}
	var out []byte
	for i, leaf := range leaves {
		if len(leaf) > maxEntryBytes {
			return nil, fmt.Errorf("audit: leaf %d is %d bytes, more than an entry bundle holds", start+uint64(i), len(leaf))
		}
		out = binary.BigEndian.AppendUint16(out, uint16(len(leaf)))
		out = append(out, leaf...)
	}
	return out, nil
}

// checkRange checks the arguments of Leaves and NodeHashes: start < end,
// and the range fits in an index.
func checkRange(level uint, start, end uint64) error {
	if start >= end || level >= 63 || end > maxIndex>>level {
		return fmt.Errorf("%w: nodes [%d, %d) at level %d", ErrInvalidArgument, start, end, level)
	}
	return nil
}

// hashUp reduces the hashes of consecutive nodes at one level (a multiple of
// 2^levels of them, starting at a multiple of 2^levels) to those levels
// higher up.
func hashUp(hashes [][]byte, levels uint) [][]byte {
	for ; levels > 0; levels-- {
		up := make([][]byte, len(hashes)/2)
		for i := range up {
			up[i] = hasher.HashChildren(hashes[2*i], hashes[2*i+1])
		}
		hashes = up
	}
	return hashes
}
