package forgetting

import (
	"regexp"
	"strings"
	"time"

	"github.com/lethe-io/lethe/internal/grains"
)

// Version is the policy file format version.
const Version = 1

// Policy is a forgetting policy: the four systems' knobs, the auto-pin
// rules, and lethe's composition of them (protection, pins). Use [Default],
// [Parse] or [Load] to get one; a Policy built by hand must pass
// [Policy.Validate] before use.
type Policy struct {
	Version   int             `yaml:"version"`
	Decay     DecayConfig     `yaml:"decay"`
	Ladder    LadderConfig    `yaml:"ladder"`
	Retrieval RetrievalConfig `yaml:"retrieval"`
	Risk      RiskConfig      `yaml:"risk"`
	AutoPin   []AutoPin       `yaml:"auto_pin"`
	KEK       KEKConfig       `yaml:"kek"`

	pins []*regexp.Regexp // AutoPin's patterns, compiled by Validate
}

// KEKConfig schedules rotations of the key-encryption key: a new KEK
// version, every live data key rewrapped, versions older than the Keep
// newest destroyed. RotateEvery is the residue horizon: a copy of an erased
// key (a backup, a WAL archive, a replica) stays unwrappable at most about
// RotateEvery * Keep after the erasure.
type KEKConfig struct {
	RotateEvery Interval `yaml:"rotate_every"` // 0 (off): rotate only on demand (lethe keys rotate)
	Keep        int      `yaml:"keep"`         // KEK versions kept usable, the newest included
}

// MinKEKRotation is the shortest KEK rotation interval: a rotation
// rewraps every live data key.
const MinKEKRotation = Interval(time.Hour)

// AutoPin is an auto-pin rule: a grain whose Field matches Pattern (Go
// regexp syntax, RE2) is pinned when it is written, and a pinned grain
// never decays, is never archived by a policy and is protected from
// forgetting. The caller supplies the field values in clear at write time
// (see [PinFields]); nothing here is stored.
type AutoPin struct {
	Name    string `yaml:"name"`
	Field   string `yaml:"field"` // one of AutoPinFields; "" means content
	Pattern string `yaml:"pattern"`
}

// AutoPinFields are the fields an auto-pin rule may match.
var AutoPinFields = []string{"content", "subject", "relation", "object", "tags", "type", "namespace"}

// Default returns the default policy: the seeds' defaults, with the
// destructive policies (decay purge, risk sweep) not scheduled. It is what
// policies/default.yaml says.
func Default() *Policy {
	const day = Interval(24 * time.Hour)
	return &Policy{
		Version: Version,
		Decay: DecayConfig{
			Enabled:      false,
			Schedule:     day,
			Curve:        CurveExponential,
			HalfLifeDays: DefaultHalfLifeDays,
			DecayPerDay:  DefaultDecayPerDay,
			StrengthDays: DefaultStrengthDays,
			Threshold:    DefaultDecayThreshold,
			MinAgeDays:   DefaultMinAgeDays,
			Batch:        DefaultDecayBatch,
			Namespace:    "",
			ImmuneTypes:  []string{"state"},
		},
		Ladder: LadderConfig{
			Enabled:                 true,
			Schedule:                Interval(time.Hour),
			ForgetSalienceThreshold: DefaultForgetSalienceThreshold,
			SoftLimit:               DefaultSoftLimit,
			ScanBound:               DefaultScanBound,
			RetrievalBump:           DefaultRetrievalBump,
			SalienceHalfLifeDays:    DefaultSalienceHalfLifeDays,
			Triggers:                []Trigger{TriggerIngestComplete, TriggerQueryComplete, TriggerCron, TriggerMemoryPressure},
			Rungs:                   Rungs{Archive: true},
		},
		Retrieval: RetrievalConfig{
			Enabled:           true,
			Schedule:          day,
			HalfLifeDays:      DefaultRetrievalHalfLifeDays,
			Floor:             DefaultDecayFloor,
			BoostScale:        DefaultBoostScale,
			BoostCap:          DefaultBoostCap,
			MinRetrievalScore: DefaultMinRetrievalScore,
		},
		Risk: RiskConfig{
			Enabled:           false,
			Schedule:          day,
			CompressAt:        DefaultCompressAt,
			DropAt:            DefaultDropAt,
			HeatPerAccess:     DefaultHeatPerAccess,
			HeatWindowDays:    DefaultHeatWindowDays,
			ProtectedTypes:    []string{"caveat", "goal"},
			ProtectImportance: DefaultProtectImportance,
		},
		KEK: KEKConfig{RotateEvery: 0, Keep: 1},
	}
}

