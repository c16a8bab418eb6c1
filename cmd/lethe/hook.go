package main

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
)

// hooker is what "lethe hook" calls: the embedded store, or a server
// client that implements the same calls.
type hooker interface {
	AddHook(ctx context.Context, spec lethe.HookSpec) (*lethe.HookSecret, error)
	Hooks(ctx context.Context, memory string) ([]lethe.Hook, error)
	RemoveHook(ctx context.Context, memory, id string) error
	RotateHookSecret(ctx context.Context, memory, id string, overlap time.Duration) (*lethe.HookSecret, error)
	HookDeliveries(ctx context.Context, memory, id, state string) ([]lethe.HookDelivery, error)
	Redeliver(ctx context.Context, memory, id string, delivery int64) (int64, error)
}

var (
	_ hooker = (*lethe.DB)(nil)
	_ hooker = (*client)(nil)
)

const hookUsage = `usage: lethe hook add URL --events TYPE,... | hook list | hook remove ID
       lethe hook rotate ID [--overlap 24h] | hook deliveries ID [--state pending|dead]
       lethe hook redeliver ID [--delivery N]`

// cmdHook runs "lethe hook add|list|remove|rotate|deliveries|redeliver".
func cmdHook(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usagef("%s", hookUsage)
	}
	fs := e.flags("hook " + args[0])
	events := fs.String("events", "", "")
	overlap := fs.Duration("overlap", 0, "")
	state := fs.String("state", "", "")
	delivery := fs.Int64("delivery", 0, "")
	pos, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	one := func(what string) (string, error) {
		if len(pos) != 1 {
			return "", usagef("usage: lethe hook %s", what)
		}
		return pos[0], nil
	}
	// Each subcommand's own flag, if any: a sibling's is refused.
	switch args[0] {
	case "add":
		err = takesOnly(fs, "events")
	case "list":
		if err = noArgs(fs, pos); err == nil {
			err = takesOnly(fs)
		}
	case "remove":
		err = takesOnly(fs)
	case "rotate":
		err = takesOnly(fs, "overlap")
	case "deliveries":
		err = takesOnly(fs, "state")
	case "redeliver":
		err = takesOnly(fs, "delivery")
	default:
		return usagef("unknown hook command %q (add, list, remove, rotate, deliveries, redeliver)", args[0])
	}
	if err != nil {
		return err
	}
	b, err := e.backend(ctx)
	if err != nil {
		return err
	}
	h, ok := b.(hooker)
	if !ok {
		return errRemote("hook")
	}
	switch args[0] {
	case "add":
		u, err := one("add URL --events TYPE,...")
		if err != nil {
			return err
		}
		if *events == "" {
			return usagef(`hook add needs --events TYPE,... (audit event types, or "*" for all)`)
		}
		hs, err := h.AddHook(ctx, lethe.HookSpec{Memory: e.memory, URL: u, Events: strings.Split(*events, ",")})
		if err != nil {
			return err
		}
		return printHookSecret(e, hs)
	case "list":
		hs, err := h.Hooks(ctx, e.memory)
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(hs)
		}
		for _, x := range hs {
			printf(e.stdout, "%s %s events=%s status=%s", x.ID, x.URL, strings.Join(x.Events, ","), x.Status)
			if x.ConsecutiveFailures > 0 {
				printf(e.stdout, " failures=%d", x.ConsecutiveFailures)
			}
			if x.PausedUntil != nil {
				printf(e.stdout, " paused_until=%s", x.PausedUntil.Format(time.RFC3339))
			}
			printf(e.stdout, "\n")
		}
	case "remove":
		id, err := one("remove ID")
		if err != nil {
			return err
		}
		if err := h.RemoveHook(ctx, e.memory, id); err != nil {
			return err
		}
		if e.json {
			return e.printJSON(map[string]string{"removed": id})
		}
		printf(e.stdout, "removed %s\n", id)
	case "rotate":
		id, err := one("rotate ID [--overlap 24h]")
		if err != nil {
			return err
		}
		hs, err := h.RotateHookSecret(ctx, e.memory, id, *overlap)
		if err != nil {
			return err
		}
		return printHookSecret(e, hs)
	case "deliveries":
		id, err := one("deliveries ID [--state pending|dead]")
		if err != nil {
			return err
		}
		ds, err := h.HookDeliveries(ctx, e.memory, id, *state)
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(ds)
		}
		for _, d := range ds {
			printf(e.stdout, "%d %s %s attempts=%d last_error=%q\n", d.ID, d.EventID, d.State, d.Attempts, d.LastError)
		}
	case "redeliver":
		id, err := one("redeliver ID [--delivery N]")
		if err != nil {
			return err
		}
		n, err := h.Redeliver(ctx, e.memory, id, *delivery)
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(api.Redelivered{Redelivered: n})
		}
		printf(e.stdout, "redelivering %d\n", n)
	}
	return nil
}

// printHookSecret prints a hook's id and its secret, which is shown only
// now.
func printHookSecret(e *env, hs *lethe.HookSecret) error {
	if e.json {
		return e.printJSON(hs)
	}
	printf(e.stdout, "%s\n%s\n", hs.ID, hs.Secret)
	printf(e.stderr, "the secret is shown only now: give it to the receiver to verify signatures\n")
	return nil
}

// The server client's hook calls.

func hookPath(memory, id string) string {
	p := memoryPath(memory) + "/hooks"
	if id != "" {
		p += "/" + url.PathEscape(id)
	}
	return p
}

func (c *client) AddHook(ctx context.Context, spec lethe.HookSpec) (*lethe.HookSecret, error) {
	var out lethe.HookSecret
	if _, err := c.do(ctx, http.MethodPost, hookPath(spec.Memory, ""), api.HookRequest{URL: spec.URL, Events: spec.Events}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *client) Hooks(ctx context.Context, memory string) ([]lethe.Hook, error) {
	var out api.HookList
	if _, err := c.do(ctx, http.MethodGet, hookPath(memory, ""), nil, &out); err != nil {
		return nil, err
	}
	return out.Hooks, nil
}

func (c *client) RemoveHook(ctx context.Context, memory, id string) error {
	_, err := c.do(ctx, http.MethodDelete, hookPath(memory, id), nil, nil)
	return err
}

func (c *client) RotateHookSecret(ctx context.Context, memory, id string, overlap time.Duration) (*lethe.HookSecret, error) {
	var out lethe.HookSecret
	req := api.RotateHookRequest{OverlapSeconds: int64(overlap / time.Second)}
	if _, err := c.do(ctx, http.MethodPost, hookPath(memory, id)+"/rotate", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *client) HookDeliveries(ctx context.Context, memory, id, state string) ([]lethe.HookDelivery, error) {
	var out api.DeliveryList
	p := hookPath(memory, id) + "/deliveries"
	if state != "" {
		p += "?state=" + url.QueryEscape(state)
	}
	if _, err := c.do(ctx, http.MethodGet, p, nil, &out); err != nil {
		return nil, err
	}
	return out.Deliveries, nil
}

func (c *client) Redeliver(ctx context.Context, memory, id string, delivery int64) (int64, error) {
	var out api.Redelivered
	if _, err := c.do(ctx, http.MethodPost, hookPath(memory, id)+"/redeliver", api.RedeliverRequest{DeliveryID: delivery}, &out); err != nil {
		return 0, err
	}
	return out.Redelivered, nil
}
