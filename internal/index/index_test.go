package index

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
)

// A prepared Key gives exactly the tokens of Token and Value, also when
// shared by goroutines.
func TestKeyMatchesToken(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	k := NewKey(key)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				v := fmt.Sprintf("Value %d/%d", w, i)
				if got, want := k.Token(Dedup, []byte(v)), Token(key, Dedup, []byte(v)); !bytes.Equal(got, want) {
					t.Errorf("Token(%q) = %x, want %x", v, got, want)
				}
				if got, want := k.Value(Subject, v), Value(key, Subject, v); !bytes.Equal(got, want) || len(got) != Size {
					t.Errorf("Value(%q) = %x, want %x", v, got, want)
				}
			}
		})
	}
	wg.Wait()
	if k.Value(Subject, "") != nil {
		t.Error("Value of empty is not nil")
	}
	if bytes.Equal(k.Value(Subject, "x"), k.Value(Object, "x")) {
		t.Error("fields are not separated")
	}
}

func BenchmarkToken(b *testing.B) {
	key := bytes.Repeat([]byte{7}, 32)
	v := []byte("subject-1234")
	b.Run("new", func(b *testing.B) {
		for b.Loop() {
			Token(key, Subject, v)
		}
	})
	b.Run("prepared", func(b *testing.B) {
		k := NewKey(key)
		for b.Loop() {
			k.Token(Subject, v)
		}
	})
}
