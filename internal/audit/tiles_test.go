package audit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func TestParseTilePath(t *testing.T) {
	tests := []struct {
		path    string
		want    TilePath
		wantErr bool
	}{
		{path: "tile/0/000", want: TilePath{Level: 0, Index: 0, Width: 256}},
		{path: "tile/0/067.p/8", want: TilePath{Index: 67, Width: 8}},
		{path: "tile/1/x001/x234/067", want: TilePath{Level: 1, Index: 1234067, Width: 256}},
		{path: "tile/63/999.p/255", want: TilePath{Level: 63, Index: 999, Width: 255}},
		{path: "tile/entries/x001/000.p/1", want: TilePath{Entries: true, Index: 1000, Width: 1}},
		{path: "tile/0/x018/x446/x744/x073/x709/x551/615", want: TilePath{Index: 1<<64 - 1, Width: 256}},
		{path: "tile/0/x018/x446/x744/x073/x709/x551/616", wantErr: true},
		{path: "tile/0/x999/x999/x999/x999/x999/x999/999", wantErr: true},
		{path: "tile/0/1", wantErr: true},
		{path: "tile/0/0001", wantErr: true},
		{path: "tile/0/x000/001", wantErr: true},
		{path: "tile/0/001/002", wantErr: true},
		{path: "tile/0/x01/002", wantErr: true},
		{path: "tile/00/001", wantErr: true},
		{path: "tile/64/001", wantErr: true},
		{path: "tile/-1/001", wantErr: true},
		{path: "tile/0/001.p/0", wantErr: true},
		{path: "tile/0/001.p/256", wantErr: true},
		{path: "tile/0/001.p/08", wantErr: true},
		{path: "tile/0/001.p/", wantErr: true},
		{path: "tile/0/+01", wantErr: true},
		{path: "tile/entries", wantErr: true},
		{path: "tile/0/", wantErr: true},
		{path: "tiles/0/000", wantErr: true},
		{path: "tile/entry/000", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, err := ParseTilePath(tt.path)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseTilePath(%q) = %+v, want an error", tt.path, got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseTilePath(%q) = %+v, %v; want %+v", tt.path, got, err, tt.want)
			}
			if s := got.String(); s != tt.path {
				t.Errorf("String() = %q, want %q", s, tt.path)
			}
		})
	}
}

// FuzzParseTilePath checks that every accepted path is the one String
// gives back: each resource has exactly one path.
func FuzzParseTilePath(f *testing.F) {
	for _, s := range []string{"tile/0/000", "tile/1/x001/x234/067.p/8", "tile/entries/x999/001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseTilePath(s)
		if err != nil {
			return
		}
		if got := p.String(); got != s {
			t.Fatalf("ParseTilePath(%q).String() = %q", s, got)
		}
		if p.Width < 1 || p.Width > TileWidth || p.Level > 63 {
			t.Fatalf("ParseTilePath(%q) = %+v: out of range", s, p)
		}
	})
}

// TestReadTiles reads the tiles and bundles of trees of 1, 255, 256, 600 and
// 65,537 leaves (all partial tiles, and the first and last full ones) and
// checks each against refTree and the tlog-tiles definition: hash i of tile n
// at level l is MTH(D[(n*256+i)*256^l : (n*256+i+1)*256^l]).
func TestReadTiles(t *testing.T) {
	ctx := testContext(t)
	l := newEmbedded(t, openSQLite(t))
	ref := &refTree{}
	for _, size := range []int{1, 255, 256, 600, 65537} {
		batch := testLeaves("readtiles", int(ref.size()), size-int(ref.size()))
		appendAndWait(t, l, ref.size(), batch)
		ref.add(batch...)
		n := ref.size()
		for level := uint8(0); level < 3; level++ {
			span := uint64(1) << (8 * uint(level))
			hashes := n / span // node hashes at this tile level
			for idx := uint64(0); idx*TileWidth < hashes; idx++ {
				width := int(min(hashes-idx*TileWidth, TileWidth))
				if idx > 2 && idx*TileWidth+TileWidth < hashes {
					continue // spot-check full tiles of the big tree
				}
				tp := TilePath{Level: level, Index: idx, Width: width}
				got, err := ReadTile(ctx, l, tp, n)
				if err != nil {
					t.Fatalf("size %d: ReadTile(%s) = %v", n, tp, err)
				}
				var want []byte
				for i := range uint64(width) {
					j := idx*TileWidth + i
					want = append(want, ref.mth(ref.leaves[j*span:(j+1)*span])...)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("size %d: tile %s differs from MTH of its subtrees", n, tp)
				}
				if level == 0 {
					bp := TilePath{Entries: true, Index: idx, Width: width}
					b, err := ReadEntryBundle(ctx, l, bp, n)
					if err != nil {
						t.Fatalf("size %d: ReadEntryBundle(%s) = %v", n, bp, err)
					}
					var wantB []byte
					for _, leaf := range ref.leaves[idx*TileWidth : idx*TileWidth+uint64(width)] {
						wantB = binary.BigEndian.AppendUint16(wantB, uint16(len(leaf)))
						wantB = append(wantB, leaf...)
					}
					if !bytes.Equal(b, wantB) {
						t.Fatalf("size %d: bundle %s differs from the leaves", n, bp)
					}
				}
			}
		}
		// Beyond the tree: the next wider partial, the full tile of a
		// partial, and a level the tree does not reach.
		last := TilePath{Index: n / TileWidth, Width: int(n%TileWidth) + 1}
		if last.Width == TileWidth {
			last = TilePath{Index: n/TileWidth + 1, Width: 1}
		}
		for _, tp := range []TilePath{last, {Index: n / TileWidth, Width: TileWidth}, {Level: 3, Width: 1}} {
			if _, err := ReadTile(ctx, l, tp, n); !errors.Is(err, ErrTileNotFound) {
				t.Errorf("size %d: ReadTile(%s) = %v, want ErrTileNotFound", n, tp, err)
			}
			tp.Entries, tp.Level = true, 0
			if _, err := ReadEntryBundle(ctx, l, tp, n); tp.Index*TileWidth+uint64(tp.Width) > n && !errors.Is(err, ErrTileNotFound) {
				t.Errorf("size %d: ReadEntryBundle(%s) = %v, want ErrTileNotFound", n, tp, err)
			}
		}
	}
	// Huge indices do not overflow into small ones.
	for _, tp := range []TilePath{{Index: 1<<64 - 1, Width: 1}, {Level: 7, Index: 1 << 40, Width: 1}, {Level: 63, Width: 1}} {
		if _, err := ReadTile(ctx, l, tp, ref.size()); !errors.Is(err, ErrTileNotFound) {
			t.Errorf("ReadTile(%s) = %v, want ErrTileNotFound", tp, err)
		}
	}
}
