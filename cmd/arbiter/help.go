package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/arbiterhq/arbiter/config"
)

// A command is one `arbiter` command, or a group of subcommands when run is
// nil. Its help is printed from here, from its flags and from the settings
// of its scopes, so it always says what the command reads.
type command struct {
	// name is what follows "arbiter": "serve", "admin create-key".
	name string
	// args is the rest of the usage line; empty means "[flags]".
	args string
	// positional, when set, names the one argument after the flags.
	positional string
	// summary says in one line what the command does.
	summary string
	// scopes are the scopes of the config.Settings the command reads.
	scopes []config.Scope
	// env are environment variables the command reads that are not
	// config.Settings.
	env []envVar
	// run runs the command with the arguments after its name.
	run func(ctx context.Context, c *command, p *process, args []string) error
	// exits, when set, has the help list the API commands' exit statuses.
	exits bool
}

// exitHelp is the exit statuses of the commands that call the API (see
// exitCode).
const exitHelp = `
Exit status:
  0  done
  1  any other failure: the server cannot be reached, the key is refused, a
     limit is reached (429), the task expired or --wait ran out of time
  2  usage: the command line is not valid, or the server refused the request
     as not valid (400)
  3  not found (404): no such task in the key's account
  4  conflict (409, 422): the idempotency key is in use, or was used for
     another task
  5  server error (5xx): the server or its store failed; try again later
`

// An envVar is an environment variable a command reads that is not a
// config.Setting: the task commands' client settings.
type envVar struct {
	name, help, def string
}

// tracingEnv are the OpenTelemetry variables serve and worker read
// (internal/telemetry); each has its _TRACES_ form too.
var tracingEnv = []envVar{
	{name: "OTEL_EXPORTER_OTLP_ENDPOINT", help: "export traces by OTLP over HTTP to this collector (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: the full URL); unset, no traces"},
	{name: "OTEL_TRACES_EXPORTER", help: "otlp turns traces on (to http://localhost:4318 unless an endpoint is set), none off; OTEL_SDK_DISABLED=true also turns them off"},
	{name: "OTEL_EXPORTER_OTLP_HEADERS", help: "key=value,… sent with each export; OTEL_EXPORTER_OTLP_TIMEOUT (ms), OTEL_EXPORTER_OTLP_COMPRESSION (gzip), OTEL_EXPORTER_OTLP_PROTOCOL (http/protobuf only)"},
	{name: "OTEL_SERVICE_NAME", help: "the service's name on traces; OTEL_RESOURCE_ATTRIBUTES adds key=value,…", def: "arbiter"},
	{name: "OTEL_TRACES_SAMPLER", help: "always_on, always_off, traceidratio or their parentbased_ forms; OTEL_TRACES_SAMPLER_ARG is the ratio", def: "parentbased_traceidratio, ratio 0.1"},
}

// process is what run receives from main: the environment and the streams.
type process struct {
	getenv         func(string) string
	stdin          io.Reader
	stdout, stderr io.Writer
}

// errHelp ends a command whose help was asked for; run returns nil for it.
var errHelp = errors.New("help")

var (
	storeScopes  = []config.Scope{config.ScopeStore}
	workerScopes = []config.Scope{config.ScopeStore, config.ScopeWorker}
	serveScopes  = []config.Scope{config.ScopeStore, config.ScopeWorker, config.ScopeHTTP}
)

