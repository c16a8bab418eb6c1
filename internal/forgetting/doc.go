// Package forgetting holds lethe's forgetting policies as pure functions:
// decay curves, the archive ladder, retrieval-time decay, the risk sweep,
// auto-pin rules, and the policy file that configures them. It does no I/O
// except reading a policy file ([Load]), reads no clock (every function
// takes now), and sees only a grain's operational fields ([Facts]), which
// the store keeps in clear, so policies run without keys.
//
// # The four systems
//
//   - [DecayConfig]: Areev's decay purge. Retention is exponential
//     2^(-age/half_life), linear max(0, 1-decay_per_day*age) or Ebbinghaus
//     e^(-age/strength) over the effective age age_days/(1+importance);
//     grains below the threshold are forgotten.
//   - [LadderConfig]: MemState's archive ladder. Grains with salience below
//     forget_salience_threshold are archived and their salience halved;
//     triggers start runs; retrievals bump salience.
//   - [RetrievalConfig]: Vitamem's retrieval-time decay. A score
//     max(floor, 1-t/(2*half_life)) plus a retrieval boost ranks recall
//     and archives grains nobody retrieves.
//   - [RiskConfig]: linksee-memory's risk sweep. risk =
//     (1-heat/100)*(1-importance)*days*(1+days/30) compresses or drops
//     grains; caveats, goals, pinned and important grains are protected.
//
// # Composition
//
// The configs' methods are the seeds' formulas. [Policy] composes them the
// way lethe runs them: [Policy.PurgeCandidate], [Policy.LadderStep],
// [Policy.RetrievalArchive] and [Policy.Assess] never touch a protected
// grain ([RiskConfig.Protected]), [Policy.CheckForget] is the refusal of
// an explicit forget, [Policy.AutoPinned] decides pins at write time and
// [Policy.Retrieved] is a retrieval's effect on the facts. Enabled flags
// and schedules say whether the caller's scheduler runs a policy; only
// [LadderConfig.ShouldRun] and [RetrievalConfig.Rank], which are themselves
// that decision, read them.
//
// Legal holds, audit events and dry runs belong to the caller: every
// function here is already a dry run. See docs/compliance/forgetting.md.
//
// # Policy files
//
// A policy is YAML (policies/default.yaml lists every knob). [Parse] is
// strict: unknown and repeated keys, wrong types and out-of-range values
// are errors naming the key path, the line and the allowed range, all
// reported at once in a [ValidationError].
package forgetting
