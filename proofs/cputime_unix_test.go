//go:build unix

package proofs_test

import (
	"syscall"
	"time"
)

// cpuTime returns the user and system CPU time the process has used, so
// that benchmarks can report throughput per CPU second on a busy machine.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
