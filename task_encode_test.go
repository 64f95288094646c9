package arbiter

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

// reflectedTask is Task without its methods: what encoding/json made of a
// task before Task encoded itself.
type reflectedTask Task

// encodedByReflection returns encoding/json's encoding of t's fields.
func encodedByReflection(t *testing.T, task *Task) []byte {
	t.Helper()
	want, err := json.Marshal((*reflectedTask)(task))
	if err != nil {
		t.Fatal(err)
	}
	return want
}

// checkEncodesAsReflection fails unless AppendJSON and json.Marshal of
// task give encoding/json's bytes of its fields.
func checkEncodesAsReflection(t *testing.T, what string, task *Task) {
	t.Helper()
	want := encodedByReflection(t, task)
	got, err := task.AppendJSON([]byte("prefix"))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("%s: AppendJSON gives\n%s\nencoding/json\n%s", what, got[len("prefix"):], want)
	}
	for _, v := range []any{task, *task} {
		got, err := json.Marshal(v)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: json.Marshal(%T) gives %v\n%s\nencoding/json\n%s", what, v, err, got, want)
		}
	}
}

// The task's own encoder writes every field of the task, of every shape
// the stores read (pending, decided with attempts, with and without the
// optional members), exactly as encoding/json wrote Task.
func TestTask_AppendJSONEncodesAsEncodingJSON(t *testing.T) {
	// Every field set, the optional members too: a member the encoder
	// drops, or one added to Task and not to the encoder, fails here.
	full := new(Task)
	fillValue(reflect.ValueOf(full).Elem(), rand.New(rand.NewSource(1)), true)
	checkEncodesAsReflection(t, "every field set", full)
	encoded, _ := full.AppendJSON(nil)
	for _, name := range jsonNames(reflect.TypeOf(Task{})) {
		if !bytes.Contains(encoded, []byte(`"`+name+`":`)) {
			t.Errorf("the full task's JSON lacks %q:\n%s", name, encoded)
		}
	}
	for _, name := range jsonNames(reflect.TypeOf(Attempt{})) {
		if !bytes.Contains(encoded, []byte(`{"`+name+`":`)) && !bytes.Contains(encoded, []byte(`,"`+name+`":`)) {
			t.Errorf("the full task's attempts lack %q:\n%s", name, encoded)
		}
	}

	verdict, tier, conf := "approve", TierAgent, 0.93
	done, started := Timestamp(1763805601234), Timestamp(1763805600999)
	for name, task := range map[string]*Task{
		"zero": {},
		"pending, as created": {
			ID: "tsk_0123456789abcdef", AccountID: "acc_1", Status: StatusPending, TaskType: "refund", Source: "bot",
			Touchpoint: "email", Prompt: "Refund <order> & \"ship\"?\n", AllowedVerdicts: []string{"approve", "reject"},
			ConfidenceThreshold: 0.85, CreatedAt: 1763805600000, Attempts: []Attempt{},
			Context: json.RawMessage(`{"a":1}`), AuditState: AuditStateWaiting, Failures: 2,
		},
		"decided by the agent": {
			ID: "tsk_1", Status: StatusCompleted, AllowedVerdicts: []string{}, ConfidenceThreshold: 1,
			FinalVerdict: &verdict, FinalTier: &tier, FinalConfidence: &conf, CreatedAt: 5, CompletedAt: &done,
			Attempts: []Attempt{{Tier: TierAgent, Verdict: &verdict, Confidence: &conf, Rationale: "ok",
				StartedAt: started, FinishedAt: &done, PassedOn: true}},
			Receipt: "eyJ.x.y", EditVerdicts: []string{},
		},
	} {
		checkEncodesAsReflection(t, name, task)
	}

	// Random shapes: each optional member present or not, nil and empty
	// lists, strings and numbers that need escaping or an exponent.
	r := rand.New(rand.NewSource(2))
	for i := range 2000 {
		task := new(Task)
		fillValue(reflect.ValueOf(task).Elem(), r, false)
		checkEncodesAsReflection(t, "random task "+strings.Repeat("·", i%3), task)
	}
}

