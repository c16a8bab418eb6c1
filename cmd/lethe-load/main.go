// Command lethe-load drives a running lethe server with a bounded load and
// reports throughput and latency percentiles per operation.
//
//	lethe-load --server http://127.0.0.1:8080 --token-file admin.token [--grains 100000]
//
// Phases, in order, each bounded by its count and all by --duration:
//
//  1. add: --grains grains in batches of --batch, by --concurrency workers;
//  2. ping: --pings requests that do no work (GET /healthz): the HTTP
//     round trip itself, on this machine, between these two processes;
//  3. recall: --recalls queries by subject (limit 10);
//  4. get: --gets lookups by hash;
//  5. forget: --forgets hard deletes by hash;
//  6. erase: --erasures crypto-erasures of users (forget-user).
//
// With --floor, each phase runs a second time, right after, through the
// library in this process (lethe.Open on a store of its own: a fresh
// SQLite data directory, or the PostgreSQL database --floor names), with
// the same data, counts and concurrency. That is the floor the HTTP path
// is measured against: the report gives both, the ratio of their p50s and
// their difference (the HTTP path's overhead), of which the ping phase's
// p50 is the part any HTTP server pays here. The recall and get phases
// run a third time through the library, paced: each call after one ping
// to the server, untimed, as a handler starts after waiting for the
// network (the "library, paced" row, and the HTTP p50 against it).
// After each of its phases the floor settles (lethe.DB.Settle: its queued
// retrieval statistics written, its scrub after forgets and its statistics
// refresh done), so that its background work does not run during the
// server's next phase; the server's own background work is the server's.
//
// The token needs the writer, reader and dpo roles on the memory (an admin
// token will do). Every grain goes to one fresh memory (load-<random>
// unless --memory names one). The server must be on a loopback address
// unless --allow-remote is given: this is a load generator.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "lethe-load: %v\n", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

const usage = `Usage: lethe-load --server URL --token-file FILE [flags]

Flags:
  --server URL        the lethe server (default http://127.0.0.1:8080; loopback only)
  --token-file FILE   a token with writer, reader and dpo on the memory (required)
  --memory M          the memory to load (default load-<random>)
  --grains N          grains to add (default 100000)
  --batch B           grains per add request (default 1000)
  --concurrency C     concurrent requests (default 4)
  --pings N           requests that do no work, GET /healthz (default 2000)
  --recalls N         recall queries (default 10000)
  --gets N            grain lookups by hash (default 2000)
  --forgets N         forgets by hash (default 1000)
  --erasures N        forget-user erasures (default 20)
  --users N           distinct user ids among the grains (default 1000)
  --duration D        overall time bound (default 10m)
  --floor STORE       also run each phase through the library, in process:
                      "sqlite" (a fresh data directory) or a PostgreSQL URL
  --json              machine-readable report
  --allow-remote      allow a server that is not on a loopback address
  --go-client         send through Go's http.Client instead of writing each
                      request and reading its answer on the calling goroutine
                      (https:// always uses http.Client)
`

