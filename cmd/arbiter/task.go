package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/client"
)

// The task commands' environment: the client's settings.
const (
	envAPIKey  = "SVC_API_KEY"
	envBaseURL = "SVC_BASE_URL"
)

// clientEnv is the environment the task commands read.
var clientEnv = []envVar{
	{name: envAPIKey, help: "the API key the requests carry (required)"},
	{name: envBaseURL, help: "the server's origin", def: client.DefaultBaseURL},
}

// runTaskCreate runs `arbiter task create`: an API client of a running
// server, built on the client package.
func runTaskCreate(ctx context.Context, c *command, p *process, args []string) error {
	fs := c.flagSet(p)
	var in client.TaskCreate
	fs.StringVar(&in.Prompt, "prompt", "", "the question (required)")
	fs.Func("verdict", "an allowed verdict; repeat for each (at least one)", func(v string) error {
		in.AllowedVerdicts = append(in.AllowedVerdicts, v)
		return nil
	})
	contextArg := fs.String("context", "", "the task's context: JSON, or @FILE to read it from a file (@- for stdin)")
	fs.Func("threshold", "the confidence below which a person decides, 0 to 1 (server default 0.8)", func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return errors.New("not a number")
		}
		in.ConfidenceThreshold = &f
		return nil
	})
	fs.StringVar(&in.TaskType, "task-type", "", "a label for the kind of task (server default decide)")
	fs.StringVar(&in.Touchpoint, "touchpoint", "", "where the question came from (server default chat)")
	fs.StringVar(&in.Source, "source", "", "a free-form label")
	fs.StringVar(&in.CallbackURL, "callback-url", "",
		"also post the task's webhook events to this https:// URL, signed with the account's callback secret")
	fs.StringVar(&in.IdempotencyKey, "idempotency-key", "",
		"makes the create safe to repeat: the same key and task return the task made first (1 to 255 printable ASCII characters)")
	fs.Func("deadline", "the task expires this long after its creation unless it is decided by then, in whole seconds from 1m to 720h (default none)",
		func(v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d%time.Second != 0 || d <= 0 {
				return errors.New("not a positive duration in whole seconds, such as 90s, 10m or 24h")
			}
			in.DeadlineSeconds = int(d / time.Second)
			return nil
		})
	fs.Func("audit-rate", "the share of the verifier's confident answers on this task a person also checks, blind, 0 to 1 (default: the account's audit rate)",
		func(v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return errors.New("not a number")
			}
			in.AuditRate = &f
			return nil
		})
	onExpiryFlags(fs, &in.OnExpiry, &in.AgentFloor, func(v string) { in.OnExpiryFallback = v })
	alertFlags(fs, &in.Reminders, &in.Escalation)
	reviewFlags(fs, reviewFlagsOf{notify: &in.Notify, reviews: &in.ReviewsRequired, consensus: &in.Consensus, quorum: &in.Quorum,
		veto: &in.Veto, excludeRequester: &in.ExcludeRequester, tiebreak: &in.Tiebreak}, false)
	fs.StringVar(&in.RequestedBy, "requested-by", "", "the e-mail address of the person who asked for the decision")
	fs.StringVar(&in.GoldVerdict, "gold-verdict", "", "make it a gold task whose known answer is this verdict: people decide it unaware, and it measures their accuracy")
	wait := fs.Bool("wait", false, "wait until the task is completed (or expired) and print it then; an expired task is printed and fails the command")
	timeout := fs.Duration("timeout", 10*time.Minute, "with --wait: how long to wait")
	if err := c.parse(fs, p, args); err != nil {
		return err
	}
	if strings.TrimSpace(in.Prompt) == "" {
		return c.usage(p, "--prompt is required")
	}
	if len(in.AllowedVerdicts) == 0 {
		return c.usage(p, "at least one --verdict is required")
	}
	if *contextArg != "" {
		raw, err := readContext(*contextArg, p.stdin)
		if err != nil {
			return c.usage(p, "%v", err)
		}
		in.Context = raw
	}
	return callTask(c, p, func(cl *client.Client) (*client.Task, error) {
		task, err := cl.CreateTask(ctx, in)
		if err != nil || !*wait {
			return task, err
		}
		fmt.Fprintf(p.stderr, "arbiter %s: task %s is %s; waiting up to %s for its decision (Ctrl-C stops waiting; the task stays)\n",
			c.name, task.ID, task.Status, *timeout)
		waitCtx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		done, err := cl.WaitTask(waitCtx, task.ID, nil)
		switch {
		case err != nil && waitCtx.Err() != nil && ctx.Err() == nil:
			status := task.Status
			if done != nil {
				status = done.Status
			}
			return nil, fmt.Errorf("task %s is still %s after %s; `arbiter task get %s` reads it later", task.ID, status, *timeout, task.ID)
		case err != nil:
			return nil, err
		case done.Status == client.StatusExpired:
			return done, fmt.Errorf("task %s expired: its deadline passed before it was decided", task.ID)
		}
		return done, nil
	})
}

