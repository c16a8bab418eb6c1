package cal

import (
	"context"
	"sort"
	"time"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/grains"
)

// DB is what Exec needs of a lethe store; *lethe.DB has it, and the HTTP
// API supplies one that applies a token's scopes as its routes do. Each
// method has the contract of the lethe.DB method of the same name.
type DB interface {
	Get(ctx context.Context, memory, hash string) (*lethe.Grain, error)
	History(ctx context.Context, memory, hash string) ([]lethe.Grain, error)
	Recall(ctx context.Context, q lethe.Query) (*lethe.Page, error)
	Forget(ctx context.Context, sel lethe.Selector) (*lethe.ForgetResult, error)
	Supersede(ctx context.Context, oldHash string, g lethe.Grain, set ...string) (string, error)
}

var _ DB = (*lethe.DB)(nil)

// MaxHistoryGrains bounds the grains HISTORY WHERE reads to find chains;
// past it the answer says truncated.
const MaxHistoryGrains = 1000

// Result is the answer to a statement: *HistoryResult,
// *SubjectHistoryResult, *ForgetResult, *SupersedeResult or
// *RecallResult. Each encodes as a JSON object whose "statement" names the
// statement's verb in lowercase.
type Result interface{ result() }

// HistoryResult answers HISTORY OF: the chain, newest first, each version
// with its hash, created_at and fields (an erased version as its hash and
// "erased": true alone).
type HistoryResult struct {
	Statement string        `json:"statement"`
	Grains    []lethe.Grain `json:"grains"`
}

// SubjectHistoryResult answers HISTORY WHERE subject = "...": the chain of
// every grain about the subject, superseded and archived versions
// included, the chain with the newest version first.
type SubjectHistoryResult struct {
	Statement string  `json:"statement"`
	Chains    []Chain `json:"chains"`
	// Truncated says more than MaxHistoryGrains grains matched and only
	// the chains of the newest were read.
	Truncated bool `json:"truncated,omitempty"`
}

// Chain is one version chain, newest first.
type Chain struct {
	Grains []lethe.Grain `json:"grains"`
}

// ForgetResult answers FORGET, as POST .../forget does.
type ForgetResult struct {
	Statement string `json:"statement"`
	*lethe.ForgetResult
}

// SupersedeResult answers SUPERSEDE, as POST .../supersede does.
type SupersedeResult struct {
	Statement  string `json:"statement"`
	Hash       string `json:"hash"`
	Superseded string `json:"superseded"`
	Status     string `json:"status"`
}

// RecallResult answers RECALL: one page, as POST .../recall does.
type RecallResult struct {
	Statement string `json:"statement"`
	*lethe.Page
}

func (*HistoryResult) result()        {}
func (*SubjectHistoryResult) result() {}
func (*ForgetResult) result()         {}
func (*SupersedeResult) result()      {}
func (*RecallResult) result()         {}

// Exec runs st against memory of db ("" means "default"). Errors are
// db's, unchanged, so their codes are those of the library calls.
func Exec(ctx context.Context, db DB, memory string, st Statement) (Result, error) {
	switch st := st.(type) {
	case *History:
		if st.Subject != "" {
			return subjectHistory(ctx, db, memory, st.Subject)
		}
		chain, err := db.History(ctx, memory, st.Hash)
		if err != nil {
			return nil, err
		}
		return &HistoryResult{Statement: "history", Grains: nonNil(chain)}, nil
	case *Forget:
		res, err := db.Forget(ctx, lethe.Selector{Memory: memory, Hash: st.Hash})
		if err != nil {
			return nil, err
		}
		return &ForgetResult{Statement: "forget", ForgetResult: res}, nil
	case *Supersede:
		// Every field SET names is set, empty included (content = ""
		// clears); the others, type included, carry forward.
		g := GrainOf(st.Set)
		g.Memory = memory
		h, err := db.Supersede(ctx, st.Hash, g, SetFields(st.Set)...)
		if err != nil {
			return nil, err
		}
		return &SupersedeResult{Statement: "supersede", Hash: h, Superseded: st.Hash, Status: "superseded"}, nil
	case *Recall:
		page, err := db.Recall(ctx, QueryOf(memory, st))
		if err != nil {
			return nil, err
		}
		return &RecallResult{Statement: "recall", Page: page}, nil
	}
	return nil, grains.Errorf(grains.CodeInternal, "cal: unknown statement type %T", st)
}

// subjectHistory recalls every grain about subject, superseded and
// archived included, and reads the chain of each once.
func subjectHistory(ctx context.Context, db DB, memory, subject string) (*SubjectHistoryResult, error) {
	res := &SubjectHistoryResult{Statement: "history", Chains: []Chain{}}
	q := lethe.Query{Memory: memory, Subject: subject, IncludeSuperseded: true, IncludeArchived: true, Disclosure: true}
	seen := map[string]bool{}
	read := 0
	for {
		page, err := db.Recall(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, g := range page.Grains {
			if read == MaxHistoryGrains {
				res.Truncated = true
				break
			}
			read++
			if seen[g.Hash] {
				continue
			}
			chain, err := db.History(ctx, memory, g.Hash)
			if lethe.ErrorCode(err) == lethe.CodeNotFound || lethe.ErrorCode(err) == lethe.CodeErased {
				continue // forgotten or erased since the recall
			}
			if err != nil {
				return nil, err
			}
			for _, v := range chain {
				seen[v.Hash] = true
			}
			res.Chains = append(res.Chains, Chain{Grains: chain})
		}
		if res.Truncated || page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	sort.SliceStable(res.Chains, func(i, j int) bool {
		return newest(res.Chains[i]).After(newest(res.Chains[j]))
	})
	return res, nil
}

// newest is when the newest readable version of c was written.
func newest(c Chain) (t time.Time) {
	for _, g := range c.Grains {
		if !g.Erased {
			return g.CreatedAt
		}
	}
	return t
}

func nonNil(gs []lethe.Grain) []lethe.Grain {
	if gs == nil {
		return []lethe.Grain{}
	}
	return gs
}

// SetFields returns the names of the fields set assigns, in order.
func SetFields(set []Assign) []string {
	out := make([]string, len(set))
	for i, a := range set {
		out[i] = a.Field
	}
	return out
}

// QueryOf returns the query of a RECALL in memory.
func QueryOf(memory string, r *Recall) lethe.Query {
	q := lethe.Query{Memory: memory, Limit: r.Limit}
	str := map[string]*string{"type": &q.Type, "subject": &q.Subject, "relation": &q.Relation, "object": &q.Object,
		"namespace": &q.Namespace, "scope": &q.Scope, "user_id": &q.UserID}
	for _, c := range r.Where {
		if c.Field == "tag" {
			q.Tags = append(q.Tags, c.Value)
			continue
		}
		*str[c.Field] = c.Value
	}
	return q
}
