package arbiter

import (
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends the task's JSON, the API's task object, to b: what
// encoding/json makes of Task's fields and tags, byte for byte (HTML
// characters, U+2028, U+2029 and invalid UTF-8 escaped as it escapes
// them, numbers written as it writes them), without its reflection. Every
// get and list answer encodes a task, and reflection was the larger part
// of that (docs/benchmarks.md). The members most tasks lack (display,
// review, escalation, action, approved_action) go through encoding/json.
// Like encoding/json, it fails on a number that is not finite.
//
// Task has no MarshalJSON: encoding/json checks and compacts what a
// Marshaler returns, which costs more than its reflection saves (9.5
// against 4.3 µs of CPU a task, where AppendJSON takes 0.7), so a task
// inside another value (a list, a batch, an event) is encoded by
// reflection, to the same bytes.
func (t *Task) AppendJSON(b []byte) ([]byte, error) {
	e := jsonAppender{b: b}
	e.raw(`{"id":`)
	e.str(t.ID)
	e.raw(`,"status":`)
	e.str(t.Status)
	e.raw(`,"task_type":`)
	e.str(t.TaskType)
	e.raw(`,"source":`)
	e.str(t.Source)
	e.raw(`,"touchpoint":`)
	e.str(t.Touchpoint)
	e.raw(`,"prompt":`)
	e.str(t.Prompt)
	e.raw(`,"allowed_verdicts":`)
	e.strs(t.AllowedVerdicts)
	e.raw(`,"confidence_threshold":`)
	e.float(t.ConfidenceThreshold)
	e.raw(`,"final_verdict":`)
	e.strOrNull(t.FinalVerdict)
	e.raw(`,"final_tier":`)
	e.strOrNull(t.FinalTier)
	e.raw(`,"final_confidence":`)
	e.floatOrNull(t.FinalConfidence)
	e.raw(`,"final_verifier":`)
	e.strOrNull(t.FinalVerifier)
	e.raw(`,"created_at":`)
	e.b = t.CreatedAt.AppendJSON(e.b)
	e.raw(`,"completed_at":`)
	e.timeOrNull(t.CompletedAt)
	e.raw(`,"deadline_at":`)
	e.timeOrNull(t.DeadlineAt)
	e.raw(`,"expired_at":`)
	e.timeOrNull(t.ExpiredAt)
	e.raw(`,"attempts":`)
	if t.Attempts == nil {
		e.raw("null")
	} else {
		e.raw("[")
		for i := range t.Attempts {
			if i > 0 {
				e.raw(",")
			}
			e.attempt(&t.Attempts[i])
		}
		e.raw("]")
	}
	if t.Display != nil {
		e.raw(`,"display":`)
		e.marshal(t.Display)
	}
	if t.Review != nil {
		e.raw(`,"review":`)
		e.marshal(t.Review)
	}
	if t.VotesCast != nil {
		e.raw(`,"votes_cast":`)
		e.b = strconv.AppendInt(e.b, int64(*t.VotesCast), 10)
	}
	if t.Escalation != nil {
		e.raw(`,"escalation":`)
		e.marshal(t.Escalation)
	}
	if t.GoldVerdict != nil {
		e.raw(`,"gold_verdict":`)
		e.str(*t.GoldVerdict)
	}
	if t.Action != nil {
		e.raw(`,"action":`)
		e.marshal(t.Action)
	}
	if len(t.EditVerdicts) > 0 {
		e.raw(`,"edit_verdicts":`)
		e.strs(t.EditVerdicts)
	}
	if t.ApprovedAction != nil {
		e.raw(`,"approved_action":`)
		e.marshal(t.ApprovedAction)
	}
	if t.Receipt != "" {
		e.raw(`,"receipt":`)
		e.str(t.Receipt)
	}
	e.raw("}")
	return e.b, e.err
}

// attempt appends an attempt's JSON, as encoding/json makes it of
// Attempt's fields and tags.
func (e *jsonAppender) attempt(a *Attempt) {
	e.raw(`{"tier":`)
	e.str(a.Tier)
	e.raw(`,"verdict":`)
	e.strOrNull(a.Verdict)
	e.raw(`,"confidence":`)
	e.floatOrNull(a.Confidence)
	e.raw(`,"rationale":`)
	e.str(a.Rationale)
	e.raw(`,"model":`)
	e.strOrNull(a.Model)
	e.raw(`,"reviewer":`)
	e.strOrNull(a.Reviewer)
	e.raw(`,"error":`)
	e.strOrNull(a.Error)
	e.raw(`,"started_at":`)
	e.b = a.StartedAt.AppendJSON(e.b)
	e.raw(`,"finished_at":`)
	e.timeOrNull(a.FinishedAt)
	e.raw(`,"audit":`)
	e.b = strconv.AppendBool(e.b, a.Audit)
	e.raw(`,"version":`)
	e.strOrNull(a.Version)
	if a.ActionDigest != nil {
		e.raw(`,"action_digest":`)
		e.str(*a.ActionDigest)
	}
	e.raw(`,"verifier":`)
	e.strOrNull(a.Verifier)
	e.raw(`,"passed_on":`)
	e.b = strconv.AppendBool(e.b, a.PassedOn)
	e.raw(`,"input_tokens":`)
	e.intOrNull(a.InputTokens)
	e.raw(`,"output_tokens":`)
	e.intOrNull(a.OutputTokens)
	e.raw(`,"cost":`)
	e.floatOrNull(a.Cost)
	e.raw("}")
}

// jsonAppender appends JSON values to b as encoding/json writes them;
// the first failure is kept in err.
type jsonAppender struct {
	b   []byte
	err error
}

func (e *jsonAppender) raw(s string) { e.b = append(e.b, s...) }

func (e *jsonAppender) str(s string) { e.b = appendJSONString(e.b, s) }

func (e *jsonAppender) strOrNull(s *string) {
	if s == nil {
		e.raw("null")
		return
	}
	e.str(*s)
}

// strs appends a list of strings; null for a nil one.
func (e *jsonAppender) strs(list []string) {
	if list == nil {
		e.raw("null")
		return
	}
	e.raw("[")
	for i, s := range list {
		if i > 0 {
			e.raw(",")
		}
		e.str(s)
	}
	e.raw("]")
}

func (e *jsonAppender) intOrNull(n *int) {
	if n == nil {
		e.raw("null")
		return
	}
	e.b = strconv.AppendInt(e.b, int64(*n), 10)
}

func (e *jsonAppender) timeOrNull(ts *Timestamp) {
	if ts == nil {
		e.raw("null")
		return
	}
	e.b = ts.AppendJSON(e.b)
}

func (e *jsonAppender) floatOrNull(f *float64) {
	if f == nil {
		e.raw("null")
		return
	}
	e.float(*f)
}

// float appends f as encoding/json writes a float64: like %g with the
// exponent's cutoffs of ES6 (below 1e-6, from 1e21) and no padding of the
// exponent; an error for NaN and the infinities.
func (e *jsonAppender) float(f float64) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		if e.err == nil {
			e.err = &json.UnsupportedValueError{Value: reflect.ValueOf(f), Str: strconv.FormatFloat(f, 'g', -1, 64)}
		}
		e.raw("null")
		return
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	e.b = strconv.AppendFloat(e.b, f, format, -1, 64)
	if format == 'e' {
		// e-09 becomes e-9.
		n := len(e.b)
		if n >= 4 && e.b[n-4] == 'e' && e.b[n-3] == '-' && e.b[n-2] == '0' {
			e.b[n-2] = e.b[n-1]
			e.b = e.b[:n-1]
		}
	}
}

// marshal appends v through encoding/json, for the members too rare to
// be worth their own encoder.
func (e *jsonAppender) marshal(v any) {
	j, err := json.Marshal(v)
	if err != nil {
		if e.err == nil {
			e.err = err
		}
		e.raw("null")
		return
	}
	e.b = append(e.b, j...)
}

// appendJSONString appends s as a JSON string, escaped as encoding/json
// escapes it: ", \ and the control characters, <, > and & (as \u003c,
// \u003e, \u0026), U+2028 and U+2029; each byte of invalid UTF-8 becomes
// \ufffd.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
