package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/proofs"
)

const verifyUsage = `Usage: lethe verify PROOF --log-key KEY [flags]

Verify an erasure or audit proof offline, with only the log's public key.
PROOF is a file holding a proof as JSON (lethe.proof/v1) or as a
c2sp.org/tlog-proof@v1 text file. Flags may come before or after PROOF.
A tlog-proof or --checkpoint file may end with one extra newline (jq -r
adds one): a signed note never ends in an empty line, so that newline is
not part of it.

Checks, in order: the proof's format, the leaf's encoding, the summary
fields against the leaf, the leaf signature, the checkpoint signature and
origin, the tree size, the inclusion of the leaf in the checkpointed tree;
with --checkpoint, that the proof's checkpoint extends the pinned one; with
--subject and --nonce, the subject commitment; with --witness, the witnesses'
cosignatures on the checkpoint. A failure names its check.

Flags:
  --log-key KEY         the log's verifier key ("lethe audit key" prints it),
                        or a file holding it (required)
  --origin ORIGIN       the checkpoint origin expected (default: the key's name)
  --checkpoint FILE     an older signed checkpoint you trust (pinned)
  --consistency FILE    a consistency proof from the pinned checkpoint's size,
                        {"from":N,"to":M,"consistency":[...]}, when the proof
                        does not carry one
  --subject ID          the user id or scope path the erasure concerns
  --subject-file FILE   read the subject from FILE instead (keeps it out of
                        the process list and shell history)
  --nonce HEX           the subject_nonce returned with the erasure
  --finality FILE       a later kek.trim event's proof: with PROOF an erasure
                        (key.erase) proof, check that the trim destroyed the
                        KEK version that wrapped the erased keys, and that the
                        trim's checkpoint extends the erasure's (the trim proof
                        must carry a consistency proof from the erasure's tree
                        size, or give one with --finality-consistency)
  --finality-consistency FILE
                        a consistency proof from the erasure proof's tree size
                        to the trim proof's ("lethe audit consistency")
  --witness KEY         a witness's cosignature/v1 verifier key
                        (c2sp.org/tlog-cosignature), or a file holding it;
                        repeatable
  --witness-threshold N how many of the --witness keys must have cosigned the
                        proof's checkpoint (default: all of them)
  --json                print the result as JSON
`

// maxVerifyInput bounds what lethe verify reads from any one file.
const maxVerifyInput = 16 << 20

// verifyResult is the --json output: ok, and either what was verified or
// the check that failed.
type verifyResult struct {
	OK       bool            `json:"ok"`
	Check    string          `json:"check,omitempty"`
	Error    string          `json:"error,omitempty"`
	Verified *verifiedResult `json:"verified,omitempty"`
}

type verifiedResult struct {
	EventID        string  `json:"event_id"`
	Type           string  `json:"type"`
	Memory         string  `json:"memory"`
	Time           string  `json:"time"`
	Count          uint64  `json:"count"`
	KeyFingerprint string  `json:"key_fingerprint"`
	LeafIndex      uint64  `json:"leaf_index"`
	TreeSize       uint64  `json:"tree_size"`
	RootHash       string  `json:"root_hash"`
	Origin         string  `json:"origin"`
	KeyName        string  `json:"key_name"`
	PinnedSize     *uint64 `json:"pinned_size,omitempty"`
	SubjectChecked bool    `json:"subject_checked"`
	// Cosignatures are the witnesses' verified cosignatures (with
	// --witness).
	Cosignatures []cosignatureResult `json:"cosignatures,omitempty"`
	KEK          string              `json:"kek,omitempty"`
	KEKVersion   *uint64             `json:"kek_version,omitempty"`
	// Finality is set when --finality was given and verified.
	Finality *finalityResult `json:"finality,omitempty"`
}

type cosignatureResult struct {
	Witness string `json:"witness"`
	Time    string `json:"time"`
}

type finalityResult struct {
	Final             bool   `json:"final"`
	KEK               string `json:"kek"`
	ErasureKEKVersion uint64 `json:"erasure_kek_version"`
	TrimMinVersion    uint64 `json:"trim_kek_min_version"`
	TrimEventID       string `json:"trim_event_id"`
	TrimTreeSize      uint64 `json:"trim_tree_size"`
}

