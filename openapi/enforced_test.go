package openapi_test

import (
	"encoding/json"
	"net/url"
	"regexp"
	"strconv"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/openapi"
)

// schema is the part of a JSON Schema these tests read.
type schema struct {
	Type    any      `json:"type"`
	Pattern string   `json:"pattern"`
	Maximum *float64 `json:"maximum"`
	Items   *schema  `json:"items"`
}

// documentParts reads the document's request schemas and the query
// parameters of its GET operations.
func documentParts(t *testing.T) (schemas map[string]struct {
	Properties map[string]schema `json:"properties"`
}, query map[string]map[string]schema) {
	t.Helper()
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]schema `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openapi.Document(), &doc); err != nil {
		t.Fatal(err)
	}
	query = map[string]map[string]schema{}
	for path, item := range doc.Paths {
		var get struct {
			Parameters []struct {
				Name   string `json:"name"`
				In     string `json:"in"`
				Schema schema `json:"schema"`
			} `json:"parameters"`
		}
		if raw, ok := item["get"]; !ok || json.Unmarshal(raw, &get) != nil {
			continue
		}
		query[path] = map[string]schema{}
		for _, p := range get.Parameters {
			if p.In == "query" {
				query[path][p.Name] = p.Schema
			}
		}
	}
	return doc.Components.Schemas, query
}

// compilePattern compiles a document pattern, which is written in the
// syntax ECMAScript, Go and Python share (no \u escapes), so Go's regexp
// reads it as a generated client's validator does.
func compilePattern(t *testing.T, pattern string) *regexp.Regexp {
	t.Helper()
	re, err := regexp.Compile(pattern)
	if err != nil {
		t.Fatalf("pattern %q does not compile in Go: %v", pattern, err)
	}
	return re
}

// The times a list or a calibration report takes as created_after and
// created_before are bounded as the document says: its maximum is taken,
// the next second refused.
func TestDocument_TimestampMaximumIsTheServers(t *testing.T) {
	_, query := documentParts(t)
	parsers := map[string]func(string) error{
		"/v1/tasks":       func(q string) error { _, err := arbiter.ParseTaskListQuery(q); return err },
		"/v1/calibration": func(q string) error { _, err := arbiter.ParseCalibrationQuery(q); return err },
	}
	for path, parse := range parsers {
		for _, name := range []string{"created_after", "created_before"} {
			s, ok := query[path][name]
			if !ok || s.Maximum == nil {
				t.Errorf("GET %s's %s has no maximum", path, name)
				continue
			}
			top := strconv.FormatFloat(*s.Maximum, 'f', -1, 64)
			if err := parse(name + "=" + top); err != nil {
				t.Errorf("GET %s?%s=%s (the document's maximum) is refused: %v", path, name, top, err)
			}
			over := strconv.FormatFloat(*s.Maximum+1, 'f', -1, 64)
			if err := parse(name + "=" + over); arbiter.ErrorField(err) != name {
				t.Errorf("GET %s?%s=%s (past the maximum) = %v, want an error naming %s", path, name, over, err, name)
			}
		}
	}
}

// The prompt's pattern says what a create takes: not only whitespace (as
// Go's unicode.IsSpace has it) and no NUL. Every whitespace rune, NUL and
// a spread of other runes, alone, padded and mixed, are tried on the
// document's pattern and on the server's parse, of a create and of a batch.
func TestDocument_PromptPatternIsTheServers(t *testing.T) {
	schemas, _ := documentParts(t)
	var runes []rune
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if utf8.ValidRune(r) && (unicode.IsSpace(r) || r < 0x100 || r%251 == 0 || unicode.Is(unicode.Zs, r) || unicode.Is(unicode.Cf, r)) {
			runes = append(runes, r)
		}
	}
	for _, name := range []string{"TaskCreate", "TaskBatchItem"} {
		prompt := schemas[name].Properties["prompt"]
		if prompt.Pattern == "" {
			t.Fatalf("%s.prompt has no pattern", name)
		}
		re := compilePattern(t, prompt.Pattern)
		checked, refused := 0, 0
		for _, r := range runes {
			c := string(r)
			for _, p := range []string{c, " " + c + " ", c + "a", "a" + c, c + "\x00", "\u3000" + c + "\t"} {
				body, _ := json.Marshal(map[string]any{"prompt": p, "allowed_verdicts": []string{"yes"}})
				var err error
				if name == "TaskBatchItem" {
					batch, _ := json.Marshal(map[string]any{"tasks": []json.RawMessage{body}})
					var items []arbiter.TaskBatchItem
					if items, err = arbiter.ParseTaskBatch(batch); err == nil && len(items) == 1 {
						err = items[0].Err
					}
				} else {
					_, err = arbiter.ParseTaskCreate(body)
				}
				if documented, taken := re.MatchString(p), err == nil; documented != taken {
					t.Errorf("%s prompt %q: the document's pattern says %v, the server %v (%v)", name, p, documented, taken, err)
				} else if !taken && arbiter.ErrorField(err) != "prompt" {
					t.Errorf("%s prompt %q refused naming %q: %v", name, p, arbiter.ErrorField(err), err)
				}
				checked++
				if err != nil {
					refused++
				}
			}
		}
		if refused < 100 || checked-refused < 100 {
			t.Errorf("%s: %d prompts checked, %d refused: the probes miss one side", name, checked, refused)
		}
	}
}

// refusesNUL reports whether s's pattern takes "ab" and refuses "a\x00b":
// NUL is what it refuses.
func refusesNUL(t *testing.T, s schema) bool {
	if s.Pattern == "" {
		return false
	}
	re := compilePattern(t, s.Pattern)
	return re.MatchString("ab") && !re.MatchString("a\x00b")
}

// Every string field of a create whose pattern refuses NUL is refused by
// the server with NUL in it, naming the field; and the labels and verdicts,
// which the server refuses NUL in, have such a pattern.
func TestDocument_NULPatternsAreTheServers(t *testing.T) {
	schemas, query := documentParts(t)
	props := schemas["TaskCreate"].Properties
	withNUL := "a\x00b"
	for _, name := range []string{"task_type", "touchpoint", "source", "allowed_verdicts"} {
		s := props[name]
		if name == "allowed_verdicts" {
			s = *s.Items
		}
		if s.Pattern == "" || compilePattern(t, s.Pattern).MatchString(withNUL) {
			t.Errorf("TaskCreate.%s's pattern %q does not refuse NUL, which the server refuses", name, s.Pattern)
		}
	}
	for name, s := range props {
		value := any(withNUL)
		if s.Items != nil {
			s, value = *s.Items, []string{withNUL}
		}
		if !refusesNUL(t, s) {
			continue
		}
		body := map[string]any{"prompt": "Refund?", "allowed_verdicts": []string{"yes"}}
		body[name] = value
		b, _ := json.Marshal(body)
		if _, err := arbiter.ParseTaskCreate(b); arbiter.ErrorField(err) != name {
			t.Errorf("TaskCreate.%s = %q: %v, want an error naming %s", name, withNUL, err, name)
		}
	}
	for name, s := range query["/v1/tasks"] {
		if !refusesNUL(t, s) {
			continue
		}
		q := url.Values{name: {withNUL}}.Encode()
		if _, err := arbiter.ParseTaskListQuery(q); arbiter.ErrorField(err) != name {
			t.Errorf("GET /v1/tasks?%s: %v, want an error naming %s", q, err, name)
		}
	}
	for _, name := range []string{"task_type", "source", "touchpoint"} {
		if s := query["/v1/tasks"][name]; s.Pattern == "" || compilePattern(t, s.Pattern).MatchString(withNUL) {
			t.Errorf("GET /v1/tasks's %s pattern %q does not refuse NUL, which the server refuses", name, s.Pattern)
		}
	}
}
