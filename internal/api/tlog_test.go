package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/transparency-dev/tessera/api"
	"github.com/transparency-dev/tessera/client"
	"golang.org/x/mod/sumdb/note"

	"github.com/lethe-io/lethe"
	lapi "github.com/lethe-io/lethe/internal/api"
	"github.com/lethe-io/lethe/internal/auth"
	"github.com/lethe-io/lethe/internal/testenv"
	"github.com/lethe-io/lethe/proofs"
)

// tlogFixture is a live server whose audit log holds more than 256 leaves
// (full and partial tiles at level 0, a partial tile at level 1).
type tlogFixture struct {
	db     *lethe.DB
	srv    *httptest.Server
	token  string // an auditor's
	prefix string // the log's tlog-tiles prefix URL, ending in /
}

// tlogBackends are the audit log backends the tlog-tiles tests run on.
var tlogBackends = []string{"embedded-sqlite", "embedded-postgres", "trillian"}

func newTlogFixture(tb testing.TB, backend string, public bool, wrap func(http.Handler) http.Handler) *tlogFixture {
	tb.Helper()
	ctx := context.Background()
	dir := tb.TempDir()
	cfg := lethe.Config{DataDir: dir, ProofWait: 10 * time.Second, AuditOrigin: "lethe.test/audit"}
	tcfg := auth.Config{SQLitePath: filepath.Join(dir, "lethe.db")}
	switch backend {
	case "embedded-postgres":
		dsn := testenv.Postgres(tb)
		cfg.PostgresDSN, tcfg = dsn, auth.Config{PostgresDSN: dsn}
	case "trillian":
		cfg.TrillianAddr, cfg.TrillianTreeID = testenv.Trillian(tb)
	}
	db, err := lethe.Open(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tokens, err := auth.Open(ctx, tcfg)
	if err != nil {
		db.Close()
		tb.Fatal(err)
	}
	var h http.Handler = lapi.New(lapi.Config{Library: db, Tokens: tokens, PublicLog: public,
		Logger: slog.New(slog.DiscardHandler)})
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	tb.Cleanup(func() {
		srv.Close()
		tokens.Close()
		db.Close()
	})
	secret, _, err := tokens.Create(ctx, auth.Spec{Roles: auth.ParseRoles("auditor"), Memories: []string{"*"}})
	if err != nil {
		tb.Fatal(err)
	}
	// One key per user, each created by its own write: 300 key.create
	// events, plus the memory's. (A batch would list its users' keys in
	// one event per 256.)
	for i := range 300 {
		if _, err := db.Add(ctx, lethe.Grain{Memory: "tlog", Type: "fact", Subject: "s", Relation: "r", Object: "o",
			UserID: fmt.Sprintf("user-%03d", i)}); err != nil {
			tb.Fatal(err)
		}
	}
	f := &tlogFixture{db: db, srv: srv, token: secret, prefix: srv.URL + "/api/audit/log/"}
	f.waitSize(tb, 301)
	return f
}

// waitSize waits until the served checkpoint covers at least n leaves.
func (f *tlogFixture) waitSize(tb testing.TB, n uint64) proofs.Checkpoint {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		note, err := f.db.Checkpoint(context.Background())
		if err == nil {
			c, err := proofs.OpenCheckpoint(note, f.db.AuditKey(), "")
			if err != nil {
				tb.Fatal(err)
			}
			if c.Size >= n {
				return c
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("no checkpoint of size %d within a minute (last error %v)", n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (f *tlogFixture) get(tb testing.TB, token, path string) (*http.Response, []byte) {
	tb.Helper()
	req, err := http.NewRequest("GET", f.prefix+path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp, b
}

// TestTlogTilesHTTP checks the routes' answers byte for byte: headers,
// tiles against the leaves, entry bundles, refusals.
func TestTlogTilesHTTP(t *testing.T) {
	f := newTlogFixture(t, "embedded-sqlite", false, nil)
	cp := f.waitSize(t, 301)

	resp, body := f.get(t, f.token, "checkpoint")
	if resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != "no-cache" ||
		resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("checkpoint: %d %v", resp.StatusCode, resp.Header)
	}
	if _, err := proofs.OpenCheckpoint(body, f.db.AuditKey(), "lethe.test/audit"); err != nil {
		t.Fatalf("served checkpoint: %v", err)
	}

	// The full level-0 tile is the leaf hashes of the first 256 entries,
	// which the full entry bundle holds.
	resp, tile := f.get(t, f.token, "tile/0/000")
	if resp.StatusCode != 200 || len(tile) != 256*32 || resp.Header.Get("Cache-Control") != "max-age=31536000, immutable" ||
		resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("tile/0/000: %d, %d bytes, %v", resp.StatusCode, len(tile), resp.Header)
	}
	resp, bundle := f.get(t, f.token, "tile/entries/000")
	if resp.StatusCode != 200 {
		t.Fatalf("tile/entries/000: %d %s", resp.StatusCode, bundle)
	}
	var eb api.EntryBundle
	if err := eb.UnmarshalText(bundle); err != nil || len(eb.Entries) != 256 {
		t.Fatalf("entry bundle: %d entries, %v", len(eb.Entries), err)
	}
	for i, e := range eb.Entries {
		h := sha256.Sum256(append([]byte{0}, e...))
		if !bytes.Equal(h[:], tile[i*32:(i+1)*32]) {
			t.Fatalf("entry %d does not hash to tile/0/000's hash %d", i, i)
		}
		if _, err := proofs.ParseLeaf(e); err != nil {
			t.Fatalf("entry %d is not a lethe leaf: %v", i, err)
		}
	}

	// The partial tiles of the checkpoint's size exist; wider ones and the
	// full tile of a partial do not.
	w0, w1 := cp.Size%256, cp.Size/256
	for path, status := range map[string]int{
		fmt.Sprintf("tile/0/001.p/%d", w0):       200,
		fmt.Sprintf("tile/entries/001.p/%d", w0): 200,
		fmt.Sprintf("tile/1/000.p/%d", w1):       200,
		fmt.Sprintf("tile/0/001.p/%d", w0+1):     404,
		"tile/0/001":                             404,
		"tile/2/000.p/1":                         404,
		"tile/0/x000/001":                        400,
		"tile/0/1":                               400,
		"tile/0/001.p/256":                       400,
		"tile/00/000":                            400,
		"tile/":                                  400,
	} {
		resp, body := f.get(t, f.token, path)
		if resp.StatusCode != status {
			t.Errorf("%s: %d %s, want %d", path, resp.StatusCode, body, status)
		}
	}

	// The auditor role by default.
	if resp, _ := f.get(t, "", "tile/0/000"); resp.StatusCode != 401 {
		t.Errorf("tile without a token: %d, want 401", resp.StatusCode)
	}
}

// TestTlogTilesFsck runs Tessera's fsck against a live server on each
// backend: it fetches the checkpoint, every tile and every entry bundle
// and recomputes the tree. A tampered bundle must make it fail.
func TestTlogTilesFsck(t *testing.T) {
	fsck := testenv.TesseraFsck(t)
	for _, backend := range tlogBackends {
		t.Run(backend, func(t *testing.T) {
			f := newTlogFixture(t, backend, false, nil)
			if out, ok := runFsck(t, fsck, f); !ok {
				t.Fatalf("fsck failed:\n%s", out)
			}
		})
	}
	t.Run("tampered", func(t *testing.T) {
		// Flip one byte of one entry in the first bundle, as a lying
		// server would.
		f := newTlogFixture(t, "embedded-sqlite", false, func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !strings.HasSuffix(r.URL.Path, "/tile/entries/000") {
					h.ServeHTTP(w, r)
					return
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, r)
				b := rec.Body.Bytes()
				b[len(b)/2] ^= 1
				w.WriteHeader(rec.Code)
				w.Write(b)
			})
		})
		if out, ok := runFsck(t, fsck, f); ok {
			t.Fatalf("fsck passed a log whose first entry bundle was tampered with:\n%s", out)
		}
	})
}

// runFsck runs fsck against f's log and reports its output and whether it
// passed. fsck exits 0 even when the check fails, so its log decides: it
// must report success and no failure.
func runFsck(tb testing.TB, fsck string, f *tlogFixture) (string, bool) {
	tb.Helper()
	keyFile := filepath.Join(tb.TempDir(), "log.pub")
	if err := os.WriteFile(keyFile, []byte(f.db.AuditKey()), 0o644); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, fsck, "--storage_url", f.prefix, "--public_key", keyFile,
		"--bearer_token", f.token, "--ui=false", "--logtostderr", "-v=1")
	out, err := cmd.CombinedOutput()
	s := string(out)
	if err != nil {
		return s + "\n" + err.Error(), false
	}
	return s, !strings.Contains(s, "fsck failed") && strings.Contains(s, "Successfully fsck'd log")
}