// runVerify is "lethe verify". It reads only the files it is given and
// makes no network calls.
func runVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		logKey      = fs.String("log-key", "", "")
		origin      = fs.String("origin", "", "")
		pinnedFile  = fs.String("checkpoint", "", "")
		consistFile = fs.String("consistency", "", "")
		subject     = fs.String("subject", "", "")
		subjectFile = fs.String("subject-file", "", "")
		nonceHex    = fs.String("nonce", "", "")
		finFile     = fs.String("finality", "", "")
		finConsist  = fs.String("finality-consistency", "", "")
		asJSON      = fs.Bool("json", false, "")
		witnesses   stringList
		threshold   = fs.Int("witness-threshold", -1, "")
	)
	fs.Var(&witnesses, "witness", "")
	pos, err := parseVerifyArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, verifyUsage)
		return nil
	}
	if err != nil {
		return usagef("verify: %v (see 'lethe verify --help')", err)
	}
	if len(pos) != 1 {
		return usagef("verify: want exactly one PROOF file, got %d (see 'lethe verify --help')", len(pos))
	}
	if *logKey == "" {
		return usagef("verify: --log-key is required (the log's verifier key, as 'lethe audit key' prints it)")
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	opts := proofs.VerifyOptions{Origin: *origin}
	if opts.LogKey, err = readVerifyLogKey(*logKey); err != nil {
		return err
	}
	for _, w := range witnesses {
		k, err := readWitnessKey(w)
		if err != nil {
			return err
		}
		opts.Witnesses = append(opts.Witnesses, k)
	}
	opts.WitnessThreshold = *threshold
	if *threshold < 0 {
		opts.WitnessThreshold = len(opts.Witnesses)
	}
	if _, err := proofs.ParseWitnessPolicy(opts.Witnesses, opts.WitnessThreshold); err != nil {
		return usagef("verify: %v", err)
	}
	if *subject != "" && *subjectFile != "" {
		return usagef("verify: give --subject or --subject-file, not both")
	}
	opts.Subject = *subject
	if *subjectFile != "" {
		b, err := readVerifyInput(*subjectFile)
		if err != nil {
			return fmt.Errorf("verify: subject: %w", err)
		}
		opts.Subject = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	}
	if *nonceHex != "" {
		n, err := hex.DecodeString(strings.TrimSpace(*nonceHex))
		if err != nil || len(n) != proofs.NonceSize {
			return usagef("verify: --nonce must be %d bytes in hex (%d hex digits)", proofs.NonceSize, 2*proofs.NonceSize)
		}
		opts.Nonce = n
	}
	if (opts.Subject == "") != (opts.Nonce == nil) {
		return usagef("verify: give both --subject (or --subject-file) and --nonce, or neither")
	}
	if *pinnedFile != "" {
		if opts.Pinned, err = readVerifyInput(*pinnedFile); err != nil {
			return fmt.Errorf("verify: pinned checkpoint: %w", err)
		}
		opts.Pinned = noteFile(opts.Pinned)
	}
	if *consistFile != "" && *pinnedFile == "" {
		return usagef("verify: --consistency needs --checkpoint, the pinned checkpoint it starts from")
	}

	raw, err := readVerifyInput(pos[0])
	if err != nil {
		return fmt.Errorf("verify: proof: %w", err)
	}
	p, err := parseProofFile(raw)
	if err == nil && *consistFile != "" {
		err = attachVerifyConsistency(p, *consistFile)
	}
	if *finConsist != "" && *finFile == "" {
		return errors.New("verify: --finality-consistency needs --finality, the trim proof it applies to")
	}
	var trim *proofs.Proof
	if err == nil && *finFile != "" {
		trim, err = readFinalityProof(*finFile, *finConsist)
	}
	var v *proofs.Verified
	var fin *proofs.Finality
	if err == nil {
		v, err = proofs.Verify(p, opts)
		if proofs.FailedCheck(err) == proofs.CheckPinned && blankTail(opts.Pinned) {
			err = fmt.Errorf("%w (%s ends in blank lines after the note's signatures, where a signed note ends with its last signature line: remove them)", err, *pinnedFile)
		}
	}
	if err == nil && trim != nil {
		if fin, err = proofs.VerifyFinality(p, trim, opts); err != nil {
			v = nil
		}
	}
	if *asJSON {
		if jerr := printVerifyJSON(stdout, p, v, fin, err); jerr != nil {
			return jerr
		}
	}
	if err != nil {
		return err
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "OK: event %s (%s) included at index %d of tree size %d, checkpoint signed by %s\n",
			v.Leaf.ID, v.Leaf.Type, p.LeafIndex, v.Checkpoint.Size, v.KeyName)
		if v.Pinned != nil {
			fmt.Fprintf(stdout, "OK: the checkpoint extends the pinned checkpoint of tree size %d\n", v.Pinned.Size)
		}
		if v.SubjectChecked {
			fmt.Fprintln(stdout, "OK: the subject and nonce match the event's subject commitment")
		}
		for _, c := range v.Cosignatures {
			name, _, _ := strings.Cut(c.Witness, "+")
			fmt.Fprintf(stdout, "OK: the checkpoint is cosigned by witness %s at %s\n", name, c.Time.Format(time.RFC3339))
		}
		if len(opts.Witnesses) > 0 {
			fmt.Fprintf(stdout, "OK: %d of %d witnesses cosigned the checkpoint, %d required\n", len(v.Cosignatures), len(opts.Witnesses), opts.WitnessThreshold)
		}
		if fin != nil {
			fmt.Fprintf(stdout, "OK: trim event %s (index %d) is in a checkpoint of tree size %d that extends the erasure's\n",
				fin.Trim.Leaf.ID, trim.LeafIndex, fin.Trim.Checkpoint.Size)
			fmt.Fprintf(stdout, "FINAL: the erased keys were wrapped under %s version %d and every version below %d is destroyed: no copy of them (database residue, WAL archive, replica, backup) can be unwrapped\n",
				fin.KEK, fin.ErasureKEKVersion, fin.TrimMinVersion)
		}
	}
	return nil
}