// onExpiryFlags declares --on-expiry, --agent-floor and
// --on-expiry-fallback, which task create and policy put share.
func onExpiryFlags(fs *flag.FlagSet, outcome *string, floor **float64, fallback func(string)) {
	fs.StringVar(outcome, "on-expiry", "", `what happens when the deadline passes and nobody decided: expire, verdict:<v> or agent_verdict (default: the task type's policy, or expire)`)
	fs.Func("agent-floor", "with --on-expiry agent_verdict: the least confidence at which the verifier's verdict is taken, 0 to 1", func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return errors.New("not a number")
		}
		*floor = &f
		return nil
	})
	fs.Func("on-expiry-fallback", "with --on-expiry agent_verdict: expire (default) or verdict:<v>, when the verifier's verdict falls short",
		func(v string) error { fallback(v); return nil })
}

// alertFlags declares --remind and --escalate, each repeatable: a
// reminder's wait, and a rung as wait=target.
func alertFlags(fs *flag.FlagSet, reminders *[]string, escalation *[]client.EscalationRung) {
	fs.Func("remind", `tell the people who can decide again after this wait for a person: 15m, 1h, or a share of the deadline such as 50% (repeatable; default: the task type's policy)`,
		func(v string) error { *reminders = append(*reminders, v); return nil })
	fs.Func("escalate", `an escalation rung, wait=target: 30m=role:admin or 2h=email:lead@example.com (repeatable; default: the task type's policy)`,
		func(v string) error {
			after, to, ok := strings.Cut(v, "=")
			if !ok {
				return errors.New("not wait=target, such as 30m=role:admin")
			}
			*escalation = append(*escalation, client.EscalationRung{After: after, To: to})
			return nil
		})
}

// reviewFlagsOf points at the notify and review requirement fields of a
// task create or a policy, which reviewFlags fills in.
type reviewFlagsOf struct {
	notify, veto        *[]string
	reviews, quorum     *int
	consensus, tiebreak *string
	excludeRequester    *bool
}

// reviewFlags adds the flags of a task's Slack channels and review
// requirement to fs, for a policy (the values a create that gives none
// takes) or for one task.
func reviewFlags(fs *flag.FlagSet, to reviewFlagsOf, policy bool) {
	notify, reviews, exclude := "where the task's question goes: slack:#channel or slack:C0123456; repeat for several (default: the task type's policy)",
		"how many distinct people vote on the task, 1 to 5 (default: the task type's policy, else 1)",
		"keep the person --requested-by names from voting"
	if policy {
		notify, reviews, exclude = "where a task's question goes when its create names none: slack:#channel or slack:C0123456; repeat for several",
			"how many distinct people vote on a task of the type, 1 to 5, when its create gives no review fields",
			"keep the person a create names in requested_by from voting (creates must name one)"
	}
	fs.Func("notify", notify, func(v string) error { *to.notify = append(*to.notify, v); return nil })
	fs.IntVar(to.reviews, "reviews", 0, reviews)
	fs.StringVar(to.consensus, "consensus", "", "how the votes decide: unanimous (the default for several reviews) or quorum")
	fs.IntVar(to.quorum, "quorum", 0, "with --consensus quorum: how many votes must agree")
	fs.Func("veto", "a verdict any one vote of which decides the task at once; repeat for several",
		func(v string) error { *to.veto = append(*to.veto, v); return nil })
	fs.BoolVar(to.excludeRequester, "exclude-requester", false, exclude)
	fs.StringVar(to.tiebreak, "tiebreak", "", "role:admin: an owner or admin casts the deciding vote of a split task")
}

// runTaskGet runs `arbiter task get`.
func runTaskGet(ctx context.Context, c *command, p *process, args []string) error {
	fs := c.flagSet(p)
	if err := c.parse(fs, p, args); err != nil {
		return err
	}
	id := fs.Arg(0)
	return callTask(c, p, func(cl *client.Client) (*client.Task, error) { return cl.GetTask(ctx, id) })
}

