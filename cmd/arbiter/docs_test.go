package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"io/fs"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/testutil"
	"github.com/arbiterhq/arbiter/slack"
)

// The manual's own tests: README.md is the front door and docs/ the
// manual by topic. What a reader copies from them must work.

// manualFiles returns README.md and every docs/*.md, relative to the
// repository's root, with their text.
func manualFiles(t *testing.T) map[string]string {
	t.Helper()
	names, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	names = append(names, "../../README.md")
	files := make(map[string]string, len(names))
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimPrefix(name, "../../")] = string(b)
	}
	if len(files) < 10 {
		t.Fatalf("found %d manual files, want README.md and docs/", len(files))
	}
	return files
}

// curlExample is one curl command of the manual or of a page that shows
// one.
type curlExample struct {
	where   string   // file:line
	args    []string // curl's arguments, as the shell passes them
	method  string
	url     string
	headers http.Header
	body    *string // -d or --json; nil without one
	json    bool    // sent with --json
	// promised is the status a comment after the command promises
	// ("# 404 …", "# -> 429 …"); 0 promises success, a 2xx.
	promised int
}

// curlExamples returns the curl commands of the manual's ```sh blocks,
// read as a shell reads them (see shellCommands), the variables of vars
// replaced by their values.
func curlExamples(t *testing.T, file, text string, vars map[string]string) []curlExample {
	t.Helper()
	var examples []curlExample
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```sh" {
			continue
		}
		start := i + 1
		var block []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			block = append(block, lines[i])
		}
		examples = append(examples, curlCommands(t, file, start, strings.Join(block, "\n"), vars)...)
	}
	return examples
}

// curlCommands returns the curl commands of script, which starts at line
// start of file.
func curlCommands(t *testing.T, file string, start int, script string, vars map[string]string) []curlExample {
	t.Helper()
	var examples []curlExample
	for _, cmd := range shellCommands(script, vars) {
		if len(cmd.words) == 0 || cmd.words[0] != "curl" {
			continue
		}
		where := file + ":" + strconv.Itoa(start+cmd.line)
		ex, err := parseCurl(cmd.words[1:])
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		ex.where = where
		if m := promisedStatus.FindStringSubmatch(cmd.comment); m != nil {
			ex.promised, _ = strconv.Atoi(m[1])
		}
		examples = append(examples, ex)
	}
	return examples
}

// promisedStatus reads the status a comment after a command promises.
var promisedStatus = regexp.MustCompile(`^#\s*(?:->|→)?\s*([1-5][0-9][0-9])\b`)

// shellCommand is one simple command: its words, its line in the block
// (from 1), and the comment that ends its last line or, alone, the line
// after it.
type shellCommand struct {
	words   []string
	line    int
	comment string
}

// shellCommands splits a shell script into simple commands, with the
// quoting rules the manual's examples use: quotes, backslash
// continuations, comments, pipes, and $NAME (or ${NAME}) of vars replaced
// by its value outside single quotes. A command substitution $(…) is a
// command of its own; what follows a pipe is not a command the manual's
// tests read.
func shellCommands(script string, vars map[string]string) []shellCommand {
	var cmds []shellCommand
	var words []string
	var word strings.Builder
	inWord := false
	line, cmdLine := 1, 1
	lastLine := 0        // the line the last command kept ended on
	skip := false        // after a pipe: not a command of its own
	comment := ""        // the comment that ends the current command's line
	var outer [][]string // the words of the commands around a $(…)
	endWord := func() {
		if inWord {
			words = append(words, word.String())
			word.Reset()
			inWord = false
		}
	}
	endCommand := func() {
		endWord()
		if len(words) > 0 && !skip {
			cmds = append(cmds, shellCommand{words: words, line: cmdLine, comment: comment})
			lastLine = line
		}
		words, skip, comment = nil, false, ""
	}
	variable := func(i int) (value string, n int) {
		name := script[i+1:]
		braced := strings.HasPrefix(name, "{")
		if braced {
			name = name[1:]
		}
		end := strings.IndexFunc(name, func(r rune) bool { return r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		if end < 0 {
			end = len(name)
		}
		value, ok := vars[name[:end]]
		switch {
		case !ok || end == 0:
			return "", 0
		case braced && strings.HasPrefix(name[end:], "}"):
			return value, end + 3
		case braced:
			return "", 0
		}
		return value, end + 1
	}
	for i := 0; i < len(script); i++ {
		c := script[i]
		switch {
		case c == '\\' && i+1 < len(script) && script[i+1] == '\n':
			i++
			line++
		case c == '\n' || c == ';' || c == '&':
			endCommand()
			if c == '\n' {
				line++
			}
			cmdLine = line
		case c == '|':
			endCommand()
			skip = true
		case c == ' ' || c == '\t':
			endWord()
		case c == '#' && !inWord:
			end := strings.IndexByte(script[i:], '\n')
			if end < 0 {
				end = len(script) - i
			}
			text := script[i : i+end]
			if len(words) > 0 {
				comment = text
			} else if lastLine == line-1 && len(cmds) > 0 && cmds[len(cmds)-1].comment == "" {
				cmds[len(cmds)-1].comment = text
			}
			i += end - 1
		case c == '\'':
			inWord = true
			for i++; i < len(script) && script[i] != '\''; i++ {
				if script[i] == '\n' {
					line++
				}
				word.WriteByte(script[i])
			}
		case c == '"':
			inWord = true
			for i++; i < len(script) && script[i] != '"'; i++ {
				if script[i] == '$' {
					if value, n := variable(i); n > 0 {
						word.WriteString(value)
						i += n - 1
						continue
					}
				}
				if script[i] == '\n' {
					line++
				}
				word.WriteByte(script[i])
			}
		case c == '$' && i+1 < len(script) && script[i+1] == '(':
			// The command around it is the substitution's caller.
			i++
			endWord()
			outer = append(outer, words)
			words, cmdLine = nil, line
		case c == ')' && len(outer) > 0:
			endCommand()
			words, skip = outer[len(outer)-1], true
			outer = outer[:len(outer)-1]
			inWord = true
		case c == '$':
			if value, n := variable(i); n > 0 {
				inWord = true
				word.WriteString(value)
				i += n - 1
				continue
			}
			inWord = true
			word.WriteByte(c)
		default:
			inWord = true
			word.WriteByte(c)
		}
	}
	endCommand()
	return cmds
}

// parseCurl reads the curl options the manual uses.
func parseCurl(args []string) (curlExample, error) {
	ex := curlExample{args: args, headers: http.Header{}}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		next := func() (string, error) {
			if i+1 >= len(args) {
				return "", fmt.Errorf("curl %s takes a value", arg)
			}
			i++
			return args[i], nil
		}
		var err error
		switch {
		case arg == "-s" || arg == "-sS" || arg == "-i":
		case arg == "-X":
			ex.method, err = next()
		case arg == "-H":
			var h string
			if h, err = next(); err == nil {
				name, value, ok := strings.Cut(h, ":")
				if !ok {
					return ex, fmt.Errorf("curl -H %q is not a header", h)
				}
				ex.headers.Add(strings.TrimSpace(name), strings.TrimSpace(value))
			}
		case arg == "-d" || arg == "--data" || arg == "--data-raw" || arg == "--json":
			var body string
			if body, err = next(); err == nil {
				ex.body = &body
				ex.json = ex.json || arg == "--json"
			}
		case strings.HasPrefix(arg, "http://") || strings.HasPrefix(arg, "https://"):
			ex.url = arg
		default:
			return ex, fmt.Errorf("curl option %q is not one the manual's test reads", arg)
		}
		if err != nil {
			return ex, err
		}
	}
	if ex.url == "" {
		return ex, fmt.Errorf("curl without a URL")
	}
	if ex.method == "" {
		ex.method = "GET"
		if ex.body != nil {
			ex.method = "POST"
		}
	}
	return ex, nil
}

// checkSendsJSON fails the test when ex sends a body that is not JSON, or
// without saying it is: curl -d alone sends
// application/x-www-form-urlencoded, which the API refuses with 415.
func checkSendsJSON(t *testing.T, ex curlExample) {
	t.Helper()
	if ex.body == nil {
		return
	}
	if !ex.json && ex.headers.Get("Content-Type") != "application/json" {
		t.Errorf("%s: curl sends a body without -H 'Content-Type: application/json'", ex.where)
	}
	if !json.Valid([]byte(*ex.body)) {
		t.Errorf("%s: curl's body is not JSON: %s", ex.where, *ex.body)
	}
}

// TestManual_CurlExamplesSendJSON keeps every curl of the manual
// copy-paste correct: one that sends a body says it is JSON and the body
// is JSON.
func TestManual_CurlExamplesSendJSON(t *testing.T) {
	t.Parallel()
	found := 0
	for file, text := range manualFiles(t) {
		for _, ex := range curlExamples(t, file, text, map[string]string{"KEY": "svc_live_0"}) {
			if ex.body != nil {
				found++
				checkSendsJSON(t, ex)
			}
		}
	}
	if found < 8 {
		t.Errorf("found %d curl examples with a body, want the manual's (at least 8)", found)
	}
}

// TestShellCommands reads the shell the manual's examples are written in.
func TestShellCommands(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"KEY": "svc_live_1", "SVC_API_KEY": "svc_live_2"}
	for _, tc := range []struct {
		script string
		want   []shellCommand
	}{
		{"curl -s \"http://h/a\" -H \"Authorization: Bearer $KEY\" \\\n  -d '{\"a\": \"$KEY\"}'",
			[]shellCommand{{words: []string{"curl", "-s", "http://h/a", "-H", "Authorization: Bearer svc_live_1", "-d", `{"a": "$KEY"}`}, line: 1}}},
		{"curl -H \"X: ${SVC_API_KEY}\" http://h/$SVC_API_KEY/$OTHER # 404 unknown\n",
			[]shellCommand{{words: []string{"curl", "-H", "X: svc_live_2", "http://h/svc_live_2/$OTHER"}, line: 1, comment: "# 404 unknown"}}},
		{"curl http://h/a\n# -> 429 past the limit\n\n# not this one\ncurl http://h/b | grep x",
			[]shellCommand{{words: []string{"curl", "http://h/a"}, line: 1, comment: "# -> 429 past the limit"},
				{words: []string{"curl", "http://h/b"}, line: 5}}},
		{"while :; do\n  task=$(curl -s \"http://h/t?wait=60\")\ndone",
			[]shellCommand{{words: []string{"while", ":"}, line: 1}, {words: []string{"do"}, line: 1},
				{words: []string{"curl", "-s", "http://h/t?wait=60"}, line: 2}, {words: []string{"done"}, line: 3}}},
	} {
		got := shellCommands(tc.script, vars)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("shellCommands(%q)\n got %+v\nwant %+v", tc.script, got, tc.want)
		}
	}
}