// PurgeCandidate reports whether the decay purge forgets the grain at now:
// a [DecayConfig.Candidate] that no protection rule keeps. Holds are the
// caller's to check.
func (p *Policy) PurgeCandidate(f Facts, now time.Time) bool {
	if prot, _, _ := p.Risk.Protected(f); prot {
		return false
	}
	return p.Decay.Candidate(f, now)
}

// LadderStep is [LadderConfig.Step] for grains no protection rule keeps;
// a protected grain is never archived (archive false, salience unchanged).
func (p *Policy) LadderStep(f Facts, now time.Time) (archive bool, newSalience float64) {
	if prot, _, _ := p.Risk.Protected(f); prot {
		return false, f.Salience
	}
	return p.Ladder.Step(f, now)
}

// RetrievalArchive reports whether the retrieval sweep archives the grain
// at now: [RetrievalConfig.ShouldArchive] for grains no protection rule
// keeps.
func (p *Policy) RetrievalArchive(f Facts, now time.Time) bool {
	if prot, _, _ := p.Risk.Protected(f); prot {
		return false
	}
	return p.Retrieval.ShouldArchive(f, now)
}

// Assess is [RiskConfig.Assess].
func (p *Policy) Assess(f Facts, now time.Time) (Action, float64) { return p.Risk.Assess(f, now) }

// Protected is [RiskConfig.Protected].
func (p *Policy) Protected(f Facts) (protected bool, reason, hint string) {
	return p.Risk.Protected(f)
}

// CheckForget returns nil if an explicit forget may delete the grain, or a
// *grains.Error with code [grains.CodeProtected], the reason and a hint if
// a protection rule keeps it. Neither names personal data. Holds are the
// caller's to check, before this.
func (p *Policy) CheckForget(f Facts) error {
	prot, reason, hint := p.Risk.Protected(f)
	if !prot {
		return nil
	}
	return &grains.Error{Code: grains.CodeProtected, Message: "cannot forget a protected grain: " + reason, Hint: hint}
}

// Retrieved returns the facts after one retrieval at now: see
// [Policy.RetrievedN].
func (p *Policy) Retrieved(f Facts, now time.Time) Facts { return p.RetrievedN(f, 1, now) }

// RetrievedN returns the facts after n retrievals, the latest at last: n
// more retrievals, the last retrieval moved forward to last (never back:
// statistics reach the store out of order), salience bumped n times at
// once ([LadderConfig.BumpN]). This is the one rule of a retrieval's
// effect: the store applies it in SQL when it writes statistics back
// (store.RecordRetrievals), and a test holds the two to the same values.
func (p *Policy) RetrievedN(f Facts, n int64, last time.Time) Facts {
	if last.After(f.LastRetrievedAt) {
		f.LastRetrievedAt = last
	}
	f.RetrievalCount += n
	f.Salience = p.Ladder.BumpN(f.Salience, n)
	return f
}

// AutoPinned reports whether an auto-pin rule matches. fields maps the
// names in AutoPinFields to their values in clear; see [PinFields].
func (p *Policy) AutoPinned(fields map[string]string) bool {
	_, ok := p.AutoPinRule(fields)
	return ok
}

// AutoPinRule returns the name of the first auto-pin rule that matches
// fields, for the write's audit record; ok is false if none does.
func (p *Policy) AutoPinRule(fields map[string]string) (name string, ok bool) {
	for i, r := range p.AutoPin {
		var re *regexp.Regexp
		if i < len(p.pins) && p.pins[i] != nil && p.pins[i].String() == r.Pattern {
			re = p.pins[i]
		} else {
			// Not validated, or changed since: compile now, and treat a
			// pattern that does not compile as matching nothing.
			var err error
			if re, err = regexp.Compile(r.Pattern); err != nil {
				continue
			}
		}
		field := r.Field
		if field == "" {
			field = "content"
		}
		if v, has := fields[field]; has && re.MatchString(v) {
			return r.Name, true
		}
	}
	return "", false
}

// PinFields returns the fields auto-pin rules match, from a grain in clear:
// tags are joined with ",".
func PinFields(g *grains.Grain) map[string]string {
	return map[string]string{
		"content":   g.Content,
		"subject":   g.Subject,
		"relation":  g.Relation,
		"object":    g.Object,
		"tags":      strings.Join(g.Tags, ","),
		"type":      g.Type,
		"namespace": g.Namespace,
	}
}
