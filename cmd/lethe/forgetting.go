package main

import (
	"context"
	"flag"
	"strconv"
	"strings"

	"github.com/lethe-io/lethe"
)

// forgetter is what the forgetting-policy commands call: the embedded store
// or, with --server, a lethe server.
type forgetter interface {
	PurgeStale(ctx context.Context, opts lethe.PurgeOptions) (*lethe.PurgeResult, error)
	Archive(ctx context.Context, memory string, opts lethe.ArchiveOptions) (*lethe.ArchiveResult, error)
	ArchiveGrains(ctx context.Context, memory string, hashes []string) (*lethe.ArchiveResult, error)
	ShouldArchive(ctx context.Context, memory string) ([]string, error)
	RiskSweep(ctx context.Context, memory string, opts lethe.RiskOptions) (*lethe.RiskResult, error)
}

var (
	_ forgetter = (*lethe.DB)(nil)
	_ forgetter = (*client)(nil)
)

// forgetter returns the store the policy commands run on. policyFile, for
// the embedded store, replaces the built-in default policy; a server runs
// its own.
func (e *env) forgetter(ctx context.Context, name, policyFile string) (forgetter, error) {
	if e.server != "" {
		if policyFile != "" {
			return nil, usagef("%s: --policy applies to the embedded store; a server runs the policy it was started with", name)
		}
		return e.client()
	}
	if policyFile == "" {
		return e.open(ctx)
	}
	p, err := lethe.LoadPolicy(policyFile)
	if err != nil {
		return nil, err
	}
	return e.openPolicy(ctx, p)
}

// needConfirm refuses a destructive policy run without --yes.
func (e *env) needConfirm(what string) error {
	if e.yes {
		return nil
	}
	return &lethe.Error{Code: lethe.CodeInvalidArgument, Message: what + " is destructive and needs --yes",
		Hint: "see what it would do with --dry-run first, then repeat with --yes"}
}

// days is a flag holding a number of days: "30" or "30d".
type days struct {
	v   float64
	set bool
}

func (d *days) String() string { return strconv.FormatFloat(d.v, 'g', -1, 64) }
func (d *days) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "d"), 64)
	if err != nil || v <= 0 {
		return usagef("want a positive number of days, such as 30 or 30d")
	}
	d.v, d.set = v, true
	return nil
}

func cmdPurge(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] != "stale" {
		return usagef("purge: want 'lethe purge stale [flags]'")
	}
	fs := e.flags("purge stale")
	var halfLife, strength days
	fs.Var(&halfLife, "half-life", "")
	fs.Var(&strength, "strength-days", "")
	decayPerDay := fs.Float64("decay-per-day", 0, "")
	threshold := fs.Float64("threshold", 0, "")
	minAge := fs.Int("min-age-days", 0, "")
	batch := fs.Int("batch", 0, "")
	namespace := fs.String("namespace", "", "")
	curve := fs.String("curve", "", "")
	dryRun := fs.Bool("dry-run", false, "")
	policyFile := fs.String("policy", "", "")
	pos, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("purge stale: unexpected argument %q", pos[0])
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	opts := lethe.PurgeOptions{Memory: e.memory, Curve: lethe.Curve(*curve), HalfLifeDays: halfLife.v, StrengthDays: strength.v,
		DecayPerDay: *decayPerDay, Batch: *batch, Namespace: *namespace, DryRun: *dryRun}
	if set["threshold"] {
		opts.Threshold = threshold
	}
	if set["min-age-days"] {
		opts.MinAgeDays = minAge
	}
	if set["batch"] && *batch <= 0 {
		return usagef("purge stale: --batch must be at least 1")
	}
	if !*dryRun {
		if err := e.needConfirm("purge stale"); err != nil {
			return err
		}
	}
	f, err := e.forgetter(ctx, "purge stale", *policyFile)
	if err != nil {
		return err
	}
	res, err := f.PurgeStale(ctx, opts)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(res)
	}
	verb := "forgot"
	if res.DryRun {
		verb = "would forget"
		for _, h := range res.Hashes {
			printf(e.stdout, "%s\n", h)
		}
	}
	printf(e.stdout, "%s %d grain(s) (%d candidate(s) below the threshold, every version of their chains); %d held, %d protected, %d pinned; scanned %d\n",
		verb, res.Forgotten, res.Candidates, res.Held, res.Protected, res.Pinned, res.Scanned)
	printReceipt(e, res.Receipt)
	return nil
}

