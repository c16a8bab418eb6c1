package proofs

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// This file verifies witness cosignatures, as [c2sp.org/tlog-cosignature]
// defines them: a witness that has checked a checkpoint's consistency with
// every checkpoint of the same log it saw before adds a signature line
//
//	— <witness name> <base64 of key hash || timestamp || signature>
//
// to the checkpoint note, where the key hash is the first 4 bytes of
// SHA-256(name || "\n" || 0x04 || public key), the timestamp is 8 bytes of
// big-endian seconds since the epoch, and the Ed25519 signature covers
//
//	cosignature/v1
//	time <timestamp>
//	<checkpoint body>
//
// A witness's verifier key is "<name>+<hex key hash>+<base64 of 0x04 ||
// public key>", as litewitness prints it.
//
// [c2sp.org/tlog-cosignature]: https://c2sp.org/tlog-cosignature

// cosignatureType is the signed-note key type of cosignature/v1 keys.
const cosignatureType = 0x04

// WitnessKey is a parsed witness verifier key.
type WitnessKey struct {
	name string
	hash uint32
	pub  ed25519.PublicKey
	vkey string
}

// ParseWitnessKey parses a witness's cosignature/v1 verifier key.
func ParseWitnessKey(vkey string) (*WitnessKey, error) {
	vkey = strings.TrimSpace(vkey)
	name, rest, ok := strings.Cut(vkey, "+")
	if !ok {
		return nil, fmt.Errorf("witness key %q: not name+hash+key", vkey)
	}
	if err := validOrigin(name); err != nil || strings.Contains(name, "+") {
		return nil, fmt.Errorf("witness key %q: bad name", vkey)
	}
	hexHash, b64, ok := strings.Cut(rest, "+")
	if !ok || len(hexHash) != 8 {
		return nil, fmt.Errorf("witness key %q: not name+hash+key", vkey)
	}
	h, err := strconv.ParseUint(hexHash, 16, 32)
	if err != nil {
		return nil, fmt.Errorf("witness key %q: bad key hash", vkey)
	}
	raw, err := decodeBase64(b64)
	if err != nil || len(raw) != 1+ed25519.PublicKeySize || raw[0] != cosignatureType {
		return nil, fmt.Errorf("witness key %q: not a cosignature/v1 Ed25519 key", vkey)
	}
	k := &WitnessKey{name: name, hash: uint32(h), pub: ed25519.PublicKey(raw[1:]), vkey: vkey}
	if k.keyHash() != k.hash {
		return nil, fmt.Errorf("witness key %q: key hash does not match the key", vkey)
	}
	return k, nil
}

// Name returns the witness's name.
func (k *WitnessKey) Name() string { return k.name }

// String returns the verifier key.
func (k *WitnessKey) String() string { return k.vkey }

func (k *WitnessKey) keyHash() uint32 {
	h := sha256.New()
	h.Write([]byte(k.name))
	h.Write([]byte{'\n', cosignatureType})
	h.Write(k.pub)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// cosignedMessage is what a cosignature/v1 signature covers.
func cosignedMessage(body []byte, timestamp uint64) []byte {
	m := []byte("cosignature/v1\ntime ")
	m = strconv.AppendUint(m, timestamp, 10)
	m = append(m, '\n')
	return append(m, body...)
}

// Cosignature is a verified witness cosignature.
type Cosignature struct {
	// Witness is the witness's verifier key.
	Witness string
	// Time is when the witness cosigned.
	Time time.Time
}

// VerifyCosignature checks one signature line ("— name base64", without
// its newline) of a checkpoint note with body against k. It returns the
// cosignature's time, or an error if the line is not k's or does not
// verify.
func (k *WitnessKey) VerifyCosignature(body []byte, line string) (time.Time, error) {
	rest, ok := strings.CutPrefix(line, "— ")
	if !ok {
		return time.Time{}, errors.New("not a signature line")
	}
	name, b64, ok := strings.Cut(rest, " ")
	if !ok || name != k.name {
		return time.Time{}, fmt.Errorf("signature by %q, not %q", name, k.name)
	}
	sig, err := decodeBase64(b64)
	if err != nil {
		return time.Time{}, err
	}
	if len(sig) != 4+8+ed25519.SignatureSize || binary.BigEndian.Uint32(sig) != k.hash {
		return time.Time{}, fmt.Errorf("signature by %q is not by key %08x", name, k.hash)
	}
	ts := binary.BigEndian.Uint64(sig[4:])
	if !ed25519.Verify(k.pub, cosignedMessage(body, ts), sig[12:]) {
		return time.Time{}, fmt.Errorf("cosignature by %s does not verify", k.name)
	}
	if ts > 1<<62 {
		return time.Time{}, fmt.Errorf("cosignature by %s has timestamp %d", k.name, ts)
	}
	return time.Unix(int64(ts), 0).UTC(), nil
}

// Cosignatures returns the cosignatures by keys found on a signed note: at
// most one per key, the first valid line. Lines by other keys and invalid
// lines are ignored; the note's body is what the cosignatures must cover.
func Cosignatures(noteText []byte, keys []*WitnessKey) ([]Cosignature, error) {
	split := bytes.LastIndex(noteText, []byte("\n\n"))
	if split < 0 {
		return nil, errors.New("not a signed note")
	}
	body := noteText[:split+1]
	lines := strings.Split(strings.TrimSuffix(string(noteText[split+2:]), "\n"), "\n")
	var out []Cosignature
	for _, k := range keys {
		for _, line := range lines {
			if t, err := k.VerifyCosignature(body, line); err == nil {
				out = append(out, Cosignature{Witness: k.vkey, Time: t})
				break
			}
		}
	}
	return out, nil
}

// WitnessPolicy says which witnesses' cosignatures a checkpoint needs: at
// least Threshold of Keys (distinct witnesses).
type WitnessPolicy struct {
	Keys      []*WitnessKey
	Threshold int
}

// ParseWitnessPolicy parses verifier keys into a policy needing threshold
// of them. threshold must be in [0, len(vkeys)]; duplicate keys are
// refused, since each witness counts once.
func ParseWitnessPolicy(vkeys []string, threshold int) (*WitnessPolicy, error) {
	p := &WitnessPolicy{Threshold: threshold}
	seen := map[string]bool{}
	for _, v := range vkeys {
		k, err := ParseWitnessKey(v)
		if err != nil {
			return nil, err
		}
		id := fmt.Sprintf("%s+%08x", k.name, k.hash)
		if seen[id] {
			return nil, fmt.Errorf("witness key %s given twice", id)
		}
		seen[id] = true
		p.Keys = append(p.Keys, k)
	}
	if threshold < 0 || threshold > len(p.Keys) {
		return nil, fmt.Errorf("witness threshold %d is not in [0, %d] (the number of witness keys)", threshold, len(p.Keys))
	}
	return p, nil
}

// Check returns the cosignatures on noteText by the policy's witnesses, or
// a [*WitnessError] when fewer than Threshold verify.
func (p *WitnessPolicy) Check(noteText []byte) ([]Cosignature, error) {
	cs, err := Cosignatures(noteText, p.Keys)
	if err != nil {
		return nil, &WitnessError{Threshold: p.Threshold, Err: err}
	}
	if len(cs) < p.Threshold {
		return cs, &WitnessError{Threshold: p.Threshold, Got: len(cs), Of: len(p.Keys)}
	}
	return cs, nil
}
