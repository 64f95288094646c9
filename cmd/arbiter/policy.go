package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/arbiterhq/arbiter/client"
)

// runPolicyList runs `arbiter policy list`.
func runPolicyList(ctx context.Context, c *command, p *process, args []string) error {
	fs := c.flagSet(p)
	if err := c.parse(fs, p, args); err != nil {
		return err
	}
	return callPolicy(c, p, func(cl *client.Client) (any, error) { return cl.ListPolicies(ctx) })
}

// runPolicyGet runs `arbiter policy get`.
func runPolicyGet(ctx context.Context, c *command, p *process, args []string) error {
	fs := c.flagSet(p)
	if err := c.parse(fs, p, args); err != nil {
		return err
	}
	return callPolicy(c, p, func(cl *client.Client) (any, error) { return cl.GetPolicy(ctx, fs.Arg(0)) })
}

// runPolicyPut runs `arbiter policy put`: the policy becomes what the
// flags say; a flag left out leaves its field unset.
func runPolicyPut(ctx context.Context, c *command, p *process, args []string) error {
	fs := c.flagSet(p)
	var in client.Policy
	number := func(dst **float64) func(string) error {
		return func(v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return errors.New("not a number")
			}
			*dst = &f
			return nil
		}
	}
	fs.Func("threshold", "the confidence below which a person decides, 0 to 1", number(&in.ConfidenceThreshold))
	fs.Func("deadline", "tasks expire this long after their creation unless decided, in whole seconds from 1m to 720h", func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d%time.Second != 0 || d <= 0 {
			return errors.New("not a positive duration in whole seconds, such as 90s, 10m or 24h")
		}
		seconds := int(d / time.Second)
		in.DeadlineSeconds = &seconds
		return nil
	})
	fs.Func("audit-rate", "the share of the verifier's confident answers a person also checks, blind, 0 to 1", number(&in.AuditRate))
	fs.Func("target-error-rate", "the error rate the policy holds the verifier to, which drift is watched against, between 0 and 1", number(&in.TargetErrorRate))
	fs.Func("target-confidence", "the confidence the target is certified and watched at, 0.5 to below 1 (default 0.95)", number(&in.TargetConfidence))
	onExpiryFlags(fs, &in.OnExpiry, &in.AgentFloor, func(v string) { in.OnExpiryFallback = &v })
	reviewFlags(fs, reviewFlagsOf{notify: &in.Notify, reviews: &in.ReviewsRequired, consensus: &in.Consensus, quorum: &in.Quorum,
		veto: &in.Veto, excludeRequester: &in.ExcludeRequester, tiebreak: &in.Tiebreak}, true)
	alertFlags(fs, &in.Reminders, &in.Escalation)
	if err := c.parse(fs, p, args); err != nil {
		return err
	}
	return callPolicy(c, p, func(cl *client.Client) (any, error) { return cl.PutPolicy(ctx, fs.Arg(0), in) })
}

// runPolicyDelete runs `arbiter policy delete`.
func runPolicyDelete(ctx context.Context, c *command, p *process, args []string) error {
	fs := c.flagSet(p)
	if err := c.parse(fs, p, args); err != nil {
		return err
	}
	return callPolicy(c, p, func(cl *client.Client) (any, error) { return nil, cl.DeletePolicy(ctx, fs.Arg(0)) })
}

// callPolicy makes a policy command's call and prints what it returns as
// JSON.
func callPolicy(c *command, p *process, call func(*client.Client) (any, error)) error {
	cl, err := taskClient(c, p)
	if err != nil {
		return err
	}
	out, err := call(cl)
	if err != nil {
		return fmt.Errorf("%s: %w", c.name, err)
	}
	if out == nil {
		return nil
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(p.stdout, "%s\n", b)
	return err
}