// runTaskList runs `arbiter task list`: one page of the account's tasks as
// the API answers it, or with --all every task the filters select, one
// JSON object a line, read page by page.
func runTaskList(ctx context.Context, c *command, p *process, args []string) error {
	fs := c.flagSet(p)
	var opts client.ListOptions
	fs.StringVar(&opts.Status, "status", "", "only tasks in this status: pending, agent_running, human_needed, completed or expired")
	fs.StringVar(&opts.TaskType, "task-type", "", "only tasks with this task type")
	fs.StringVar(&opts.Source, "source", "", "only tasks with this source")
	fs.StringVar(&opts.Touchpoint, "touchpoint", "", "only tasks with this touchpoint")
	fs.StringVar(&opts.FinalTier, "final-tier", "", "only tasks decided by this tier: agent or human")
	rfc3339Flag(fs, "created-after", "only tasks created after this time", &opts.CreatedAfter)
	rfc3339Flag(fs, "created-before", "only tasks created before this time", &opts.CreatedBefore)
	fs.Func("limit", "tasks per page, 1 to 100 (server default 20)", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return errors.New("not a whole number from 1 to 100")
		}
		opts.Limit = n
		return nil
	})
	fs.StringVar(&opts.StartingAfter, "starting-after", "", "continue after this task: the last of the page before")
	all := fs.Bool("all", false, "print every task the filters select, one JSON object a line, reading page after page")
	if err := c.parse(fs, p, args); err != nil {
		return err
	}
	cl, err := taskClient(c, p)
	if err != nil {
		return err
	}
	if !*all {
		page, err := cl.ListTasks(ctx, opts)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		b, err := json.MarshalIndent(page, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.stdout, "%s\n", b)
		return err
	}
	enc := json.NewEncoder(p.stdout)
	for task, err := range cl.AllTasks(ctx, opts) {
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		if err := enc.Encode(task); err != nil {
			return err
		}
	}
	return nil
}

// rfc3339Flag defines a flag of fs that sets *t from an RFC 3339 time.
func rfc3339Flag(fs *flag.FlagSet, name, usage string, t *time.Time) {
	fs.Func(name, usage+" (RFC 3339, such as 2026-11-23T00:00:00Z)", func(v string) error {
		parsed, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return errors.New("not an RFC 3339 time")
		}
		*t = parsed
		return nil
	})
}

// runTaskCalibration runs `arbiter task calibration`: the account's
// calibration report as the API answers it.
func runTaskCalibration(ctx context.Context, c *command, p *process, args []string) error {
	fs := c.flagSet(p)
	var opts client.CalibrationOptions
	fs.StringVar(&opts.TaskType, "task-type", "", "only tasks with this task type")
	fs.StringVar(&opts.Source, "source", "", "only tasks with this source")
	fs.StringVar(&opts.Model, "model", "", "only answers of this verifier model")
	fs.StringVar(&opts.Version, "version", "", "only answers that carried this verifier version label")
	rfc3339Flag(fs, "created-after", "only tasks created after this time", &opts.CreatedAfter)
	rfc3339Flag(fs, "created-before", "only tasks created before this time", &opts.CreatedBefore)
	fs.Float64Var(&opts.TargetErrorRate, "target", 0, "the error rate to recommend a threshold for, between 0 and 1 (server default 0.02)")
	if err := c.parse(fs, p, args); err != nil {
		return err
	}
	cl, err := taskClient(c, p)
	if err != nil {
		return err
	}
	report, err := cl.Calibration(ctx, opts)
	if err != nil {
		return fmt.Errorf("%s: %w", c.name, err)
	}
	b, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(p.stdout, "%s\n", b)
	return err
}

// taskClient returns a client of the server the environment names, with
// its key and opts.
func taskClient(c *command, p *process, opts ...client.Option) (*client.Client, error) {
	key := p.getenv(envAPIKey)
	if key == "" {
		return nil, fmt.Errorf("%s: %s is not set; create a key with `arbiter admin create-key --email E`", c.name, envAPIKey)
	}
	return client.New(append([]client.Option{client.WithAPIKey(key), client.WithBaseURL(p.getenv(envBaseURL))}, opts...)...), nil
}

// callTask makes a task command's call with a client of the server the
// environment names and prints the task it returns as JSON, also when the
// call returns an error with it (a task that expired while --wait waited).
func callTask(c *command, p *process, call func(*client.Client) (*client.Task, error)) error {
	cl, err := taskClient(c, p)
	if err != nil {
		return err
	}
	task, callErr := call(cl)
	if task != nil {
		b, err := json.MarshalIndent(task, "", "  ")
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(p.stdout, "%s\n", b); err != nil {
			return err
		}
	}
	if callErr != nil {
		return fmt.Errorf("%s: %w", c.name, callErr)
	}
	return nil
}

// readContext returns the --context value as JSON: the argument itself, or
// the contents of the file named after an @ (@- is stdin).
func readContext(arg string, stdin io.Reader) (json.RawMessage, error) {
	raw, source := []byte(arg), "--context"
	if name, ok := strings.CutPrefix(arg, "@"); ok {
		var err error
		if name == "-" {
			if stdin == nil {
				return nil, errors.New("--context @-: there is no standard input")
			}
			raw, err = io.ReadAll(stdin)
		} else {
			raw, err = os.ReadFile(name)
		}
		if err != nil {
			return nil, fmt.Errorf("--context: %w", err)
		}
		source = name
	}
	if !json.Valid(raw) {
		return nil, fmt.Errorf("%s is not valid JSON", source)
	}
	return raw, nil
}