// TestTlogTilesClient fetches and verifies an inclusion proof, and an entry,
// with Tessera's tlog-tiles client library against a public log.
func TestTlogTilesClient(t *testing.T) {
	for _, backend := range []string{"embedded-sqlite", "trillian"} {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			f := newTlogFixture(t, backend, true, nil)
			u, err := url.Parse(f.prefix)
			if err != nil {
				t.Fatal(err)
			}
			fetcher, err := client.NewHTTPFetcher(u, f.srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			v, err := note.NewVerifier(f.db.AuditKey())
			if err != nil {
				t.Fatal(err)
			}
			// No token: the log is public.
			cp, _, _, err := client.FetchCheckpoint(ctx, fetcher.ReadCheckpoint, v, "lethe.test/audit")
			if err != nil {
				t.Fatalf("FetchCheckpoint: %v", err)
			}
			pb, err := client.NewProofBuilder(ctx, cp.Size, fetcher.ReadTile)
			if err != nil {
				t.Fatal(err)
			}
			for _, index := range []uint64{0, 255, 256, cp.Size - 1} {
				bundle, err := client.GetEntryBundle(ctx, fetcher.ReadEntryBundle, index/256, cp.Size)
				if err != nil {
					t.Fatalf("GetEntryBundle(%d): %v", index/256, err)
				}
				leaf := bundle.Entries[index%256]
				p, err := pb.InclusionProof(ctx, index)
				if err != nil {
					t.Fatalf("InclusionProof(%d): %v", index, err)
				}
				h := sha256.Sum256(append([]byte{0}, leaf...))
				if err := proofs.VerifyInclusion(index, cp.Size, h[:], p, cp.Hash); err != nil {
					t.Fatalf("inclusion proof of %d from the client library: %v", index, err)
				}
				// And it is the proof lethe itself gives.
				lp, err := f.db.Proof(ctx, index, cp.Size)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(lp.Leaf, leaf) || fmt.Sprint(lp.Inclusion) != fmt.Sprint(p) {
					t.Fatalf("leaf %d: the client library's proof differs from lethe's", index)
				}
			}
		})
	}
}
