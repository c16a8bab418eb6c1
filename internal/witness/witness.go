// Package witness submits lethe's audit checkpoints to transparency-log
// witnesses and collects their cosignatures.
//
// # Protocol
//
// A witness ([c2sp.org/tlog-witness]) is told each new checkpoint with a
// consistency proof from the last checkpoint of the log it cosigned:
//
//	POST <witness URL>/add-checkpoint
//
//	old <size the witness last saw>
//	<base64 consistency proof hash>
//	...
//	<empty line>
//	<signed checkpoint note>
//
// It answers 200 with its cosignature lines ([c2sp.org/tlog-cosignature]),
// or 409 Conflict with Content-Type text/x.tlog.size and the size it knows,
// after which the client retries from that size. A [Pool] does this for
// every configured witness in parallel, keeps the valid cosignatures, and
// appends them to the note; its threshold says how many are needed.
//
// [c2sp.org/tlog-witness]: https://c2sp.org/tlog-witness
// [c2sp.org/tlog-cosignature]: https://c2sp.org/tlog-cosignature
package witness

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lethe-io/lethe/proofs"
)

// Prover gives RFC 6962 consistency proofs between two tree sizes of the
// log, 0 < from <= to; the audit log has it.
type Prover interface {
	ConsistencyProof(ctx context.Context, from, to uint64) ([][]byte, error)
}

// Config names one witness.
type Config struct {
	// URL is the witness's submission prefix; add-checkpoint is below it.
	URL string
	// Key is its cosignature/v1 verifier key.
	Key string
}

// maxResponse bounds a witness's answer.
const maxResponse = 64 << 10

// Witness is one witness and what lethe knows of it: the size of the last
// checkpoint of this log it cosigned.
type Witness struct {
	url    string
	key    *proofs.WitnessKey
	client *http.Client

	mu   sync.Mutex
	size uint64
}

// Pool submits checkpoints to witnesses. It is safe for concurrent use,
// but checkpoints are expected from one sequencer, in increasing size.
type Pool struct {
	witnesses []*Witness
	threshold int
	prover    Prover
	timeout   time.Duration
	logger    *slog.Logger
}

// PoolConfig configures a Pool.
type PoolConfig struct {
	Witnesses []Config
	// Threshold is how many witnesses must cosign a checkpoint for Cosign
	// to succeed (0: cosignatures are collected but none is required).
	Threshold int
	// Prover gives the consistency proofs witnesses ask for.
	Prover Prover
	// Timeout bounds each witness's answer (default 5 s).
	Timeout time.Duration
	// Client is the HTTP client (default: a new one).
	Client *http.Client
	Logger *slog.Logger
}

// NewPool checks the witnesses' keys and the threshold and returns a Pool.
func NewPool(cfg PoolConfig) (*Pool, error) {
	vkeys := make([]string, len(cfg.Witnesses))
	for i, w := range cfg.Witnesses {
		vkeys[i] = w.Key
	}
	policy, err := proofs.ParseWitnessPolicy(vkeys, cfg.Threshold)
	if err != nil {
		return nil, err
	}
	p := &Pool{threshold: cfg.Threshold, prover: cfg.Prover, timeout: cfg.Timeout, logger: cfg.Logger}
	if p.timeout <= 0 {
		p.timeout = 5 * time.Second
	}
	if p.logger == nil {
		p.logger = slog.New(slog.DiscardHandler)
	}
	client := cfg.Client
	if client == nil {
		client = &http.Client{}
	}
	for i, w := range cfg.Witnesses {
		if !strings.HasPrefix(w.URL, "http://") && !strings.HasPrefix(w.URL, "https://") {
			return nil, fmt.Errorf("witness %s: URL %q is not http(s)", policy.Keys[i].Name(), w.URL)
		}
		p.witnesses = append(p.witnesses, &Witness{url: strings.TrimSuffix(w.URL, "/"), key: policy.Keys[i], client: client})
	}
	return p, nil
}

