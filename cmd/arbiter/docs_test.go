package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/arbiterhq/arbiter/db/dbtest"
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

// curlExample is one curl command of a shell block of the manual.
type curlExample struct {
	where   string // file:line
	method  string
	url     string
	headers http.Header
	body    *string // -d or --json; nil without one
	json    bool    // sent with --json
}

// curlExamples returns the curl commands of the manual's ```sh blocks,
// read as a shell reads them: quotes, backslash continuations, comments,
// $KEY inside double quotes replaced by key. Commands inside $(…) or after
// a pipe are not curl commands of their own and are left out.
func curlExamples(t *testing.T, file, text, key string) []curlExample {
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
		for _, cmd := range shellCommands(strings.Join(block, "\n"), key) {
			if len(cmd.words) == 0 || cmd.words[0] != "curl" {
				continue
			}
			ex, err := parseCurl(cmd.words[1:])
			if err != nil {
				t.Errorf("%s:%d: %v", file, start+cmd.line, err)
				continue
			}
			ex.where = file + ":" + strconv.Itoa(start+cmd.line)
			examples = append(examples, ex)
		}
	}
	return examples
}

// shellCommand is one simple command: its words and its line in the block
// (from 1).
type shellCommand struct {
	words []string
	line  int
}

// shellCommands splits a shell script into simple commands, with the
// quoting rules the manual's examples use.
func shellCommands(script, key string) []shellCommand {
	var cmds []shellCommand
	var words []string
	var word strings.Builder
	inWord := false
	line, cmdLine := 1, 1
	skip := false // inside $(…) or after a pipe: not a command of its own
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
			cmds = append(cmds, shellCommand{words: words, line: cmdLine})
		}
		words, skip = nil, false
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
			for i < len(script) && script[i] != '\n' {
				i++
			}
			i--
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
				if strings.HasPrefix(script[i:], "$KEY") {
					word.WriteString(key)
					i += len("$KEY") - 1
					continue
				}
				word.WriteByte(script[i])
			}
		case c == '$' && i+1 < len(script) && script[i+1] == '(':
			skip = true
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
	ex := curlExample{headers: http.Header{}}
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

// TestManual_CurlExamplesSendJSON keeps every curl of the manual
// copy-paste correct: one that sends a body says it is JSON (curl -d alone
// sends application/x-www-form-urlencoded, which the API refuses with 415)
// and the body is JSON.
func TestManual_CurlExamplesSendJSON(t *testing.T) {
	t.Parallel()
	found := 0
	for file, text := range manualFiles(t) {
		for _, ex := range curlExamples(t, file, text, "svc_live_0") {
			if ex.body == nil {
				continue
			}
			found++
			if !ex.json && ex.headers.Get("Content-Type") != "application/json" {
				t.Errorf("%s: curl sends a body without -H 'Content-Type: application/json'", ex.where)
			}
			if !json.Valid([]byte(*ex.body)) {
				t.Errorf("%s: curl's body is not JSON: %s", ex.where, *ex.body)
			}
		}
	}
	if found < 8 {
		t.Errorf("found %d curl examples with a body, want the manual's (at least 8)", found)
	}
}

// examplePlaceholder matches the ids and ellipses that stand for a value
// the reader has: such an example cannot run as written.
var examplePlaceholder = regexp.MustCompile(`tsk_[0-9a-f]{16}|…`)

// TestManual_CurlExamplesRun runs the manual's curl examples against a
// real `arbiter serve` on SQLite, as `make run` serves, with a key made as
// the README's first task makes it: every one that names no placeholder
// answers 2xx. The README's first task is one of them.
func TestManual_CurlExamplesRun(t *testing.T) {
	t.Parallel()
	getenv := env(map[string]string{"ARBITER_DATABASE_URL": dbtest.URL(t, "sqlite")})
	base := serve(t, getenv)
	key := strings.TrimSpace(runOK(t, getenv, "admin", "create-key", "--email", "you@example.com"))
	files := manualFiles(t)
	ran, firstTask := 0, false
	for _, file := range []string{"README.md", "docs/api.md", "docs/policies.md", "docs/consensus.md", "docs/reviewer-site.md", "docs/calibration.md"} {
		for _, ex := range curlExamples(t, file, files[file], key) {
			if !strings.HasPrefix(ex.url, "http://localhost:8080/") || examplePlaceholder.MatchString(ex.url) {
				continue
			}
			var body io.Reader
			if ex.body != nil {
				body = strings.NewReader(*ex.body)
			}
			req, err := http.NewRequest(ex.method, base+strings.TrimPrefix(ex.url, "http://localhost:8080"), body)
			if err != nil {
				t.Fatalf("%s: %v", ex.where, err)
			}
			req.Header = ex.headers
			if ex.json {
				req.Header.Set("Content-Type", "application/json")
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", ex.where, err)
			}
			answer, _ := io.ReadAll(res.Body)
			res.Body.Close()
			ran++
			if res.StatusCode/100 != 2 {
				t.Errorf("%s: %s %s answered %d %s", ex.where, ex.method, ex.url, res.StatusCode, answer)
				continue
			}
			if file == "README.md" && ex.method == "POST" {
				var task struct{ ID, Status string }
				if err := json.Unmarshal(answer, &task); err != nil || !strings.HasPrefix(task.ID, "tsk_") || task.Status != "pending" {
					t.Errorf("%s: the first task answered %s, want a pending task", ex.where, answer)
				}
				firstTask = true
			}
		}
	}
	if !firstTask {
		t.Error("README.md has no first task's curl to run")
	}
	if ran < 10 {
		t.Errorf("ran %d curl examples, want the manual's (at least 10)", ran)
	}
}

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
