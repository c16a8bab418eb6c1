package api

import (
	"encoding/json"
	"fmt"

	"github.com/lethe-io/lethe/internal/grains"
)

// checkAddBounds scans the body of an add (one grain, or {"grains": [...]})
// for the list bounds of a batch, before anything is decoded: at most
// grains.MaxBatch grains, grains.MaxTags tags per grain and
// grains.MaxBatchTags tags in all. It stops at the first bound passed and
// allocates nothing for what it counts, so a body over a bound costs one
// pass over its bytes up to that point, not the decoding of all of it. It
// reports whether the body is a batch (its top-level object has "grains").
// What is not well-formed JSON is left to the decoder.
func checkAddBounds(b []byte) (batch bool, err error) {
	const (
		roleNone = iota
		roleTop
		roleGrains
		roleGrain
		roleTags
	)
	type frame struct {
		obj     bool
		wantKey bool
		role    int
		count   int
		grain   int // the grain (index in the batch) a tags list belongs to; -1: the body's
	}
	var stack []frame
	var key []byte
	tags := 0
	keyIs := func(name string) bool {
		if string(key) == name {
			return true
		}
		// An escaped key decodes to its unescaped form.
		var s string
		return len(key) > 0 && json.Unmarshal(append(append([]byte{'"'}, key...), '"'), &s) == nil && s == name
	}
	// value is called where a value starts; it counts it in its list.
	value := func() error {
		n := len(stack)
		if n == 0 || stack[n-1].obj {
			return nil
		}
		f := &stack[n-1]
		f.count++
		switch f.role {
		case roleGrains:
			if f.count > grains.MaxBatch {
				return grains.TooManyGrains()
			}
		case roleTags:
			if f.count > grains.MaxTags {
				field := "tags"
				if f.grain >= 0 {
					field = fmt.Sprintf("grains[%d].tags", f.grain)
				}
				return grains.TooManyTags(field)
			}
			if tags++; tags > grains.MaxBatchTags {
				return grains.TooManyBatchTags()
			}
		}
		return nil
	}
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case ' ', '\t', '\r', '\n', ':':
		case ',':
			if n := len(stack); n > 0 && stack[n-1].obj {
				stack[n-1].wantKey = true
			}
		case '"':
			j := i + 1
			for j < len(b) && b[j] != '"' {
				if b[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(b) {
				return batch, nil // unterminated: the decoder reports it
			}
			if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].wantKey {
				stack[n-1].wantKey = false
				key = b[i+1 : j]
				if stack[n-1].role == roleTop && keyIs("grains") {
					batch = true
				}
			} else if err := value(); err != nil {
				return batch, err
			}
			i = j
		case '{', '[':
			if err := value(); err != nil {
				return batch, err
			}
			f := frame{obj: c == '{', wantKey: c == '{', grain: -1}
			var parent *frame
			if n := len(stack); n > 0 {
				parent = &stack[n-1]
			}
			switch {
			case parent == nil && f.obj:
				f.role = roleTop
			case parent == nil:
			case parent.role == roleTop && !f.obj && keyIs("grains"):
				f.role = roleGrains
			case parent.role == roleGrains && f.obj:
				f.role, f.grain = roleGrain, parent.count-1
			case (parent.role == roleTop || parent.role == roleGrain) && parent.obj && !f.obj && keyIs("tags"):
				f.role, f.grain = roleTags, parent.grain
			}
			stack = append(stack, f)
		case '}', ']':
			if len(stack) == 0 {
				return batch, nil
			}
			stack = stack[:len(stack)-1]
		default: // a number, true, false or null: one value
			if err := value(); err != nil {
				return batch, err
			}
			for i+1 < len(b) && !isDelim(b[i+1]) {
				i++
			}
		}
	}
	return batch, nil
}

func isDelim(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', ',', ':', ']', '}', '[', '{', '"':
		return true
	}
	return false
}