// readFinalityProof reads the trim proof of --finality and attaches the
// consistency proof of --finality-consistency, if given.
func readFinalityProof(file, consistency string) (*proofs.Proof, error) {
	raw, err := readVerifyInput(file)
	if err != nil {
		return nil, fmt.Errorf("verify: finality proof: %w", err)
	}
	p, err := parseProofFile(raw)
	if err != nil {
		return nil, err
	}
	if consistency != "" {
		if err := attachVerifyConsistency(p, consistency); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// parseVerifyArgs parses flags that may come before or after positional
// arguments and returns the positional ones; "--" ends the flags.
func parseVerifyArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(rest) < len(args) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// readVerifyLogKey returns the verifier key given on the command line, or the
// one in the file it names.
func readVerifyLogKey(s string) (string, error) {
	if _, err := note.NewVerifier(s); err == nil {
		return s, nil
	}
	b, err := readVerifyInput(s)
	if errors.Is(err, os.ErrNotExist) {
		return "", usagef("verify: --log-key %q is neither a verifier key (name+hash+key) nor a file", s)
	}
	if err != nil {
		return "", fmt.Errorf("verify: log key: %w", err)
	}
	key := strings.TrimSpace(string(b))
	if _, err := note.NewVerifier(key); err != nil {
		return "", usagef("verify: log key file %s does not hold a verifier key: %v", s, err)
	}
	return key, nil
}

// readWitnessKey returns the witness verifier key given on the command
// line, or the one in the file it names.
func readWitnessKey(s string) (string, error) {
	if _, err := proofs.ParseWitnessKey(s); err == nil {
		return s, nil
	}
	b, err := readVerifyInput(s)
	if errors.Is(err, os.ErrNotExist) {
		return "", usagef("verify: --witness %q is neither a witness verifier key (name+hash+key) nor a file", s)
	}
	if err != nil {
		return "", fmt.Errorf("verify: witness key: %w", err)
	}
	key := strings.TrimSpace(string(b))
	if _, err := proofs.ParseWitnessKey(key); err != nil {
		return "", usagef("verify: witness key file %s: %v", s, err)
	}
	return key, nil
}

// noteFile returns b, a file that ends with a signed note (a checkpoint, or
// a tlog-proof file, whose last part is its checkpoint), without the one
// newline a text tool adds at the end (jq -r, echo, an editor). A signed
// note (c2sp.org/signed-note) ends with its last signature line, never with
// an empty line, so a file that ends in "\n\n" holds a note only if that
// last newline goes, and then exactly the bytes lethe wrote: nothing signed
// is touched, and a file with more than one extra newline is still refused.
func noteFile(b []byte) []byte {
	if bytes.HasSuffix(b, []byte("\n\n")) {
		return b[:len(b)-1]
	}
	return b
}

// blankTail reports whether b, less the newline noteFile drops, still ends
// in an empty line.
func blankTail(b []byte) bool { return bytes.HasSuffix(b, []byte("\n\n")) }

// parseProofFile parses a proof file, JSON or tlog-proof, the latter
// without the one extra newline noteFile drops. A tlog-proof that still
// fails and ends in blank lines says so.
func parseProofFile(raw []byte) (*proofs.Proof, error) {
	b := noteFile(raw)
	p, err := proofs.ParseAnyProof(b)
	if err != nil && blankTail(b) {
		return nil, fmt.Errorf("%w (the file ends in blank lines after the checkpoint's signatures, where a signed note ends with its last signature line: remove them)", err)
	}
	return p, err
}

// readVerifyInput reads a file of at most maxVerifyInput bytes.
func readVerifyInput(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxVerifyInput+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxVerifyInput {
		return nil, &lethe.Error{Code: lethe.CodeTooLarge, Message: fmt.Sprintf("%s is larger than %d bytes", name, maxVerifyInput)}
	}
	return b, nil
}

// attachVerifyConsistency adds the consistency proof in file to p.
func attachVerifyConsistency(p *proofs.Proof, file string) error {
	b, err := readVerifyInput(file)
	if err != nil {
		return fmt.Errorf("verify: consistency proof: %w", err)
	}
	c, err := proofs.ParseConsistencyProof(b)
	if err != nil {
		return err
	}
	if c.To != p.TreeSize {
		return &proofs.ConsistencyError{From: c.From, To: c.To,
			Err: fmt.Errorf("the consistency proof ends at tree size %d, the proof's tree size is %d", c.To, p.TreeSize)}
	}
	p.SetConsistency(c.From, c.Hashes)
	return nil
}

// printVerifyJSON prints the outcome of a verification as one JSON object.
func printVerifyJSON(w io.Writer, p *proofs.Proof, v *proofs.Verified, fin *proofs.Finality, verr error) error {
	r := verifyResult{OK: verr == nil}
	if verr != nil {
		r.Check, r.Error = string(proofs.FailedCheck(verr)), verr.Error()
	}
	if v != nil {
		r.Verified = &verifiedResult{
			EventID: v.Leaf.ID, Type: string(v.Leaf.Type), Memory: v.Leaf.Memory, Time: v.Leaf.Timestamp(),
			Count: v.Leaf.GrainCount(), KeyFingerprint: v.Leaf.FirstKeyFingerprint(),
			LeafIndex: p.LeafIndex, TreeSize: v.Checkpoint.Size,
			RootHash: base64.StdEncoding.EncodeToString(v.Checkpoint.Hash[:]),
			Origin:   v.Checkpoint.Origin, KeyName: v.KeyName, SubjectChecked: v.SubjectChecked,
		}
		if v.Pinned != nil {
			r.Verified.PinnedSize = &v.Pinned.Size
		}
		for _, c := range v.Cosignatures {
			r.Verified.Cosignatures = append(r.Verified.Cosignatures, cosignatureResult{Witness: c.Witness, Time: c.Time.Format(time.RFC3339)})
		}
		r.Verified.KEK, r.Verified.KEKVersion = v.Leaf.KEK, v.Leaf.KEKVersion
		if fin != nil {
			r.Verified.Finality = &finalityResult{Final: true, KEK: fin.KEK, ErasureKEKVersion: fin.ErasureKEKVersion,
				TrimMinVersion: fin.TrimMinVersion, TrimEventID: fin.Trim.Leaf.ID, TrimTreeSize: fin.Trim.Checkpoint.Size}
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