type config struct {
	server, tokenFile, memory               string
	grains, batch, concurrency              int
	pings, recalls, gets, forgets, erasures int
	users                                   int
	duration                                time.Duration
	json, allowRemote, goClient             bool
	floor                                   string
	token                                   string
	client                                  sender
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("lethe-load", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var c config
	fs.StringVar(&c.server, "server", "http://127.0.0.1:8080", "")
	fs.StringVar(&c.tokenFile, "token-file", os.Getenv("LETHE_TOKEN_FILE"), "")
	fs.StringVar(&c.memory, "memory", "", "")
	fs.IntVar(&c.grains, "grains", 100000, "")
	fs.IntVar(&c.batch, "batch", 1000, "")
	fs.IntVar(&c.concurrency, "concurrency", 4, "")
	fs.IntVar(&c.pings, "pings", 2000, "")
	fs.IntVar(&c.recalls, "recalls", 10000, "")
	fs.IntVar(&c.gets, "gets", 2000, "")
	fs.IntVar(&c.forgets, "forgets", 1000, "")
	fs.IntVar(&c.erasures, "erasures", 20, "")
	fs.IntVar(&c.users, "users", 1000, "")
	fs.DurationVar(&c.duration, "duration", 10*time.Minute, "")
	fs.BoolVar(&c.json, "json", false, "")
	fs.StringVar(&c.floor, "floor", "", "")
	fs.BoolVar(&c.allowRemote, "allow-remote", false, "")
	fs.BoolVar(&c.goClient, "go-client", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return nil
		}
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if err := c.check(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.duration)
	defer cancel()
	if k, ok := c.client.(*connClient); ok {
		defer k.close()
	}
	var lib *lethe.DB
	if c.floor != "" {
		cfg := lethe.Config{DataDir: filepath.Join(os.TempDir(), "lethe-load-floor-"+c.memory)}
		if c.floor != "sqlite" {
			cfg.PostgresDSN = c.floor
		}
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return err
		}
		defer os.RemoveAll(cfg.DataDir)
		var err error
		if lib, err = lethe.Open(ctx, cfg); err != nil {
			return fmt.Errorf("open the floor store: %w", err)
		}
		defer lib.Close()
	}
	r, err := c.load(ctx, lib)
	if err != nil {
		return err
	}
	return r.print(stdout, c.json)
}

