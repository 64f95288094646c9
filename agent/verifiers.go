package agent

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/arbiterhq/arbiter"
)

// # The verifiers file
//
// ARBITER_VERIFIERS names a YAML file (JSON is YAML too) that lists the
// deployment's verifiers and the default cascade:
//
//	verifiers:
//	  - name: rules
//	    backend: rules
//	    rules_file: rules.txt          # relative to this file
//	  - name: small
//	    backend: openai
//	    base_url: http://127.0.0.1:11434/v1
//	    model: qwen2.5:7b
//	    api_key_env: SMALL_API_KEY     # the variable that holds the key, never the key
//	    timeout: 20s
//	    max_rps: 5
//	    price: {input_per_million: 0.15, output_per_million: 0.6}
//	    confidence: {source: sampling, samples: 5, temperature: 0.7}
//	  - name: large
//	    backend: anthropic
//	    model: claude-sonnet-4-5
//	    api_key_env: ANTHROPIC_API_KEY
//	    confidence: self
//	cascade: [rules, small, large]
//
// LoadVerifiers reads it; every error names the file and the line.

// LoadVerifiers reads the verifiers file at path and checks it
// (arbiter.VerifierSet.Validate). A rules_file is read relative to the
// file's directory. Errors start with path and the line at fault:
// "verifiers.yaml:7: verifiers[1].max_rps: …".
func LoadVerifiers(path string) (arbiter.VerifierSet, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return arbiter.VerifierSet{}, fmt.Errorf("read the verifiers file: %w", err)
	}
	set, err := ParseVerifiers(path, src)
	if err != nil {
		return set, err
	}
	for i := range set.Verifiers {
		if f := set.Verifiers[i].RulesFile; f != "" && !filepath.IsAbs(f) {
			set.Verifiers[i].RulesFile = filepath.Join(filepath.Dir(path), f)
		}
	}
	return set, nil
}

// ParseVerifiers reads a verifiers file's text; name is how errors call
// the file.
func ParseVerifiers(name string, src []byte) (arbiter.VerifierSet, error) {
	p := &fileParser{name: name, lines: map[string]int{}}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return arbiter.VerifierSet{}, p.yamlError(err)
	}
	if len(doc.Content) == 0 {
		return arbiter.VerifierSet{}, fmt.Errorf("%s: the file is empty; it lists verifiers and a cascade", name)
	}
	set, err := p.set(doc.Content[0])
	if err != nil {
		return arbiter.VerifierSet{}, err
	}
	if err := set.Validate(); err != nil {
		var se *arbiter.SetError
		if errors.As(err, &se) {
			return set, fmt.Errorf("%s:%d: %s", name, p.lineOf(se.Path), se.Error())
		}
		return set, fmt.Errorf("%s: %w", name, err)
	}
	return set, nil
}

// fileParser reads a verifiers file's YAML nodes, remembering the line of
// each path it reads for the errors found after.
type fileParser struct {
	name  string
	lines map[string]int
}

// lineOf returns the line of path, or of the nearest path it is inside.
func (p *fileParser) lineOf(path string) int {
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

// fail returns the error of node at path.
func (p *fileParser) fail(n *yaml.Node, path, format string, args ...any) error {
	if path == "" {
		return fmt.Errorf("%s:%d: %s", p.name, n.Line, fmt.Sprintf(format, args...))
	}
	return fmt.Errorf("%s:%d: %s: %s", p.name, n.Line, path, fmt.Sprintf(format, args...))
}

// yamlError names the file in the YAML parser's error, which gives the
// line as "yaml: line 3: …".
func (p *fileParser) yamlError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, tail, ok := strings.Cut(rest, ": "); ok {
			if _, err := strconv.Atoi(n); err == nil {
				return fmt.Errorf("%s:%s: %s", p.name, n, tail)
			}
		}
	}
	return fmt.Errorf("%s: %s", p.name, msg)
}

// set reads the top mapping: verifiers and cascade.
func (p *fileParser) set(n *yaml.Node) (arbiter.VerifierSet, error) {
	var set arbiter.VerifierSet
	err := p.mapping(n, "", func(key string, k, v *yaml.Node) error {
		switch key {
		case "verifiers":
			if v.Kind != yaml.SequenceNode {
				return p.fail(v, "verifiers", "verifiers must be a list of verifiers")
			}
			for i, item := range v.Content {
				path := fmt.Sprintf("verifiers[%d]", i)
				p.lines[path] = item.Line
				spec, err := p.verifier(item, path)
				if err != nil {
					return err
				}
				set.Verifiers = append(set.Verifiers, spec)
			}
		case "cascade":
			names, err := p.strings(v, "cascade")
			if err != nil {
				return err
			}
			set.Cascade = names
		default:
			return p.fail(k, key, "unknown key; the file holds verifiers and cascade")
		}
		return nil
	})
	if err != nil {
		return set, err
	}
	if _, ok := p.lines["verifiers"]; !ok {
		return set, fmt.Errorf("%s:%d: verifiers: the file lists no verifiers", p.name, n.Line)
	}
	if _, ok := p.lines["cascade"]; !ok {
		return set, fmt.Errorf("%s:%d: cascade: the file has no cascade, the order a task asks the verifiers in, such as cascade: [rules, small, large]", p.name, n.Line)
	}
	return set, nil
}