// commands are every command, in the order help lists them.
var commands = []*command{
	{name: "serve", scopes: serveScopes, env: tracingEnv, run: runServe,
		summary: "serve the API, the dashboard and the reviewer site, and run the worker"},
	{name: "worker", scopes: workerScopes, env: tracingEnv, run: runServe,
		summary: "run only the worker: claim pending tasks and ask the verifier"},
	{name: "migrate", scopes: storeScopes, run: runMigrate,
		summary: "apply the database migrations: the deploy step before replicas start (serve and worker also do, unless told not to)"},
	{name: "admin",
		summary: "operator commands on the store: API keys, daily caps, stored secrets, receipt keys and audit exports"},
	{name: "admin create-key", args: "--email E [--name N]", scopes: storeScopes, run: runCreateKey,
		summary: "create an API key, and the account when absent; prints the key"},
	{name: "admin list-keys", args: "--email E", scopes: storeScopes, run: runListKeys,
		summary: "list an account's keys, one tab-separated line each"},
	{name: "admin revoke-key", args: "--id ID", scopes: storeScopes, run: runRevokeKey,
		summary: "revoke a key"},
	{name: "admin set-cap", args: "--email E --cap N|default", scopes: storeScopes, run: runSetCap,
		summary: "set an account's daily task cap"},
	{name: "admin reseal-secrets", scopes: storeScopes, run: runResealSecrets,
		summary: "seal every stored secret under the first secret key; prints how many changed"},
	{name: "admin rotate-receipt-key", scopes: storeScopes, run: runRotateReceiptKey,
		summary: "make a new key sign receipts and audit exports; the old ones stay published; prints the new key's id"},
	{name: "admin export-audit", args: "--email E [--since S] [--out FILE]", scopes: storeScopes, run: runExportAudit,
		summary: "write an account's audit export: decisions with their receipts and events, hash-chained, as JSON Lines"},
	{name: "audit",
		summary: "check audit exports offline"},
	{name: "audit verify", args: "[--jwks FILE] FILE", positional: "FILE", run: runAuditVerify,
		summary: "check an audit export's chain, receipts and signature; prints the first break and fails"},
	{name: "task",
		summary: "create and read tasks, and the calibration report, on a running server, through the API"},
	{name: "task create", exits: true, args: "--prompt P --verdict V [--verdict V…] [flags]", env: clientEnv, run: runTaskCreate,
		summary: "create a task through the API; prints it as JSON"},
	{name: "task get", exits: true, args: "ID", positional: "ID", env: clientEnv, run: runTaskGet,
		summary: "read a task through the API; prints it as JSON"},
	{name: "task list", exits: true, args: "[--status S] [--source S] [flags]", env: clientEnv, run: runTaskList,
		summary: "list the account's tasks through the API, newest first; prints a page, or with --all every task, as JSON"},
	{name: "task calibration", exits: true, args: "[--task-type T] [--target R] [flags]", env: clientEnv, run: runTaskCalibration,
		summary: "read the account's calibration report through the API: how often a person agrees with the verifier; prints it as JSON"},
	{name: "policy",
		summary: "read and change the account's policies per task type on a running server, through the API"},
	{name: "policy list", exits: true, env: clientEnv, run: runPolicyList,
		summary: "list the account's policies; prints them as JSON"},
	{name: "policy get", exits: true, args: "TASK_TYPE", positional: "TASK_TYPE", env: clientEnv, run: runPolicyGet,
		summary: "read the policy of a task type (default: the default policy); prints it as JSON"},
	{name: "policy put", exits: true, args: "[--threshold T] [--deadline D] [--audit-rate R] [--target-error-rate A] [--on-expiry O] [--notify N] [--reviews N] [flags] TASK_TYPE",
		positional: "TASK_TYPE", env: clientEnv, run: runPolicyPut,
		summary: "replace the policy of a task type with the flags' values; prints it as JSON"},
	{name: "policy delete", exits: true, args: "TASK_TYPE", positional: "TASK_TYPE", env: clientEnv, run: runPolicyDelete,
		summary: "delete the policy of a task type"},
	{name: "verifiers",
		summary: "the agent tier's verifiers file (ARBITER_VERIFIERS)"},
	{name: "verifiers check", args: "FILE", positional: "FILE", run: runVerifiersCheck,
		summary: "read a verifiers file as the server would at start, compile its rules, and list its verifiers and cascade; starts nothing"},
	{name: "verifiers backtest", args: "--email E --verifier NAME [--task-type T] [--since 30d] [--limit N] [flags]", scopes: workerScopes, run: runVerifiersBacktest,
		summary: "ask a verifier of the verifiers file, live or not, on the account's past tasks people labelled, and print its certificate, coverage, error and cost beside the current cascade's; records a backtest run, changes no task"},
	{name: "mcp", env: clientEnv, run: runMCP,
		summary: "serve the agents' tools (ask_verdict, get_task, list_tasks) over MCP on stdin and stdout, through the API"},
	{name: "gateway", args: "--upstream-cmd 'COMMAND' | --upstream-url URL [--policy FILE] [flags]", env: gatewayEnv, run: runGateway,
		summary: "serve an upstream MCP server's tools to an agent, holding the calls the policy asks about until a person approves them in Arbiter"},
	{name: "version", run: runVersion,
		summary: "print the version, the commit and the Go version"},
}

// lookup returns the command with the given name, or nil.
func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help" || arg == "help"
}