// examplePlaceholder matches the ids and ellipses that stand for a task id
// the reader has: the test puts the id of a task of its own there.
var examplePlaceholder = regexp.MustCompile(`tsk_(?:[0-9a-f]{16}|…)`)

// viewPages are the pages that show a curl command, by the view that
// renders it, and the path the test reads it from once signed in.
var viewPages = map[string]string{
	"views/dashboard/home.templ": "/",
}

// TestManual_CurlExamplesRun runs every curl command of README.md, of
// docs/*.md and of the pages that show one with curl itself against a
// real `arbiter serve` on SQLite, as `make run` serves, with a key made as
// the README's first task makes it (the metrics on their own listener).
// A task id the text leaves to the reader is one of the key's account's,
// decided. Each must answer 2xx, or the status a comment after it
// promises. The README's first task is one of them.
func TestManual_CurlExamplesRun(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("the manual's examples run with curl, which is not installed (.ci/run installs it)")
	}
	rules := filepath.Join(t.TempDir(), "rules.txt")
	if err := os.WriteFile(rules, []byte(`approve 0.99 task.source == "docs-test"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := env(map[string]string{
		"ARBITER_DATABASE_URL": dbtest.URL(t, "sqlite"),
		"ARBITER_METRICS_ADDR": "127.0.0.1:0",
		"ARBITER_AGENT":        "rules", "ARBITER_AGENT_RULES": rules,
	})
	base, logs := serveWithLogs(t, getenv)
	metrics := regexp.MustCompile(`msg="metrics listening" addr=(\S+)`).FindStringSubmatch(logs.String())
	if metrics == nil {
		t.Fatalf("the metrics' address is not in the log:\n%s", logs.String())
	}
	key := strings.TrimSpace(runOK(t, getenv, "admin", "create-key", "--email", "you@example.com"))
	_, decided := testutil.APICall(t, "POST", base+"/v1/tasks", key,
		`{"prompt": "Stand in for the reader's task?", "allowed_verdicts": ["approve", "reject"], "source": "docs-test"}`)
	taskID, _ := decided["id"].(string)
	waitStatus(t, base, key, taskID, "completed")
	origins := strings.NewReplacer("http://localhost:8080", base, "http://127.0.0.1:9464", "http://"+metrics[1])

	var examples []curlExample
	files := manualFiles(t)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		examples = append(examples, curlExamples(t, name, files[name], map[string]string{"KEY": key})...)
	}
	shown := pageCurlExamples(t, base, logs, map[string]string{"SVC_API_KEY": key})
	if len(shown) == 0 {
		t.Error("the overview shows no curl to run")
	}
	examples = append(examples, shown...)

	ran, firstTask := 0, false
	for _, ex := range examples {
		checkSendsJSON(t, ex)
		url := origins.Replace(examplePlaceholder.ReplaceAllLiteralString(ex.url, taskID))
		if !strings.HasPrefix(url, base+"/") && !strings.HasPrefix(url, "http://"+metrics[1]+"/") {
			t.Errorf("%s: curl %s is on an origin the test does not serve", ex.where, ex.url)
			continue
		}
		status, answer := runCurl(t, ex, url)
		ran++
		if ex.promised != 0 && status != ex.promised || ex.promised == 0 && status/100 != 2 {
			t.Errorf("%s: %s %s answered %d, want %s: %s", ex.where, ex.method, ex.url, status,
				map[bool]string{true: strconv.Itoa(ex.promised), false: "2xx"}[ex.promised != 0], answer)
			continue
		}
		if strings.HasPrefix(ex.where, "README.md:") && ex.method == "POST" {
			var task struct{ ID, Status string }
			if err := json.Unmarshal(answer, &task); err != nil || !strings.HasPrefix(task.ID, "tsk_") || task.Status != "pending" {
				t.Errorf("%s: the first task answered %s, want a pending task", ex.where, answer)
			}
			firstTask = true
		}
	}
	if !firstTask {
		t.Error("README.md has no first task's curl to run")
	}
	t.Logf("ran %d curl examples", ran)
	if ran < 20 {
		t.Errorf("ran %d curl examples, want the manual's and the pages' (at least 20)", ran)
	}
}

// runCurl runs ex with curl, at url instead of its own, and returns the
// status and the body of the answer.
func runCurl(t *testing.T, ex curlExample, url string) (int, []byte) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "answer")
	args := make([]string, 0, len(ex.args)+8)
	for _, arg := range ex.args {
		if arg == ex.url {
			arg = url
		}
		args = append(args, arg)
	}
	args = append(args, "--max-time", "120", "-o", out, "-w", "%{http_code}")
	cmd := exec.Command("curl", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	code, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: curl %q: %v\n%s", ex.where, args, err, stderr.String())
	}
	status, err := strconv.Atoi(string(code))
	if err != nil {
		t.Fatalf("%s: curl wrote %q for the status", ex.where, code)
	}
	answer, _ := os.ReadFile(out)
	return status, answer
}

// pageCurlExamples signs in as the key's person, as the README's first
// task does, and returns the curl commands of the pages that show one
// (viewPages). A view that shows one and is not in viewPages fails the
// test.
func pageCurlExamples(t *testing.T, base string, logs *testutil.SyncBuffer, vars map[string]string) []curlExample {
	t.Helper()
	err := filepath.WalkDir("../../views", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".templ") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if name := strings.TrimPrefix(filepath.ToSlash(path), "../../"); strings.Contains(string(b), "curl ") && viewPages[name] == "" {
			t.Errorf("%s shows a curl command: add its page to viewPages", name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	res, err := c.PostForm(base+"/signin/email", url.Values{"email": {"you@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	link := loggedLink(t, logs)
	res, err = c.PostForm(base+"/signin/email/confirm", url.Values{"token": {strings.TrimPrefix(link, base+"/signin/email/confirm?token=")}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var examples []curlExample
	views := make([]string, 0, len(viewPages))
	for view := range viewPages {
		views = append(views, view)
	}
	sort.Strings(views)
	for _, view := range views {
		res, err := c.Get(base + viewPages[view])
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s answered %d, want the page of %s", viewPages[view], res.StatusCode, view)
		}
		for _, m := range codeBlock.FindAllStringSubmatch(string(page), -1) {
			if text := html.UnescapeString(m[1]); strings.HasPrefix(text, "curl ") {
				examples = append(examples, curlCommands(t, view+" (page "+viewPages[view]+")", 0, text, vars)...)
			}
		}
	}
	return examples
}

// codeBlock matches a page's preformatted code.
var codeBlock = regexp.MustCompile(`(?s)<pre[^>]*><code[^>]*>(.*?)</code></pre>`)

// markdownLink matches a Markdown link or image and its target.
var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestManual_LinksResolve keeps the manual's links between its files true
// as text moves: every relative link names a file that exists, and every
// #anchor a heading of the file it points into.
func TestManual_LinksResolve(t *testing.T) {
	t.Parallel()
	files := manualFiles(t)
	anchors := make(map[string]map[string]bool, len(files))
	for name, text := range files {
		anchors[name] = headingAnchors(text)
	}
	checked := 0
	for name, text := range files {
		for _, m := range markdownLink.FindAllStringSubmatch(stripCode(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			resolved := name
			if path != "" {
				resolved = filepath.ToSlash(filepath.Join(filepath.Dir(name), path))
				if _, err := os.Stat(filepath.Join("../..", resolved)); err != nil {
					t.Errorf("%s links to %s, which does not exist", name, target)
					continue
				}
			}
			checked++
			if anchor == "" {
				continue
			}
			known, ok := anchors[resolved]
			if !ok {
				b, err := os.ReadFile(filepath.Join("../..", resolved))
				if err != nil {
					t.Fatal(err)
				}
				known = headingAnchors(string(b))
				anchors[resolved] = known
			}
			if !known[anchor] {
				t.Errorf("%s links to %s, but %s has no heading #%s", name, target, resolved, anchor)
			}
		}
	}
	if checked < 50 {
		t.Errorf("checked %d links, want the manual's (at least 50)", checked)
	}
}

// stripCode removes fenced blocks and inline code spans from Markdown, so
// that only links of the text are read.
func stripCode(text string) string {
	var out strings.Builder
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out.WriteString(inlineCode.ReplaceAllString(line, ""))
			out.WriteByte('\n')
		}
	}
	return out.String()
}

var inlineCode = regexp.MustCompile("`[^`]*`")

// headingAnchors returns the anchors GitHub gives a Markdown file's
// headings: lower case, punctuation but hyphens and underscores dropped,
// spaces made hyphens, a repeat suffixed -1, -2, ….
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var slug strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				slug.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				slug.WriteRune(r)
			}
		}
		anchor := slug.String()
		for n := 1; anchors[anchor]; n++ {
			anchor = slug.String() + "-" + strconv.Itoa(n)
		}
		anchors[anchor] = true
	}
	return anchors
}