// mapping calls each for each key of the mapping n at path, in order,
// remembering each key's line.
func (p *fileParser) mapping(n *yaml.Node, path string, each func(key string, k, v *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return p.fail(n, strings.TrimPrefix(path, "."), "expected a mapping of keys to values")
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return p.fail(k, strings.TrimPrefix(path, "."), "a key must be a word")
		}
		if line, ok := seen[k.Value]; ok {
			return p.fail(k, strings.TrimPrefix(path+"."+k.Value, "."), "mapping key %q already defined at line %d", k.Value, line)
		}
		seen[k.Value] = k.Line
		p.lines[strings.TrimPrefix(path+"."+k.Value, ".")] = v.Line
		if err := each(k.Value, k, v); err != nil {
			return err
		}
	}
	return nil
}

// verifier reads one verifier's mapping.
func (p *fileParser) verifier(n *yaml.Node, path string) (arbiter.VerifierSpec, error) {
	var v arbiter.VerifierSpec
	err := p.mapping(n, path, func(key string, k, val *yaml.Node) error {
		at := path + "." + key
		var err error
		switch key {
		case "name":
			v.Name, err = p.scalar(val, at)
		case "backend":
			v.Backend, err = p.scalar(val, at)
		case "base_url":
			v.BaseURL, err = p.scalar(val, at)
		case "model":
			v.Model, err = p.scalar(val, at)
		case "api_key_env":
			v.APIKeyEnv, err = p.scalar(val, at)
		case "rules_file":
			v.RulesFile, err = p.scalar(val, at)
		case "version":
			v.Version, err = p.scalar(val, at)
		case "timeout":
			var s string
			if s, err = p.scalar(val, at); err == nil {
				if v.Timeout, err = time.ParseDuration(s); err != nil || v.Timeout <= 0 {
					err = p.fail(val, at, "timeout must be a duration such as 30s or 2m, not %q", s)
				}
			}
		case "max_rps":
			v.MaxRPS, err = p.number(val, at)
			if err == nil && !(v.MaxRPS > 0) {
				err = p.fail(val, at, "max_rps must be a number of calls a second above 0, such as 5 or 0.5")
			}
		case "price":
			err = p.mapping(val, at, func(key string, k, pv *yaml.Node) error {
				var err error
				switch key {
				case "input_per_million":
					v.Price.InputPerMillion, err = p.number(pv, at+"."+key)
				case "output_per_million":
					v.Price.OutputPerMillion, err = p.number(pv, at+"."+key)
				default:
					err = p.fail(k, at+"."+key, "unknown key; price takes input_per_million and output_per_million")
				}
				return err
			})
		case "confidence":
			v.Confidence, err = p.confidence(val, at)
		default:
			err = p.fail(k, at, "unknown key; a verifier takes name, backend, base_url, model, api_key_env, rules_file, version, timeout, max_rps, price and confidence")
		}
		return err
	})
	return v, err
}

// confidence reads a confidence source: a word (self, logprobs,
// sampling) or a mapping of source, samples and temperature.
func (p *fileParser) confidence(n *yaml.Node, path string) (arbiter.ConfidenceSpec, error) {
	var c arbiter.ConfidenceSpec
	if n.Kind == yaml.ScalarNode {
		c.Source = n.Value
		return c, nil
	}
	err := p.mapping(n, path, func(key string, k, v *yaml.Node) error {
		var err error
		switch key {
		case "source":
			c.Source, err = p.scalar(v, path+".source")
		case "samples":
			var f float64
			if f, err = p.number(v, path+".samples"); err == nil {
				if f != math.Trunc(f) || f < 2 || f > arbiter.MaxVerifierSamples {
					return p.fail(v, path+".samples", "samples must be a whole number from 2 to %d", arbiter.MaxVerifierSamples)
				}
				c.Samples = int(f)
			}
		case "temperature":
			c.Temperature, err = p.number(v, path+".temperature")
		default:
			err = p.fail(k, path+"."+key, "unknown key; confidence takes source, samples and temperature")
		}
		return err
	})
	return c, err
}

// scalar reads a string value.
func (p *fileParser) scalar(n *yaml.Node, path string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return "", p.fail(n, path, "expected a value, such as a word or a quoted string")
	}
	return n.Value, nil
}

// number reads a number value.
func (p *fileParser) number(n *yaml.Node, path string) (float64, error) {
	if n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.Tag == "!!float") {
		if f, err := strconv.ParseFloat(n.Value, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return f, nil
		}
	}
	return 0, p.fail(n, path, "expected a number, not %q", n.Value)
}

// strings reads a list of words, each line remembered.
func (p *fileParser) strings(n *yaml.Node, path string) ([]string, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, p.fail(n, path, "expected a list, such as [rules, small, large]")
	}
	out := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		at := fmt.Sprintf("%s[%d]", path, i)
		p.lines[at] = item.Line
		s, err := p.scalar(item, at)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}
