// Command arbiter is the whole service in one binary: the HTTP server, the
// worker, migrations and the operator's admin commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// gcPercent is the garbage collector's target when GOGC is not set. The
// live heap is a few megabytes, so Go's default of 100 collects every few
// megabytes of requests; 400 spends far less CPU on collection for tens of
// megabytes more memory (docs/benchmarks.md).
const gcPercent = 400

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, "arbiter:", err)
		}
		os.Exit(1)
	}
}

// errUsage reports a command line that could not be parsed; the flag
// package has already printed why.
var errUsage = errors.New("usage")

const usage = `Arbiter is a verification task service.

Usage:
  arbiter serve [--addr ADDR] [--worker=false]   serve the API (and run the worker)
  arbiter worker                                 run only the worker
  arbiter migrate                                apply database migrations
  arbiter admin create-key --email E [--name N]  create an API key; prints it
  arbiter admin list-keys --email E              list an account's keys
  arbiter admin revoke-key --id ID               revoke a key
  arbiter admin set-cap --email E --cap N        set an account's daily task cap
  arbiter task create --prompt P --verdict V…    create a task through the API; prints it
        [--context JSON|@FILE] [--threshold X] [--wait] …
  arbiter task get ID                            read a task through the API; prints it

Every command reads its settings from the environment (see README.md);
ARBITER_DATABASE_URL selects the store.
The task commands call a running server: SVC_BASE_URL (default
http://localhost:8080), with the key in SVC_API_KEY.
`

// run is the whole program; main only supplies the process's environment.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "serve":
		return runServe(ctx, args, getenv, stderr, true)
	case "worker":
		return runServe(ctx, args, getenv, stderr, false)
	case "migrate":
		return runMigrate(ctx, args, getenv, stderr)
	case "admin":
		return runAdmin(ctx, args, getenv, stdout, stderr)
	case "task":
		return runTask(ctx, args, getenv, stdin, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprintf(stderr, "arbiter: unknown command %q\n\n%s", cmd, usage)
	return errUsage
}

// parseFlags parses args with fs, sending messages to stderr. Stray
// positional arguments are an error.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errUsage
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "arbiter %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return errUsage
	}
	return nil
}