// TestREADME_ListsEveryCommand keeps the README's table of commands in
// step with the binary's: every command that runs is in a row of it.
func TestREADME_ListsEveryCommand(t *testing.T) {
	t.Parallel()
	readme := manualFiles(t)["README.md"]
	_, section, _ := strings.Cut(readme, "\n## Commands\n")
	section, _, _ = strings.Cut(section, "\n## ")
	table := markdownTables(section)
	if len(table) != 1 {
		t.Fatalf("the README's Commands section holds %d tables, want 1", len(table))
	}
	for _, c := range commands {
		if c.run == nil {
			continue
		}
		words := strings.Fields(c.name)
		found := false
		for _, row := range table[0] {
			cells := strings.Split(row, "|")
			if len(cells) < 2 {
				continue
			}
			first := cells[1]
			if strings.Contains(first, "`arbiter "+c.name) ||
				(len(words) == 2 && strings.Contains(first, "`arbiter "+words[0]+" ") && strings.Contains(first, "`"+words[1]+"`")) {
				found = true
			}
		}
		if !found {
			t.Errorf("the README's Commands table has no row for arbiter %s", c.name)
		}
	}
}

// TestMakeRun_SaysWhatItDoes: `make run` tells a newcomer what it is doing
// before the first build's silent minutes, and before it serves.
func TestMakeRun_SaysWhatItDoes(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on PATH")
	}
	cmd := exec.Command("make", "-n", "--no-print-directory", "run")
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n run: %v\n%s", err, out)
	}
	plan := string(out)
	building, build := strings.Index(plan, "make run: building bin/arbiter"), strings.Index(plan, "go build -o bin/arbiter")
	starting, serve := strings.Index(plan, "make run: starting bin/arbiter serve"), strings.Index(plan, "./bin/arbiter serve")
	if building < 0 || build < 0 || building > build || starting < 0 || serve < 0 || starting > serve || build > starting {
		t.Errorf("make run does not say it builds, then that it serves, before doing each:\n%s", plan)
	}
}

// TestSlackDoc_TheManifestIsThePages: docs/slack.md shows the manifest the
// Slack settings page offers (slack.Manifest), for the example address, so
// the two never drift apart.
func TestSlackDoc_TheManifestIsThePages(t *testing.T) {
	t.Parallel()
	doc := manualFiles(t)["docs/slack.md"]
	_, block, ok := strings.Cut(doc, "```yaml\n")
	block, _, _ = strings.Cut(block, "```")
	if want := slack.Manifest("https://arbiter.example.com/integrations/slack/interactions"); !ok || block != want {
		t.Errorf("docs/slack.md's manifest:\n%s\nthe page's:\n%s", block, want)
	}
}