// dispatch runs the command that args name below group ("" for the top
// level).
func dispatch(ctx context.Context, p *process, group *command, args []string) error {
	prefix, usageLine, more := "arbiter", "arbiter COMMAND [flags]", "arbiter --help"
	if group != nil {
		prefix, usageLine, more = "arbiter "+group.name, "arbiter "+group.name+" COMMAND [flags]", "arbiter "+group.name+" --help"
	}
	if len(args) == 0 {
		var names []string
		for _, c := range commands {
			if name, ok := strings.CutPrefix(c.name, strings.TrimPrefix(prefix+" ", "arbiter ")); ok && !strings.Contains(name, " ") {
				names = append(names, name)
			}
		}
		fmt.Fprintf(p.stderr, "%s: give a command: %s\nUsage: %s\nRun `%s` for what they do.\n", prefix, strings.Join(names, ", "), usageLine, more)
		return errUsage
	}
	if isHelp(args[0]) {
		if args[0] == "help" && len(args) > 1 {
			return dispatch(ctx, p, group, append(args[1:], "--help"))
		}
		printGroupHelp(p.stdout, group)
		return nil
	}
	name := args[0]
	if group != nil {
		name = group.name + " " + args[0]
	}
	c := lookup(name)
	if c == nil {
		if strings.HasPrefix(args[0], "-") {
			fmt.Fprintf(p.stderr, "%s: unknown flag %s\n", prefix, args[0])
		} else {
			fmt.Fprintf(p.stderr, "%s: unknown command %q\n", prefix, args[0])
		}
		fmt.Fprintf(p.stderr, "Usage: %s\nRun `%s` for the commands.\n", usageLine, more)
		return errUsage
	}
	if c.run == nil {
		return dispatch(ctx, p, c, args[1:])
	}
	return c.run(ctx, c, p, args[1:])
}

// usageLine is the command's usage without "Usage: ".
func (c *command) usageLine() string {
	args := c.args
	if args == "" {
		args = "[flags]"
	}
	return "arbiter " + c.name + " " + args
}

// flagSet returns an empty flag set for c that prints nothing: parse
// prints its errors and c's usage.
func (c *command) flagSet(p *process) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// settingFlags defines a flag for every setting of c's scopes that has one
// and returns getenv with the flags given overriding the environment.
func (c *command) settingFlags(fs *flag.FlagSet, getenv func(string) string) func(string) string {
	given := map[string]string{}
	for _, s := range config.Settings {
		if s.Flag == "" || !slices.Contains(c.scopes, s.Scope) {
			continue
		}
		fs.Func(s.Flag, strings.TrimSpace(s.Help+" "+settingNote(s, false)), func(v string) error {
			if v != "" {
				if err := s.Set(&config.Config{}, v); err != nil {
					return err
				}
			}
			given[s.Env] = v
			return nil
		})
	}
	return func(name string) string {
		if v, ok := given[name]; ok {
			return v
		}
		return getenv(name)
	}
}

// parse parses args with fs. Asked for help, it prints c's help on stdout
// and returns errHelp; a bad flag or argument prints a short usage on
// stderr and returns errUsage.
func (c *command) parse(fs *flag.FlagSet, p *process, args []string) error {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		c.printHelp(p.stdout, fs)
		return errHelp
	case err != nil:
		fmt.Fprintf(p.stderr, "arbiter %s: %v\n", c.name, err)
	case c.positional == "" && fs.NArg() > 0:
		fmt.Fprintf(p.stderr, "arbiter %s: unexpected argument %q\n", c.name, fs.Arg(0))
	case c.positional != "" && fs.NArg() != 1:
		fmt.Fprintf(p.stderr, "arbiter %s: give one %s\n", c.name, c.positional)
	default:
		return nil
	}
	fmt.Fprintf(p.stderr, "Usage: %s\nRun `arbiter %s --help` for its flags and environment.\n", c.usageLine(), c.name)
	return errUsage
}

// usage prints why c's command line is not valid, as parse does, and
// returns errUsage.
func (c *command) usage(p *process, format string, args ...any) error {
	fmt.Fprintf(p.stderr, "arbiter %s: %s\n", c.name, fmt.Sprintf(format, args...))
	return errUsage
}

