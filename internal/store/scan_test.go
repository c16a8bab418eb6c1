package store

import (
	"database/sql/driver"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// scanPacked reads the packed column's fields as strings.Split would, and
// refuses a row with fewer or more than its 14 fields.
func TestScanPackedReadsEveryField(t *testing.T) {
	word := rapid.StringMatching(`[a-z/._-]{0,8}`)
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(12, 16).Draw(t, "fields")
		f := make([]string, n)
		for i := range f {
			if i < 6 {
				f[i] = word.Draw(t, "text")
			} else {
				f[i] = rapid.StringMatching(`-?[0-9]{1,6}`).Draw(t, "int")
			}
		}
		vals := []driver.Value{int64(7), []byte("h"), 0.5, 1.0, 0.25, []byte("blob"), []byte(strings.Join(f, " "))}
		var r GrainRow
		err := scanPacked(vals, &r, "m")
		if n != 14 {
			if err == nil {
				t.Fatalf("%d packed fields were accepted", n)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		got := []string{r.Type, r.Namespace, r.Scope, r.Supersedes, r.SupersededBy, r.KeyChain}
		for i, want := range f[:6] {
			if got[i] != want {
				t.Fatalf("field %d: %q, want %q", i, got[i], want)
			}
		}
		ints := []int64{r.CreatedUS, r.LastRetrievedUS, r.RetrievalCount, r.UserKeyID, r.Epoch, r.ScopeGen}
		for i, v := range ints {
			if want, _ := strconv.ParseInt(f[8+i], 10, 64); v != want {
				t.Fatalf("int field %d: %d, want %d", 8+i, v, want)
			}
		}
		if r.Pinned != (f[6] != "0" && strings.Trim(f[6], "-0") != "") {
			t.Fatalf("pinned %v from %q", r.Pinned, f[6])
		}
		if r.Memory != "m" || r.ID != 7 || string(r.Blob) != "blob" {
			t.Fatalf("row %+v", r)
		}
	})
}
