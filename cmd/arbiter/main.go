// Command arbiter is the whole service in one binary: the HTTP server, the
// worker, migrations and the operator's admin commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

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

// errUsage reports a command line that could not be parsed; why has
// already been printed.
var errUsage = errors.New("usage")

// run is the whole program; main only supplies the process's environment.
// Help, asked for, is printed on stdout and is not an error.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	p := &process{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		args = append([]string{"version"}, args[1:]...)
	}
	err := dispatch(ctx, p, nil, args)
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}
