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

const taskUsage = `Usage:
  arbiter task create --prompt P --verdict V [--verdict V…] [--context JSON | --context @FILE]
                      [--threshold X] [--task-type T] [--touchpoint T] [--source S]
                      [--wait] [--timeout 10m]
  arbiter task get ID

The key comes from SVC_API_KEY and the server from SVC_BASE_URL (default
http://localhost:8080). The task is printed as JSON on stdout.
`

// runTask runs a task command: an API client of a running server, built on
// the client package.
func runTask(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, taskUsage)
		return errUsage
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("task "+sub, flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), taskUsage) }

	var call func(*client.Client) (*client.Task, error)
	switch sub {
	case "create":
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
		wait := fs.Bool("wait", false, "wait until the task is completed and print it then")
		timeout := fs.Duration("timeout", 10*time.Minute, "with --wait: how long to wait")
		if err := parseFlags(fs, args, stderr); err != nil {
			return err
		}
		if strings.TrimSpace(in.Prompt) == "" {
			return errors.New("task create: --prompt is required")
		}
		if len(in.AllowedVerdicts) == 0 {
			return errors.New("task create: at least one --verdict is required")
		}
		if *contextArg != "" {
			raw, err := readContext(*contextArg, stdin)
			if err != nil {
				return fmt.Errorf("task create: %w", err)
			}
			in.Context = raw
		}
		call = func(c *client.Client) (*client.Task, error) {
			task, err := c.CreateTask(ctx, in)
			if err != nil || !*wait {
				return task, err
			}
			waitCtx, cancel := context.WithTimeout(ctx, *timeout)
			defer cancel()
			done, err := c.WaitTask(waitCtx, task.ID, nil)
			if err != nil && waitCtx.Err() != nil && ctx.Err() == nil {
				status := task.Status
				if done != nil {
					status = done.Status
				}
				return nil, fmt.Errorf("task %s is still %s after %s; `arbiter task get %s` reads it later", task.ID, status, *timeout, task.ID)
			}
			return done, err
		}
	case "get":
		fs.SetOutput(stderr)
		if err := fs.Parse(args); err != nil {
			return errUsage
		}
		if fs.NArg() != 1 {
			fmt.Fprint(stderr, "arbiter task get: give one task id\n\n"+taskUsage)
			return errUsage
		}
		id := fs.Arg(0)
		call = func(c *client.Client) (*client.Task, error) { return c.GetTask(ctx, id) }
	case "help", "-h", "--help":
		fmt.Fprint(stdout, taskUsage)
		return nil
	default:
		fmt.Fprintf(stderr, "arbiter task: unknown command %q\n\n%s", sub, taskUsage)
		return errUsage
	}

	key := getenv("SVC_API_KEY")
	if key == "" {
		return fmt.Errorf("task %s: SVC_API_KEY is not set; create a key with `arbiter admin create-key --email E`", sub)
	}
	c := client.New(client.WithAPIKey(key), client.WithBaseURL(getenv("SVC_BASE_URL")))
	task, err := call(c)
	if err != nil {
		return fmt.Errorf("task %s: %w", sub, err)
	}
	b, err := json.MarshalIndent(task, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", b)
	return err
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