func printReceipt(e *env, r *lethe.Receipt) {
	if r == nil {
		return
	}
	state := "proof ready"
	if r.Pending {
		state = "proof pending"
	}
	printf(e.stdout, "event %s (%s)\n", r.EventID, state)
}

func cmdArchive(ctx context.Context, e *env, args []string) error {
	fs := e.flags("archive")
	trigger := fs.String("trigger", "", "")
	dryRun := fs.Bool("dry-run", false, "")
	candidates := fs.Bool("candidates", false, "")
	policyFile := fs.String("policy", "", "")
	hashes, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(hashes) > 0 && (*trigger != "" || *dryRun || *candidates) {
		return usagef("archive: give HASH... or run the ladder with --trigger/--dry-run, not both")
	}
	f, err := e.forgetter(ctx, "archive", *policyFile)
	if err != nil {
		return err
	}
	if *candidates {
		// Vitamem's shouldArchive: grains whose retrieval score fell to
		// min_retrieval_score; changes nothing.
		hs, err := f.ShouldArchive(ctx, e.memory)
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(map[string]any{"hashes": hs, "count": len(hs)})
		}
		for _, h := range hs {
			printf(e.stdout, "%s\n", h)
		}
		printf(e.stderr, "%d archive candidate(s) (retrieval score at or below retrieval.min_retrieval_score)\n", len(hs))
		return nil
	}
	var res *lethe.ArchiveResult
	if len(hashes) > 0 {
		res, err = f.ArchiveGrains(ctx, e.memory, hashes)
	} else {
		res, err = f.Archive(ctx, e.memory, lethe.ArchiveOptions{Trigger: lethe.Trigger(*trigger), DryRun: *dryRun})
	}
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(res)
	}
	if !res.Ran {
		printf(e.stdout, "the ladder did not run: trigger %s with %d unarchived grain(s) (see ladder.soft_limit and ladder.triggers in the policy)\n",
			res.Trigger, res.Live)
		return nil
	}
	verb := "archived"
	if res.DryRun {
		verb = "would archive"
		for _, h := range res.Hashes {
			printf(e.stdout, "%s\n", h)
		}
	}
	printf(e.stdout, "%s %d grain(s)", verb, res.Archived)
	if len(hashes) == 0 {
		printf(e.stdout, "; %d protected; scanned %d", res.Protected, res.Scanned)
	}
	printf(e.stdout, "\n")
	printReceipt(e, res.Receipt)
	return nil
}

func cmdRisk(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] != "sweep" {
		return usagef("risk: want 'lethe risk sweep [--dry-run]'")
	}
	fs := e.flags("risk sweep")
	dryRun := fs.Bool("dry-run", false, "")
	batch := fs.Int("batch", 0, "")
	policyFile := fs.String("policy", "", "")
	pos, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("risk sweep: unexpected argument %q", pos[0])
	}
	if *batch < 0 {
		return usagef("risk sweep: --batch must be at least 1")
	}
	if !*dryRun {
		if err := e.needConfirm("risk sweep"); err != nil {
			return err
		}
	}
	f, err := e.forgetter(ctx, "risk sweep", *policyFile)
	if err != nil {
		return err
	}
	res, err := f.RiskSweep(ctx, e.memory, lethe.RiskOptions{Batch: *batch, DryRun: *dryRun})
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(res)
	}
	for _, it := range res.Items {
		printf(e.stdout, "%s %-9s risk %.1f\n", it.Hash, it.Action, it.Risk)
	}
	format := "compressed %d and dropped %d grain(s); %d held, %d protected, %d kept; scanned %d\n"
	if res.DryRun {
		format = "would compress %d and drop %d grain(s); %d held, %d protected, %d kept; scanned %d\n"
	}
	printf(e.stdout, format, res.Compressed, res.Dropped, res.Held, res.Protected, res.Kept, res.Scanned)
	printReceipt(e, res.Receipt)
	return nil
}
