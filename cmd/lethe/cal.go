package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/lethe-io/lethe/internal/cal"
)

// cmdCal runs one CAL statement: on the embedded store through the
// library, or with --server through POST .../cal, where the token's roles
// and scopes apply. FORGET needs --yes, as lethe forget does.
func cmdCal(ctx context.Context, e *env, args []string) error {
	fs := e.flags("cal")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("cal: need exactly one statement, quoted: lethe cal 'HISTORY OF \"HASH\"'")
	}
	src := pos[0]
	st, err := cal.Parse(src) // locally first: a syntax error needs no server
	if err != nil {
		return err
	}
	if _, ok := st.(*cal.Forget); ok {
		if err := e.needYes("FORGET"); err != nil {
			return err
		}
	}
	var res cal.Result
	if e.server != "" {
		c, err := e.client()
		if err != nil {
			return err
		}
		var raw []byte
		if _, err := c.send(ctx, "POST", memoryPath(e.memory)+"/cal", "text/cal", strings.NewReader(src), &raw); err != nil {
			return err
		}
		if res, err = decodeResult(st, raw); err != nil {
			return err
		}
	} else {
		db, err := e.open(ctx)
		if err != nil {
			return err
		}
		if res, err = cal.Exec(ctx, db, e.memory, st); err != nil {
			return err
		}
	}
	if e.json {
		return e.printJSON(res)
	}
	switch r := res.(type) {
	case *cal.HistoryResult:
		for _, g := range r.Grains {
			printf(e.stdout, "%s\n", line(&g))
		}
	case *cal.SubjectHistoryResult:
		for i, ch := range r.Chains {
			if i > 0 {
				printf(e.stdout, "\n")
			}
			for _, g := range ch.Grains {
				printf(e.stdout, "%s\n", line(&g))
			}
		}
		if r.Truncated {
			printf(e.stderr, "lethe: more than %d grains matched; only the newest chains are shown\n", cal.MaxHistoryGrains)
		}
	case *cal.RecallResult:
		for _, g := range r.Grains {
			printf(e.stdout, "%s\n", line(&g))
		}
		if r.Next != "" {
			printf(e.stderr, "next page: --cursor %s (RECALL takes no cursor: use lethe recall)\n", r.Next)
		}
	case *cal.SupersedeResult:
		printf(e.stdout, "%s\n", r.Hash)
	case *cal.ForgetResult:
		printf(e.stdout, "forgot %d grain(s)\n", r.Count)
	}
	return nil
}

// decodeResult decodes a server's answer to st.
func decodeResult(st cal.Statement, b []byte) (cal.Result, error) {
	var res cal.Result
	switch st := st.(type) {
	case *cal.History:
		if st.Subject != "" {
			res = &cal.SubjectHistoryResult{}
		} else {
			res = &cal.HistoryResult{}
		}
	case *cal.Recall:
		res = &cal.RecallResult{}
	case *cal.Supersede:
		res = &cal.SupersedeResult{}
	case *cal.Forget:
		res = &cal.ForgetResult{}
	}
	if err := json.Unmarshal(b, res); err != nil {
		return nil, fmt.Errorf("decode the server's answer: %w", err)
	}
	return res, nil
}