// printHelp prints c's help: usage, summary, flags and the environment
// variables it reads.
func (c *command) printHelp(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s\n\n%s.\n\nFlags:\n", c.usageLine(), sentence(c.summary))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fs.VisitAll(func(f *flag.Flag) {
		kind, usage := flag.UnquoteUsage(f)
		name := "--" + f.Name
		if kind != "" {
			name += " " + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		}
		switch f.DefValue {
		case "", "false", "0":
		default:
			if kind == "string" {
				usage += fmt.Sprintf(" (default %q)", f.DefValue)
			} else {
				usage += " (default " + f.DefValue + ")"
			}
		}
		fmt.Fprintf(tw, "  %s\t%s\n", name, usage)
	})
	fmt.Fprintf(tw, "  -h, --help\tshow this help\n")
	tw.Flush()

	heading := "\nEnvironment:\n"
	if len(c.env) > 0 {
		fmt.Fprint(w, heading)
		heading = ""
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, v := range c.env {
			note := ""
			if v.def != "" {
				note = " (default " + v.def + ")"
			}
			fmt.Fprintf(tw, "  %s\t%s%s\n", v.name, v.help, note)
		}
		tw.Flush()
	}
	if c.exits {
		fmt.Fprint(w, exitHelp)
	}
	for _, scope := range c.scopes {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		title := false
		for _, s := range config.Settings {
			if s.Scope != scope || s.Flag != "" {
				continue
			}
			if !title {
				fmt.Fprintf(w, "%s  %s:\n", heading, scope.Title())
				heading, title = "", true
			}
			fmt.Fprintf(tw, "    %s\t%s\n", s.Env, strings.TrimSpace(s.Help+" "+settingNote(s, true)))
		}
		tw.Flush()
	}
}

// settingNote is the parenthesis help puts after a setting's help: its
// variable (unless listed under it) and its default.
func settingNote(s config.Setting, listed bool) string {
	var parts []string
	if !listed {
		parts = append(parts, "env "+s.Env)
	}
	if s.Fallback != "" {
		parts = append(parts, "else "+s.Fallback)
	}
	if s.Default != "" {
		parts = append(parts, "default "+s.Default)
	}
	if len(parts) == 0 {
		return ""
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// printGroupHelp prints the commands of group, or every command for the
// top level (nil).
func printGroupHelp(w io.Writer, group *command) {
	prefix := ""
	if group == nil {
		fmt.Fprint(w, "Arbiter is a verification task service.\n\nUsage: arbiter COMMAND [flags]\n\nCommands:\n")
	} else {
		prefix = group.name + " "
		fmt.Fprintf(w, "Usage: arbiter %sCOMMAND [flags]\n\n%s.\n\nCommands:\n", prefix, sentence(group.summary))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range commands {
		if c.run != nil && strings.HasPrefix(c.name, prefix) {
			fmt.Fprintf(tw, "  %s\t%s\n", strings.TrimPrefix(c.name, prefix), c.summary)
		}
	}
	tw.Flush()
	if group == nil {
		fmt.Fprint(w, "\nFlags:\n  -h, --help  show this help\n  --version   print the version\n")
	}
	fmt.Fprintf(w, "\nRun `arbiter %sCOMMAND --help` for a command's flags and the environment variables it reads.\n", prefix)
}

// sentence capitalizes the first letter of s.
func sentence(s string) string {
	r := []rune(s)
	if len(r) > 0 {
		r[0] = unicode.ToUpper(r[0])
	}
	return string(r)
}

// runVersion runs `arbiter version`.
func runVersion(_ context.Context, c *command, p *process, args []string) error {
	if err := c.parse(c.flagSet(p), p, args); err != nil {
		return err
	}
	info, _ := debug.ReadBuildInfo()
	_, err := fmt.Fprintln(p.stdout, versionLine(info, buildStamp{stampedVersion, stampedCommit}))
	return err
}

// buildStamp is what a release build stamps into the binary with
// -ldflags -X (make dist, scripts/dist): its version and the commit it was
// built from. Both are empty in a build that was not stamped.
type buildStamp struct{ version, commit string }

// stampedVersion and stampedCommit are set by make dist
// (-X main.stampedVersion=… -X main.stampedCommit=…).
var stampedVersion, stampedCommit string

// versionLine describes the build: the version and commit stamped into it,
// or else the module version, the VCS revision, its time and whether the
// tree was modified when they are known; then the Go version and platform.
func versionLine(info *debug.BuildInfo, stamped buildStamp) string {
	version, goVersion := "(devel)", runtime.Version()
	var vcs []string
	if info != nil {
		if info.Main.Version != "" {
			version = info.Main.Version
		}
		if info.GoVersion != "" {
			goVersion = info.GoVersion
		}
		settings := map[string]string{}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
		if rev := settings["vcs.revision"]; rev != "" {
			vcs = append(vcs, "revision "+rev)
		}
		if t := settings["vcs.time"]; t != "" {
			vcs = append(vcs, t)
		}
		if settings["vcs.modified"] == "true" {
			vcs = append(vcs, "modified")
		}
	}
	if stamped.version != "" {
		version = stamped.version
	}
	if stamped.commit != "" {
		vcs = []string{"commit " + stamped.commit}
	}
	line := "arbiter " + version
	if len(vcs) > 0 {
		line += " (" + strings.Join(vcs, ", ") + ")"
	}
	return line + " " + goVersion + " " + runtime.GOOS + "/" + runtime.GOARCH
}
