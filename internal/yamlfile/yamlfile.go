// Package yamlfile reads the YAML files an operator writes (the verifiers
// file, the gateway's policy file) node by node, so that every error
// names the file and the line at fault: "policy.yaml:7: rules[1].when: …".
// A file is read with a Parser: Parse gives the document's top node, and
// Mapping, Scalar, Number and Strings read the nodes below it, remembering
// the line of each path they read for errors found later (LineOf).
package yamlfile

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Parser reads one file's YAML nodes.
type Parser struct {
	// Name is how errors call the file: its path as given.
	Name  string
	lines map[string]int
}

// New returns a parser of the file called name.
func New(name string) *Parser {
	return &Parser{Name: name, lines: map[string]int{}}
}

// Parse parses src and returns its top node, or an error naming the file
// and the line; empty says what the file should hold when it holds
// nothing ("it lists verifiers and a cascade").
func (p *Parser) Parse(src []byte, empty string) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, p.yamlError(err)
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: the file is empty; %s", p.Name, empty)
	}
	return doc.Content[0], nil
}

// Remember records the line of path, for LineOf.
func (p *Parser) Remember(path string, line int) { p.lines[path] = line }

// Has reports whether the parser has read path.
func (p *Parser) Has(path string) bool {
	_, ok := p.lines[path]
	return ok
}

// LineOf returns the line of path, or of the nearest path it is inside
// ("rules[2].ask.deadline", then "rules[2].ask", then "rules[2]"…); 1
// when none was read.
func (p *Parser) LineOf(path string) int {
	for path != "" {
		if line, ok := p.lines[path]; ok {
			return line
		}
		if i := strings.LastIndexAny(path, ".["); i > 0 {
			path = path[:i]
		} else {
			break
		}
	}
	return 1
}

// Fail returns the error of node n at path: "file:line: path: message".
func (p *Parser) Fail(n *yaml.Node, path, format string, args ...any) error {
	return p.FailAt(n.Line, path, format, args...)
}

// FailAt returns the error of path at line.
func (p *Parser) FailAt(line int, path, format string, args ...any) error {
	if path == "" {
		return fmt.Errorf("%s:%d: %s", p.Name, line, fmt.Sprintf(format, args...))
	}
	return fmt.Errorf("%s:%d: %s: %s", p.Name, line, path, fmt.Sprintf(format, args...))
}

// yamlError names the file in the YAML parser's error, which gives the
// line as "yaml: line 3: …".
func (p *Parser) yamlError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, tail, ok := strings.Cut(rest, ": "); ok {
			if _, err := strconv.Atoi(n); err == nil {
				return fmt.Errorf("%s:%s: %s", p.Name, n, tail)
			}
		}
	}
	return fmt.Errorf("%s: %s", p.Name, msg)
}

// Mapping calls each for each key of the mapping n at path, in order,
// remembering each key's line. A key twice is an error.
func (p *Parser) Mapping(n *yaml.Node, path string, each func(key string, k, v *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return p.Fail(n, strings.TrimPrefix(path, "."), "expected a mapping of keys to values")
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return p.Fail(k, strings.TrimPrefix(path, "."), "a key must be a word")
		}
		if line, ok := seen[k.Value]; ok {
			return p.Fail(k, strings.TrimPrefix(path+"."+k.Value, "."), "mapping key %q already defined at line %d", k.Value, line)
		}
		seen[k.Value] = k.Line
		p.lines[strings.TrimPrefix(path+"."+k.Value, ".")] = v.Line
		if err := each(k.Value, k, v); err != nil {
			return err
		}
	}
	return nil
}

// Scalar reads a string value.
func (p *Parser) Scalar(n *yaml.Node, path string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return "", p.Fail(n, path, "expected a value, such as a word or a quoted string")
	}
	return n.Value, nil
}

// Number reads a number value.
func (p *Parser) Number(n *yaml.Node, path string) (float64, error) {
	if n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.Tag == "!!float") {
		if f, err := strconv.ParseFloat(n.Value, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return f, nil
		}
	}
	return 0, p.Fail(n, path, "expected a number, not %q", n.Value)
}

// Strings reads a list of words, each one's line remembered; example
// shows a list in the error of a node that is not one ("[a, b]").
func (p *Parser) Strings(n *yaml.Node, path, example string) ([]string, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, p.Fail(n, path, "expected a list, such as %s", example)
	}
	out := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		at := fmt.Sprintf("%s[%d]", path, i)
		p.lines[at] = item.Line
		s, err := p.Scalar(item, at)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}
