package agent

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/internal/yamlfile"
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
	p := &fileParser{yamlfile.New(name)}
	top, err := p.Parse(src, "it lists verifiers and a cascade")
	if err != nil {
		return arbiter.VerifierSet{}, err
	}
	set, err := p.set(top)
	if err != nil {
		return arbiter.VerifierSet{}, err
	}
	if err := set.Validate(); err != nil {
		var se *arbiter.SetError
		if errors.As(err, &se) {
			return set, fmt.Errorf("%s:%d: %s", name, p.LineOf(se.Path), se.Error())
		}
		return set, fmt.Errorf("%s: %w", name, err)
	}
	return set, nil
}

// fileParser reads a verifiers file's YAML nodes.
type fileParser struct {
	*yamlfile.Parser
}

// set reads the top mapping: verifiers and cascade.
func (p *fileParser) set(n *yaml.Node) (arbiter.VerifierSet, error) {
	var set arbiter.VerifierSet
	err := p.Mapping(n, "", func(key string, k, v *yaml.Node) error {
		switch key {
		case "verifiers":
			if v.Kind != yaml.SequenceNode {
				return p.Fail(v, "verifiers", "verifiers must be a list of verifiers")
			}
			for i, item := range v.Content {
				path := fmt.Sprintf("verifiers[%d]", i)
				p.Remember(path, item.Line)
				spec, err := p.verifier(item, path)
				if err != nil {
					return err
				}
				set.Verifiers = append(set.Verifiers, spec)
			}
		case "cascade":
			names, err := p.Strings(v, "cascade", "[rules, small, large]")
			if err != nil {
				return err
			}
			set.Cascade = names
		default:
			return p.Fail(k, key, "unknown key; the file holds verifiers and cascade")
		}
		return nil
	})
	if err != nil {
		return set, err
	}
	if !p.Has("verifiers") {
		return set, p.Fail(n, "verifiers", "the file lists no verifiers")
	}
	if !p.Has("cascade") {
		return set, p.Fail(n, "cascade", "the file has no cascade, the order a task asks the verifiers in, such as cascade: [rules, small, large]")
	}
	return set, nil
}

// verifier reads one verifier's mapping.
func (p *fileParser) verifier(n *yaml.Node, path string) (arbiter.VerifierSpec, error) {
	var v arbiter.VerifierSpec
	err := p.Mapping(n, path, func(key string, k, val *yaml.Node) error {
		at := path + "." + key
		var err error
		switch key {
		case "name":
			v.Name, err = p.Scalar(val, at)
		case "backend":
			v.Backend, err = p.Scalar(val, at)
		case "base_url":
			v.BaseURL, err = p.Scalar(val, at)
		case "model":
			v.Model, err = p.Scalar(val, at)
		case "api_key_env":
			v.APIKeyEnv, err = p.Scalar(val, at)
		case "rules_file":
			v.RulesFile, err = p.Scalar(val, at)
		case "version":
			v.Version, err = p.Scalar(val, at)
		case "timeout":
			var s string
			if s, err = p.Scalar(val, at); err == nil {
				if v.Timeout, err = time.ParseDuration(s); err != nil || v.Timeout <= 0 {
					err = p.Fail(val, at, "timeout must be a duration such as 30s or 2m, not %q", s)
				}
			}
		case "max_rps":
			v.MaxRPS, err = p.Number(val, at)
			if err == nil && !(v.MaxRPS > 0) {
				err = p.Fail(val, at, "max_rps must be a number of calls a second above 0, such as 5 or 0.5")
			}
		case "price":
			err = p.Mapping(val, at, func(key string, k, pv *yaml.Node) error {
				var err error
				switch key {
				case "input_per_million":
					v.Price.InputPerMillion, err = p.Number(pv, at+"."+key)
				case "output_per_million":
					v.Price.OutputPerMillion, err = p.Number(pv, at+"."+key)
				default:
					err = p.Fail(k, at+"."+key, "unknown key; price takes input_per_million and output_per_million")
				}
				return err
			})
		case "confidence":
			v.Confidence, err = p.confidence(val, at)
		default:
			err = p.Fail(k, at, "unknown key; a verifier takes name, backend, base_url, model, api_key_env, rules_file, version, timeout, max_rps, price and confidence")
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
	err := p.Mapping(n, path, func(key string, k, v *yaml.Node) error {
		var err error
		switch key {
		case "source":
			c.Source, err = p.Scalar(v, path+".source")
		case "samples":
			var f float64
			if f, err = p.Number(v, path+".samples"); err == nil {
				if f != math.Trunc(f) || f < 2 || f > arbiter.MaxVerifierSamples {
					return p.Fail(v, path+".samples", "samples must be a whole number from 2 to %d", arbiter.MaxVerifierSamples)
				}
				c.Samples = int(f)
			}
		case "temperature":
			c.Temperature, err = p.Number(v, path+".temperature")
		default:
			err = p.Fail(k, path+"."+key, "unknown key; confidence takes source, samples and temperature")
		}
		return err
	})
	return c, err
}
