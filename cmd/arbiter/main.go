// Command arbiter is the whole service in one binary: the HTTP server, the
// worker, migrations and the operator's admin commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/arbiterhq/arbiter/client"
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
		os.Exit(exitCode(err))
	}
}

// errUsage reports a command line that could not be parsed; why has
// already been printed.
var errUsage = errors.New("usage")

// Exit statuses: what a script can tell apart without reading stderr
// (exitHelp in help.go says them in --help).
const (
	exitFailure  = 1 // any other failure
	exitUsage    = 2 // the command line, or the request it makes, is not valid
	exitNotFound = 3 // the server has no such object (404)
	exitConflict = 4 // the server refused the change as conflicting (409, 422)
	exitServer   = 5 // the server failed (5xx)
)

// exitCode returns the exit status of a command that failed with err.
func exitCode(err error) int {
	if errors.Is(err, errUsage) {
		return exitUsage
	}
	switch status := client.StatusCode(err); {
	case status == http.StatusBadRequest:
		return exitUsage
	case status == http.StatusNotFound:
		return exitNotFound
	case status == http.StatusConflict || status == http.StatusUnprocessableEntity:
		return exitConflict
	case status >= 500:
		return exitServer
	}
	return exitFailure
}

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