// Cosign submits the signed checkpoint note of a tree of size to every
// witness at once and returns the note with the cosignature lines of those
// that cosigned appended, and how many did. Fewer than the threshold is an
// error (the note is still returned); a witness's failure is logged.
func (p *Pool) Cosign(ctx context.Context, note []byte, size uint64) ([]byte, int, error) {
	lines := make([]string, len(p.witnesses))
	var wg sync.WaitGroup
	for i, w := range p.witnesses {
		wg.Go(func() {
			wctx, cancel := context.WithTimeout(ctx, p.timeout)
			defer cancel()
			line, err := w.add(wctx, p.prover, note, size)
			if err != nil {
				p.logger.Warn("witness did not cosign the audit checkpoint", slog.String("witness", w.key.Name()),
					slog.Uint64("size", size), slog.Any("error", err))
				return
			}
			lines[i] = line
		})
	}
	wg.Wait()
	out := bytes.Clone(note)
	n := 0
	for _, l := range lines {
		if l != "" {
			out = append(out, l...)
			out = append(out, '\n')
			n++
		}
	}
	if n < p.threshold {
		return out, n, fmt.Errorf("witness: %d of %d witnesses cosigned the checkpoint of size %d, %d required", n, len(p.witnesses), size, p.threshold)
	}
	return out, n, nil
}

// ErrConflict means the witness has seen a checkpoint of this log that the
// submitted one is not consistent with, or one larger than it.
var ErrConflict = errors.New("witness: the witness knows a conflicting or larger tree")

// add submits note to w, retrying once from the size the witness says it
// knows, and returns w's verified cosignature line.
func (w *Witness) add(ctx context.Context, prover Prover, note []byte, size uint64) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for attempt := 0; ; attempt++ {
		old := w.size
		if old > size {
			return "", fmt.Errorf("%w: it has size %d, the checkpoint %d", ErrConflict, old, size)
		}
		var proof [][]byte
		if old > 0 && old < size {
			var err error
			if proof, err = prover.ConsistencyProof(ctx, old, size); err != nil {
				return "", fmt.Errorf("witness: consistency proof %d..%d: %w", old, size, err)
			}
		}
		line, known, err := w.post(ctx, old, proof, note)
		if err == nil {
			w.size = size
			return line, nil
		}
		if !errors.Is(err, errWrongOld) || attempt > 0 {
			return "", err
		}
		w.size = known
	}
}

var errWrongOld = errors.New("witness: old size mismatch")

// post sends one add-checkpoint request. On 409 it returns errWrongOld and
// the size the witness knows.
func (w *Witness) post(ctx context.Context, old uint64, proof [][]byte, note []byte) (string, uint64, error) {
	var body bytes.Buffer
	fmt.Fprintf(&body, "old %d\n", old)
	for _, h := range proof {
		body.WriteString(base64.StdEncoding.EncodeToString(h))
		body.WriteByte('\n')
	}
	body.WriteByte('\n')
	body.Write(note)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url+"/add-checkpoint", &body)
	if err != nil {
		return "", 0, fmt.Errorf("witness %s: %w", w.key.Name(), err)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("witness %s: %w", w.key.Name(), err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return "", 0, fmt.Errorf("witness %s: read answer: %w", w.key.Name(), err)
	}
	switch {
	case resp.StatusCode == http.StatusConflict && resp.Header.Get("Content-Type") == "text/x.tlog.size":
		known, err := strconv.ParseUint(strings.TrimSuffix(string(b), "\n"), 10, 64)
		if err != nil {
			return "", 0, fmt.Errorf("witness %s: 409 with a malformed size", w.key.Name())
		}
		return "", known, errWrongOld
	case resp.StatusCode == http.StatusConflict:
		return "", 0, fmt.Errorf("%w: witness %s answered 409", ErrConflict, w.key.Name())
	case resp.StatusCode != http.StatusOK:
		return "", 0, fmt.Errorf("witness %s answered %d: %.200q", w.key.Name(), resp.StatusCode, b)
	}
	split := bytes.LastIndex(note, []byte("\n\n"))
	if split < 0 {
		return "", 0, errors.New("witness: not a signed note")
	}
	checkpoint := note[:split+1]
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if _, err := w.key.VerifyCosignature(checkpoint, line); err == nil {
			return line, 0, nil
		}
	}
	return "", 0, fmt.Errorf("witness %s answered 200 without a valid cosignature by its key", w.key.Name())
}
