// Package crashpoint is a test facility: it lets a test kill a lethe
// process at a named point of its code, inside the narrow windows where a
// crash is most dangerous (a key destroyed, its residue not yet scrubbed;
// an event appended to the log, its checkpoint not yet saved), which a kill
// at a random moment rarely lands in.
//
// # Arming
//
// A process started with the environment variable LETHE_CRASHPOINT set to
// a point's name (one of the constants below, listed by [Points]) kills itself with SIGKILL the first time
// it reaches [Hit] of that name; name@n kills it at the n-th hit instead,
// so that later hits are reachable:
//
//	LETHE_CRASHPOINT=erase.committed@2
//
// The variable is read once, when the process starts. Before dying, the
// process writes one line to its standard error, "lethe: crashpoint
// NAME@N reached", so that a test can tell the point's kill from another.
//
// With the variable unset, [Hit] is one comparison against an empty string
// and does nothing else. Nothing in lethe sets the variable: TestCrashModel
// and TestCrashPointsReached (package lethe) do, for their child processes.
package crashpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Env names the environment variable that arms a point.
const Env = "LETHE_CRASHPOINT"

// The points, each placed right after a commit (or an action with an
// effect outside the process) and before the step that follows it.
const (
	// KeyCreated: a write created a data key (its key.create event
	// committed with it, in a transaction of its own), before the grain
	// that needed it is written (keys.Keyring).
	KeyCreated = "key.created"
	// ForgetCommitted: a forget's delete and its grain.forget event
	// committed, before the receipt's wait for a checkpoint covering it
	// (erasure.Eraser.Forget).
	ForgetCommitted = "forget.committed"
	// RefusalCommitted: the erasure.refused event of a refused forget or
	// erasure (a legal hold, a protection rule) committed, before the
	// refusal is returned (erasure.Eraser).
	RefusalCommitted = "refusal.committed"
	// EraseCommitted: an erasure's transaction (key destroyed, key.erase
	// event, cleanup job) committed, before the scrub of the destroyed
	// keys' residue, the key cache purge and the receipt (erasure.Eraser).
	EraseCommitted = "erase.committed"
	// EraseScrubbed: an erasure's scrub (SQLite: a TRUNCATE checkpoint;
	// PostgreSQL: the rewrite of the destroyed keys' partitions) finished;
	// the receipt's wait for a checkpoint, which runs beside it, may not
	// have.
	EraseScrubbed = "erase.scrubbed"
	// EraseReceipted: an erasure's scrub and receipt are done, before the
	// erasure returns.
	EraseReceipted = "erase.receipted"
	// RequestErased: an erasure request's execution committed (the request
	// executed, its key and the key sealing its subject destroyed, its
	// key.erase event) and its erasure's receipt is done, before the scrub
	// of the sealing key's residue and, with a dedicated-key KEK, the
	// deletion of the KEK's own key for it (erasure.Eraser.ExecuteRequest).
	RequestErased = "request.erased"
	// RequestRefused: an erasure request's execution was refused by a hold
	// and rolled back, before the request is moved to blocked with its
	// erasure.refused event.
	RequestRefused = "request.refused"
	// SequencerAppended: the sequencer appended numbered events to the log,
	// before it records the appended count (audit.Sequencer; with the
	// embedded log, inside the step's transaction).
	SequencerAppended = "sequencer.appended"
	// SequencerCounted: the sequencer recorded the appended count, before
	// it signs a checkpoint.
	SequencerCounted = "sequencer.counted"
	// SequencerSigned: the sequencer signed a new checkpoint, before it
	// saves it.
	SequencerSigned = "sequencer.signed"
	// SequencerCommitted: a sequencer step committed (events appended,
	// checkpoint saved), before the waiting receipts learn of it.
	SequencerCommitted = "sequencer.committed"
	// CleanerJob: the cleaner committed the transaction that deleted rows
	// of up to ten erased keys (store.DB.CleanupErased), before its next
	// jobs or the next rows of the same jobs, and before the scrub of the
	// deleted rows' residue.
	CleanerJob = "cleaner.job"
)

// Points returns every point's name.
func Points() []string {
	return []string{
		KeyCreated, ForgetCommitted, RefusalCommitted, EraseCommitted, EraseScrubbed, EraseReceipted,
		RequestErased, RequestRefused, SequencerAppended, SequencerCounted, SequencerSigned, SequencerCommitted, CleanerJob,
	}
}

// armed is the armed point ("" when none is), at its at-th hit; hits
// counts its hits so far. Set once, before main runs.
var (
	armed string
	at    int64
	hits  atomic.Int64
)

func init() { armed, at = Parse(os.Getenv(Env)) }

// Parse splits a value of Env, name or name@n, into the point's name and
// the hit that kills (1 when not given). A malformed count arms nothing.
func Parse(v string) (name string, n int64) {
	name, count, ok := strings.Cut(v, "@")
	if !ok {
		return name, 1
	}
	n, err := strconv.ParseInt(count, 10, 64)
	if err != nil || n < 1 {
		return "", 0
	}
	return name, n
}

// Hit kills the process with SIGKILL when name is the armed point and this
// is the hit it was armed for; otherwise it does nothing.
func Hit(name string) {
	if armed != "" {
		hit(name)
	}
}

func hit(name string) {
	if name != armed || hits.Add(1) != at {
		return
	}
	fmt.Fprintf(os.Stderr, "lethe: crashpoint %s@%d reached\n", name, at)
	p, err := os.FindProcess(os.Getpid())
	if err == nil {
		err = p.Kill() // SIGKILL on Unix
	}
	if err != nil {
		panic("crashpoint: " + err.Error())
	}
	for {
		time.Sleep(time.Hour) // the signal is on its way; nothing runs on
	}
}