func (c *config) check() error {
	switch {
	case c.tokenFile == "":
		return fmt.Errorf("%w: --token-file is required", errUsage)
	case c.grains < 1 || c.batch < 1 || c.batch > 10000 || c.concurrency < 1 || c.concurrency > 256:
		return fmt.Errorf("%w: need --grains >= 1, --batch in [1,10000], --concurrency in [1,256]", errUsage)
	case c.users < 1 || c.pings < 0 || c.recalls < 0 || c.gets < 0 || c.forgets < 0 || c.erasures < 0:
		return fmt.Errorf("%w: counts must not be negative (and --users >= 1)", errUsage)
	case c.forgets+c.erasures > c.grains:
		return fmt.Errorf("%w: --forgets + --erasures exceed --grains", errUsage)
	}
	u, err := url.Parse(c.server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: --server: want an http:// or https:// URL", errUsage)
	}
	if !c.allowRemote && !loopback(u.Hostname()) {
		return fmt.Errorf("%w: --server %s is not a loopback address (use --allow-remote to load another host)", errUsage, u.Hostname())
	}
	c.server = strings.TrimRight(u.String(), "/")
	b, err := os.ReadFile(c.tokenFile)
	if err != nil {
		return fmt.Errorf("read token file: %w", err)
	}
	c.token = strings.TrimSpace(string(b))
	if c.memory == "" {
		var r [4]byte
		rand.Read(r[:])
		c.memory = "load-" + hex.EncodeToString(r[:])
	}
	if c.goClient || u.Scheme != "http" {
		c.client = goClient{&http.Client{Timeout: time.Minute, Transport: &http.Transport{
			MaxIdleConns: c.concurrency * 2, MaxIdleConnsPerHost: c.concurrency * 2, IdleConnTimeout: time.Minute}}}
	} else {
		host := u.Host
		if u.Port() == "" {
			host = net.JoinHostPort(u.Hostname(), "80")
		}
		c.client = &connClient{addr: host, timeout: time.Minute}
	}
	return nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// phase is one operation's measurements.
type phase struct {
	Name       string        `json:"name"`
	Requests   int           `json:"requests"`
	Items      int           `json:"items"`
	Errors     int           `json:"errors"`
	Elapsed    time.Duration `json:"elapsed_ns"`
	PerSecond  float64       `json:"items_per_second"`
	P50        time.Duration `json:"p50_ns"`
	P99        time.Duration `json:"p99_ns"`
	Max        time.Duration `json:"max_ns"`
	FirstError string        `json:"first_error,omitempty"`
	// Floor is the same phase through the library (--floor).
	Floor *phase `json:"floor,omitempty"`
	// Paced is the floor again, each call after one ping, untimed (the
	// recall and get phases, with --floor and --pings).
	Paced     *phase `json:"paced_floor,omitempty"`
	latencies []time.Duration
}

type report struct {
	Server      string `json:"server"`
	Memory      string `json:"memory"`
	Concurrency int    `json:"concurrency"`
	// Client is how requests are sent: "conn" (written and read on the
	// calling goroutine, connClient) or "go" (Go's http.Client).
	Client string   `json:"client"`
	Phases []*phase `json:"phases"`
}

func (r *report) print(w io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(w, "server %s, memory %s, concurrency %d, client %s\n", r.Server, r.Memory, r.Concurrency, r.Client)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "operation\trequests\titems\terrors\telapsed\titems/s\tp50\tp99\tmax\tp50/floor\tp50-floor\t")
	for _, p := range r.Phases {
		ratio, over := "", ""
		if p.Floor != nil && p.Floor.P50 > 0 {
			ratio = fmt.Sprintf("%.2f×", float64(p.P50)/float64(p.Floor.P50))
			over = signed(p.P50 - p.Floor.P50)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.2fs\t%.0f\t%s\t%s\t%s\t%s\t%s\t\n", p.Name, p.Requests, p.Items, p.Errors,
			p.Elapsed.Seconds(), p.PerSecond, ms(p.P50), ms(p.P99), ms(p.Max), ratio, over)
		if f := p.Floor; f != nil {
			fmt.Fprintf(tw, "  library\t%d\t%d\t%d\t%.2fs\t%.0f\t%s\t%s\t%s\t\t\t\n", f.Requests, f.Items, f.Errors,
				f.Elapsed.Seconds(), f.PerSecond, ms(f.P50), ms(f.P99), ms(f.Max))
		}
		if f := p.Paced; f != nil && f.P50 > 0 {
			fmt.Fprintf(tw, "  library, paced\t%d\t%d\t%d\t%.2fs\t%.0f\t%s\t%s\t%s\t%.2f×\t%s\t\n", f.Requests, f.Items, f.Errors,
				f.Elapsed.Seconds(), f.PerSecond, ms(f.P50), ms(f.P99), ms(f.Max),
				float64(p.P50)/float64(f.P50), signed(p.P50-f.P50))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	paced := false
	for _, p := range r.Phases {
		if p.Name == pingPhase {
			fmt.Fprintf(w, "%s does no work: its p50 (%s) is the HTTP round trip between these processes, part of every p50-floor\n", p.Name, ms(p.P50))
		}
		if p.Paced != nil && !paced {
			paced = true
			fmt.Fprintln(w, "library, paced: each call after one ping, untimed, as a server's handler starts after waiting for the network; its p50/floor and p50-floor are the HTTP p50's against it")
		}
		if p.FirstError != "" {
			fmt.Fprintf(w, "%s: first error: %s\n", p.Name, p.FirstError)
		}
		if p.Floor != nil && p.Floor.FirstError != "" {
			fmt.Fprintf(w, "%s (library): first error: %s\n", p.Name, p.Floor.FirstError)
		}
		if p.Paced != nil && p.Paced.FirstError != "" {
			fmt.Fprintf(w, "%s (library, paced): first error: %s\n", p.Name, p.Paced.FirstError)
		}
	}
	return nil
}

// signed is ms with a sign.
func signed(d time.Duration) string {
	if d < 0 {
		return "-" + ms(-d)
	}
	return "+" + ms(d)
}

func ms(d time.Duration) string {
	if d < time.Millisecond {
		return fmt.Sprintf("%dµs", d.Microseconds())
	}
	return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000)
}

// lap is where a job's clock stops: for a request over HTTP, when its
// answer has been read in full (call), before the client decodes and
// checks it, as load generators time a request; otherwise, and through the
// library, when the job returns. Decoding a page of 10 grains with
// encoding/json is about 50 µs of this client's CPU on a 2-core machine,
// a cost of the client's parser that any server would be charged
// (docs/performance.md).
type lap struct{ start, end time.Time }

type lapKey struct{}

// stopLap stops the clock of the job ctx belongs to, once.
func stopLap(ctx context.Context) {
	if l, ok := ctx.Value(lapKey{}).(*lap); ok && l.end.IsZero() {
		l.end = time.Now()
	}
}

// restartLap starts the clock of the job ctx belongs to again: what the
// job did before is not timed.
func restartLap(ctx context.Context) {
	if l, ok := ctx.Value(lapKey{}).(*lap); ok {
		l.start = time.Now()
	}
}

// since returns the job's latency from t0, or from its restart.
func (l *lap) since(t0 time.Time) time.Duration {
	if !l.start.IsZero() {
		t0 = l.start
	}
	if l.end.IsZero() {
		return time.Since(t0)
	}
	return l.end.Sub(t0)
}

// work runs n jobs on the workers and measures each job's latency (see
// lap). A job returns the items it handled.
func (c *config) work(ctx context.Context, name string, n int, job func(ctx context.Context, i int) (int, error)) *phase {
	p := &phase{Name: name, latencies: make([]time.Duration, 0, n)}
	var mu sync.Mutex
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range c.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				var l lap
				items, err := job(context.WithValue(ctx, lapKey{}, &l), i)
				lat := l.since(t0)
				mu.Lock()
				p.Requests++
				p.latencies = append(p.latencies, lat)
				if err != nil {
					p.Errors++
					if p.FirstError == "" {
						p.FirstError = err.Error()
					}
				} else {
					p.Items += items
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	p.Elapsed = time.Since(start)
	if p.Elapsed > 0 {
		p.PerSecond = float64(p.Items) / p.Elapsed.Seconds()
	}
	slices.Sort(p.latencies)
	p.P50, p.P99 = percentile(p.latencies, 0.50), percentile(p.latencies, 0.99)
	if len(p.latencies) > 0 {
		p.Max = p.latencies[len(p.latencies)-1]
	}
	return p
}

// percentile returns the q-quantile of sorted (nearest rank).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// grain returns the i-th synthetic grain. Values are synthetic: nothing
// personal travels, but the shapes match real use (a triple, a user, a
// scope, a tag).
func (c *config) grain(i int) api.GrainInput {
	return api.GrainInput{
		Type: "fact", Subject: fmt.Sprintf("subject-%d", i%(c.grains/10+1)), Relation: fmt.Sprintf("rel-%d", i%20),
		Object: fmt.Sprintf("object-%d", i), UserID: fmt.Sprintf("user-%d", i%c.users),
		Scope: fmt.Sprintf("load/s%d", i%8), Tags: []string{fmt.Sprintf("t%d", i%50)}, Importance: 0.5,
	}
}

// target is where the operations go: the server over HTTP, or the library
// in process (the floor).
type target interface {
	add(ctx context.Context, memory string, in []api.GrainInput) ([]string, error)
	recall(ctx context.Context, memory, subject string, limit int) (int, error)
	get(ctx context.Context, memory, hash string) error
	forget(ctx context.Context, memory, hash string) (int, error)
	forgetUser(ctx context.Context, memory, user string) (int, error)
}

// httpTarget is the server.
type httpTarget struct{ c *config }

func (t httpTarget) add(ctx context.Context, memory string, in []api.GrainInput) ([]string, error) {
	var out api.AddBatchResponse
	err := t.c.call(ctx, http.MethodPost, "/api/memories/"+memory+"/grains", api.AddBatchRequest{Grains: in}, &out, http.StatusCreated)
	return out.Hashes, err
}

func (t httpTarget) recall(ctx context.Context, memory, subject string, limit int) (int, error) {
	var page struct {
		Grains []json.RawMessage `json:"grains"`
	}
	err := t.c.call(ctx, http.MethodPost, "/api/memories/"+memory+"/recall", api.RecallRequest{Subject: subject, Limit: limit}, &page, http.StatusOK)
	return len(page.Grains), err
}

func (t httpTarget) get(ctx context.Context, memory, hash string) error {
	return t.c.call(ctx, http.MethodGet, "/api/memories/"+memory+"/grains/"+hash, nil, nil, http.StatusOK)
}

func (t httpTarget) forget(ctx context.Context, memory, hash string) (int, error) {
	var out struct {
		Count int `json:"count"`
	}
	err := t.c.call(ctx, http.MethodPost, "/api/memories/"+memory+"/forget", api.ForgetRequest{BlobHash: &hash}, &out, http.StatusOK, http.StatusAccepted)
	return out.Count, err
}

func (t httpTarget) forgetUser(ctx context.Context, memory, user string) (int, error) {
	var out struct {
		Count int `json:"count"`
	}
	err := t.c.call(ctx, http.MethodPost, "/api/memories/"+memory+"/forget-user", api.ForgetUserRequest{UserID: &user}, &out, http.StatusOK, http.StatusAccepted)
	return out.Count, err
}

// libTarget is the library in process.
type libTarget struct{ db *lethe.DB }

func (t libTarget) add(ctx context.Context, memory string, in []api.GrainInput) ([]string, error) {
	gs := make([]lethe.Grain, len(in))
	for i := range in {
		gs[i] = in[i].Grain(memory)
	}
	return t.db.AddBatch(ctx, gs)
}

func (t libTarget) recall(ctx context.Context, memory, subject string, limit int) (int, error) {
	p, err := t.db.Recall(ctx, lethe.Query{Memory: memory, Subject: subject, Limit: limit})
	if err != nil {
		return 0, err
	}
	return len(p.Grains), nil
}

func (t libTarget) get(ctx context.Context, memory, hash string) error {
	_, err := t.db.Get(ctx, memory, hash)
	return err
}

func (t libTarget) forget(ctx context.Context, memory, hash string) (int, error) {
	r, err := t.db.Forget(ctx, lethe.Selector{Memory: memory, Hash: hash})
	if err != nil {
		return 0, err
	}
	return r.Count, nil
}

func (t libTarget) forgetUser(ctx context.Context, memory, user string) (int, error) {
	er, err := t.db.ForgetUser(ctx, memory, user)
	if err != nil {
		return 0, err
	}
	return int(er.Count), nil
}

// side is one target's state through the phases.
type side struct {
	t      target
	hashes []string
}

// load runs every phase on the server and, with lib, each again right
// after through the library, in a memory of the same name.
func (c *config) load(ctx context.Context, lib *lethe.DB) (*report, error) {
	r := &report{Server: c.server, Memory: c.memory, Concurrency: c.concurrency, Client: "conn"}
	if _, ok := c.client.(goClient); ok {
		r.Client = "go"
	}
	runs := []*side{{t: httpTarget{c}}}
	if lib != nil {
		runs = append(runs, &side{t: libTarget{lib}})
	}
	// each runs one phase on every target; the first is the server's.
	each := func(name string, n func(u *side) int, job func(u *side, ctx context.Context, i int) (int, error)) *phase {
		var first *phase
		for _, u := range runs {
			p := c.work(ctx, name, n(u), func(ctx context.Context, i int) (int, error) { return job(u, ctx, i) })
			if l, ok := u.t.(libTarget); ok {
				// The floor's trailing work (retrieval statistics, the
				// scrub after its forgets: on PostgreSQL a VACUUM of
				// 100,000 grains) ends before the server's next phase,
				// not during it: the floor shares this machine (and, on
				// PostgreSQL, the cluster).
				if err := l.db.Settle(ctx); err != nil && p.FirstError == "" {
					p.FirstError = "settle the floor: " + err.Error()
				}
			}
			if first == nil {
				first = p
			} else {
				first.Floor = p
			}
		}
		r.Phases = append(r.Phases, first)
		return first
	}
	// pace runs the floor of phase p again, each call after one ping,
	// untimed: the library then starts as a server's handler does, on a
	// core that has just waited for the network, not straight after the
	// previous call. On these machines a core that waits loses some of
	// what its caches held (docs/performance.md).
	pace := func(p *phase, n int, job func(u *side, ctx context.Context, i int) (int, error)) {
		if len(runs) < 2 || c.pings == 0 {
			return
		}
		u := runs[1]
		p.Paced = c.work(ctx, p.Name, n, func(ctx context.Context, i int) (int, error) {
			// The ping's own lap, so that its answer does not stop this
			// job's clock.
			if err := c.call(context.WithValue(ctx, lapKey{}, &lap{}), http.MethodGet, "/healthz", nil, nil, http.StatusOK); err != nil {
				return 0, err
			}
			restartLap(ctx)
			return job(u, ctx, i)
		})
		if err := u.t.(libTarget).db.Settle(ctx); err != nil && p.Paced.FirstError == "" {
			p.Paced.FirstError = "settle the floor: " + err.Error()
		}
	}

	batches := (c.grains + c.batch - 1) / c.batch
	for _, u := range runs {
		u.hashes = make([]string, c.grains)
	}
	add := each("add (batch)", func(*side) int { return batches }, func(u *side, ctx context.Context, b int) (int, error) {
		lo, hi := b*c.batch, min((b+1)*c.batch, c.grains)
		in := make([]api.GrainInput, 0, hi-lo)
		for i := lo; i < hi; i++ {
			in = append(in, c.grain(i))
		}
		hs, err := u.t.add(ctx, c.memory, in)
		if err == nil && len(hs) != hi-lo {
			err = fmt.Errorf("%d hashes for %d grains", len(hs), hi-lo)
		}
		if err != nil {
			return 0, err
		}
		copy(u.hashes[lo:hi], hs)
		return len(hs), nil
	})
	for _, u := range runs {
		u.hashes = slices.DeleteFunc(u.hashes, func(h string) bool { return h == "" })
		if len(u.hashes) == 0 {
			return r, fmt.Errorf("no grain was added: %s", add.FirstError)
		}
	}

	// The server only: the library has no round trip.
	if c.pings > 0 {
		r.Phases = append(r.Phases, c.work(ctx, pingPhase, c.pings, func(ctx context.Context, _ int) (int, error) {
			return 1, c.call(ctx, http.MethodGet, "/healthz", nil, nil, http.StatusOK)
		}))
	}

	rng := mrand.New(mrand.NewPCG(1, 2))
	subjects := make([]string, c.recalls)
	for i := range subjects {
		subjects[i] = c.grain(rng.IntN(c.grains)).Subject
	}
	recall := func(u *side, ctx context.Context, i int) (int, error) {
		n, err := u.t.recall(ctx, c.memory, subjects[i], 10)
		if err == nil && n == 0 {
			err = errors.New("recall found nothing")
		}
		return 1, err
	}
	pace(each("recall", func(*side) int { return c.recalls }, recall), c.recalls, recall)

	get := func(u *side, ctx context.Context, i int) (int, error) {
		return 1, u.t.get(ctx, c.memory, u.hashes[(i*7919)%len(u.hashes)])
	}
	pace(each("get", func(*side) int { return c.gets }, get), c.gets, get)

	// Forget grains of users that are not erased below.
	victims := make(map[*side][]string)
	for _, u := range runs {
		for i := len(u.hashes) - 1; i >= 0 && len(victims[u]) < c.forgets; i-- {
			if i%c.users >= c.erasures {
				victims[u] = append(victims[u], u.hashes[i])
			}
		}
	}
	each("forget (hash)", func(u *side) int { return len(victims[u]) }, func(u *side, ctx context.Context, i int) (int, error) {
		return u.t.forget(ctx, c.memory, victims[u][i])
	})

	each("erase (user)", func(*side) int { return min(c.erasures, c.users) }, func(u *side, ctx context.Context, i int) (int, error) {
		return u.t.forgetUser(ctx, c.memory, fmt.Sprintf("user-%d", i))
	})
	if ctx.Err() != nil {
		return r, fmt.Errorf("stopped by --duration or a signal: the report is partial")
	}
	return r, nil
}

// pingPhase is the name of the phase of requests that do no work.
const pingPhase = "ping (/healthz)"

// call sends in as JSON and decodes the answer into out; any status other
// than ok is an error carrying the server's code.
func (c *config) call(ctx context.Context, method, path string, in, out any, ok ...int) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.server+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	status, b, err := c.client.send(req)
	stopLap(ctx)
	if err != nil {
		return err
	}
	if !slices.Contains(ok, status) {
		var e api.ErrorResponse
		json.Unmarshal(b, &e)
		return fmt.Errorf("%s %s: HTTP %d %s: %s", method, strings.SplitN(path, "?", 2)[0], status, e.Code, e.Message)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}
