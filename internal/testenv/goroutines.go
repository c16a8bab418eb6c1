package testenv

import (
	"bytes"
	"runtime"
)

// Goroutines returns the stacks of the running goroutines whose stack
// contains marker (a package path and symbol, say
// "lethe/internal/store."), for tests that check a Close left nothing
// running.
func Goroutines(marker string) []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte(marker)) {
			out = append(out, string(g))
		}
	}
	return out
}