// Each string and number is written as encoding/json writes it.
func TestAppendJSONString_EscapesAsEncodingJSON(t *testing.T) {
	for _, s := range trickyStrings {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("%q: %s, encoding/json %s", s, got, want)
		}
	}
	for _, f := range trickyFloats {
		want, _ := json.Marshal(f)
		var e jsonAppender
		if e.float(f); e.err != nil || !bytes.Equal(e.b, want) {
			t.Errorf("%v: %s (%v), encoding/json %s", f, e.b, e.err, want)
		}
	}
}

// A number that JSON cannot hold fails the encoding, as it failed
// encoding/json's.
func TestTask_AppendJSONRefusesNaN(t *testing.T) {
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		nan := f
		for name, task := range map[string]*Task{
			"threshold":        {ConfidenceThreshold: f},
			"final confidence": {FinalConfidence: &nan},
			"attempt's cost":   {Attempts: []Attempt{{Cost: &nan}}},
		} {
			if _, err := json.Marshal((*reflectedTask)(task)); err == nil {
				t.Fatalf("%s %v: encoding/json encodes it", name, f)
			}
			if _, err := task.AppendJSON(nil); err == nil {
				t.Errorf("%s %v: AppendJSON encodes it", name, f)
			}
			if _, err := json.Marshal(task); err == nil {
				t.Errorf("%s %v: json.Marshal encodes it", name, f)
			}
		}
	}
}

var trickyStrings = []string{
	"", "plain", `quote " backslash \ slash /`, "<script>&amp;</script>", "tab\tnew\nline\rret\bback\fform",
	"\x00\x01\x1f\x7f", "é ü 日本 🎉", "\u2028 and \u2029", "bad \xff utf-8 \xc3", "\xe2\x80", "a\u00a0b",
}

var trickyFloats = []float64{0, math.Copysign(0, -1), 1, -1, 0.85, 1e-6, 9.99e-7, 1e-7, 1.5e-9, 1e20, 1e21, 123456789012345678901234.0,
	-1e-300, math.MaxFloat64, math.SmallestNonzeroFloat64, 0.1 + 0.2, 100}

// jsonNames returns the JSON names of typ's encoded fields.
func jsonNames(typ reflect.Type) []string {
	var names []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.IsExported() && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

var rawMessageType = reflect.TypeOf(json.RawMessage(nil))

// fillValue sets v, recursively: with full, every field to a value that is
// not its zero (lists of two); without, each pointer, list and value at
// random, nil, empty or set. Strings and numbers come from trickyStrings
// and trickyFloats, JSON texts (json.RawMessage) are valid.
func fillValue(v reflect.Value, r *rand.Rand, full bool) {
	if !full && r.Intn(4) == 0 {
		return // left zero
	}
	switch v.Kind() {
	case reflect.String:
		if full {
			v.SetString(trickyStrings[1+r.Intn(len(trickyStrings)-1)])
		} else {
			v.SetString(trickyStrings[r.Intn(len(trickyStrings))])
		}
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(r.Int63n(4_000_000_000_000) - 1_000_000_000_000 + 1)
	case reflect.Float64:
		f := trickyFloats[r.Intn(len(trickyFloats))]
		if full && f == 0 {
			f = 0.5
		}
		v.SetFloat(f)
	case reflect.Pointer:
		if !full && r.Intn(3) == 0 {
			return
		}
		p := reflect.New(v.Type().Elem())
		fillValue(p.Elem(), r, full)
		v.Set(p)
	case reflect.Slice:
		if v.Type() == rawMessageType {
			v.SetBytes([]byte([]string{`{"a":1,"b":"<x>"}`, `[1, 2]`, `"s"`, `{ "x" : [true, null] }`}[r.Intn(4)]))
			return
		}
		n := 2
		if !full {
			n = r.Intn(3)
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fillValue(s.Index(i), r, full)
		}
		v.Set(s)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillValue(v.Field(i), r, full)
			}
		}
	}
}
