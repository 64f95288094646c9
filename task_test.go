package arbiter_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/arbiterhq/arbiter"
)

func TestParseTaskCreate_Defaults(t *testing.T) {
	in, err := arbiter.ParseTaskCreate([]byte(`{"prompt":"Refund?","allowed_verdicts":["approve","reject"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if in.TaskType != "decide" || in.Touchpoint != "chat" || in.Source != "" ||
		in.ConfidenceThreshold != 0.8 || in.Context != nil {
		t.Errorf("defaults = %+v", in)
	}

	in, err = arbiter.ParseTaskCreate([]byte(`{"prompt":"p","allowed_verdicts":["a"],"confidence_threshold":0,
		"task_type":"refund","touchpoint":"email","source":"bot","context":{ "b" : [1, 2] }}`))
	if err != nil {
		t.Fatal(err)
	}
	if in.ConfidenceThreshold != 0 || in.TaskType != "refund" || in.Touchpoint != "email" ||
		in.Source != "bot" || string(in.Context) != `{"b":[1,2]}` {
		t.Errorf("explicit fields = %+v (context %s)", in, in.Context)
	}

	in, _ = arbiter.ParseTaskCreate([]byte(`{"prompt":"p","allowed_verdicts":["a"],"context":null}`))
	if in.Context != nil {
		t.Errorf("context null = %s, want none", in.Context)
	}
}

// The document declares none of these nullable, so null is refused, naming
// the field, rather than taken for leaving it out; in a batch item too.
// context stays nullable.
func TestParseTaskCreate_RefusesNull(t *testing.T) {
	const base = `{"prompt":"p","allowed_verdicts":["a"],`
	for _, field := range []string{"confidence_threshold", "task_type", "touchpoint", "source", "deadline_seconds", "callback_url", "audit_rate"} {
		body := base + `"` + field + `":null}`
		_, err := arbiter.ParseTaskCreate([]byte(body))
		if arbiter.ErrorCode(err) != arbiter.EINVALID || arbiter.ErrorField(err) != field ||
			!strings.Contains(arbiter.ErrorMessage(err), field) || !strings.Contains(arbiter.ErrorMessage(err), "not null") {
			t.Errorf("%s: %v, want EINVALID naming %s", body, err, field)
		}
		if arbiter.APICode(err) != arbiter.CodeInvalidField {
			t.Errorf("%s: code %q, want %q", body, arbiter.APICode(err), arbiter.CodeInvalidField)
		}
		items, err := arbiter.ParseTaskBatch([]byte(`{"tasks":[` + body + `]}`))
		if err != nil || arbiter.ErrorField(items[0].Err) != field {
			t.Errorf("a batch item with %s null: %v %v, want refused naming it", field, err, items)
		}
	}
	if _, err := arbiter.ParseTaskCreate([]byte(base + `"context":null}`)); err != nil {
		t.Errorf("context null: %v, want none", err)
	}
	if _, err := arbiter.ParseTaskCreate([]byte(base + `"callback_url":""}`)); arbiter.ErrorField(err) != "callback_url" {
		t.Errorf("callback_url empty: %v, want refused naming callback_url", err)
	}
}

func TestParseTaskCreate_Limits(t *testing.T) {
	verdicts := func(n int) string {
		vs := make([]string, n)
		for i := range vs {
			vs[i] = strings.Repeat("v", 3) + string(rune('A'+i%26)) + strings.Repeat("x", i/26)
		}
		b, _ := json.Marshal(vs)
		return string(b)
	}
	ok := func(t *testing.T, body string) {
		t.Helper()
		if _, err := arbiter.ParseTaskCreate([]byte(body)); err != nil {
			t.Errorf("refused at the limit: %v", err)
		}
	}
	bad := func(t *testing.T, body string) {
		t.Helper()
		if _, err := arbiter.ParseTaskCreate([]byte(body)); arbiter.ErrorCode(err) != arbiter.EINVALID {
			t.Errorf("accepted past the limit: %v", err)
		}
	}
	t.Run("Prompt", func(t *testing.T) {
		ok(t, `{"prompt":"`+strings.Repeat("a", arbiter.MaxPromptBytes)+`","allowed_verdicts":["a"]}`)
		bad(t, `{"prompt":"`+strings.Repeat("a", arbiter.MaxPromptBytes+1)+`","allowed_verdicts":["a"]}`)
	})
	t.Run("Verdicts", func(t *testing.T) {
		ok(t, `{"prompt":"p","allowed_verdicts":`+verdicts(arbiter.MaxVerdicts)+`}`)
		bad(t, `{"prompt":"p","allowed_verdicts":`+verdicts(arbiter.MaxVerdicts+1)+`}`)
	})
	t.Run("VerdictLength", func(t *testing.T) {
		ok(t, `{"prompt":"p","allowed_verdicts":["`+strings.Repeat("é", arbiter.MaxVerdictChars)+`"]}`)
		bad(t, `{"prompt":"p","allowed_verdicts":["`+strings.Repeat("é", arbiter.MaxVerdictChars+1)+`"]}`)
	})
	t.Run("Context", func(t *testing.T) {
		fill := arbiter.MaxContextBytes - len(`{"k":""}`)
		ok(t, `{"prompt":"p","allowed_verdicts":["a"],"context":{"k":"`+strings.Repeat("c", fill)+`"}}`)
		bad(t, `{"prompt":"p","allowed_verdicts":["a"],"context":{"k":"`+strings.Repeat("c", fill+1)+`"}}`)
	})
	t.Run("ContextDepth", func(t *testing.T) {
		nested := func(depth int) string {
			return strings.Repeat(`{"a":[`, depth/2) + strings.Repeat("[", depth%2) + "1" +
				strings.Repeat("]", depth%2) + strings.Repeat(`]}`, depth/2)
		}
		ok(t, `{"prompt":"p","allowed_verdicts":["a"],"context":`+nested(arbiter.MaxContextDepth)+`}`)
		ok(t, `{"prompt":"p","allowed_verdicts":["a"],"context":{"text":"`+strings.Repeat("[{", 100)+`"}}`)
		for _, depth := range []int{arbiter.MaxContextDepth + 1, 9999} {
			_, err := arbiter.ParseTaskCreate([]byte(`{"prompt":"p","allowed_verdicts":["a"],"context":` + nested(depth) + `}`))
			if want := "context must nest arrays and objects at most 64 levels deep."; arbiter.ErrorMessage(err) != want {
				t.Errorf("depth %d: %v, want %q", depth, err, want)
			}
		}
		// Past the JSON decoder's own limit the body is refused as JSON.
		bad(t, `{"prompt":"p","allowed_verdicts":["a"],"context":`+nested(20000)+`}`)
	})
	t.Run("ContextUTF8", func(t *testing.T) {
		_, err := arbiter.ParseTaskCreate([]byte("{\"prompt\":\"p\",\"allowed_verdicts\":[\"a\"],\"context\":{\"k\":\"\xff\xfe\"}}"))
		if arbiter.ErrorMessage(err) != "context must be valid UTF-8." {
			t.Errorf("invalid UTF-8 in context: %v", err)
		}
	})
	t.Run("NUL", func(t *testing.T) {
		bad(t, `{"prompt":"a\u0000b","allowed_verdicts":["a"]}`)
		bad(t, `{"prompt":"p","allowed_verdicts":["a\u0000"]}`)
		bad(t, `{"prompt":"p","allowed_verdicts":["a"],"source":"\u0000"}`)
	})
}

// FuzzParseTaskCreate checks that no body makes the decoder panic or return
// anything but a valid request or an EINVALID error. The seeds in
// testdata/fuzz run with every `go test`.
func FuzzParseTaskCreate(f *testing.F) {
	f.Add([]byte(`{"prompt":"Approve?","allowed_verdicts":["approve","reject"],"context":{"amount":12}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := arbiter.ParseTaskCreate(body)
		if err != nil {
			if arbiter.ErrorCode(err) != arbiter.EINVALID || arbiter.ErrorMessage(err) == "" {
				t.Fatalf("error %v is not an EINVALID sentence", err)
			}
			return
		}
		if strings.TrimSpace(in.Prompt) == "" || len(in.Prompt) > arbiter.MaxPromptBytes {
			t.Fatalf("accepted prompt %q", in.Prompt)
		}
		if n := len(in.AllowedVerdicts); n == 0 || n > arbiter.MaxVerdicts {
			t.Fatalf("accepted %d verdicts", n)
		}
		seen := map[string]bool{}
		for _, v := range in.AllowedVerdicts {
			if strings.TrimSpace(v) == "" || seen[v] || utf8.RuneCountInString(v) > arbiter.MaxVerdictChars {
				t.Fatalf("accepted verdict %q in %q", v, in.AllowedVerdicts)
			}
			seen[v] = true
		}
		if in.ConfidenceThreshold < 0 || in.ConfidenceThreshold > 1 {
			t.Fatalf("accepted threshold %v", in.ConfidenceThreshold)
		}
		if in.Context != nil && (!json.Valid(in.Context) || !utf8.Valid(in.Context) ||
			len(in.Context) > arbiter.MaxContextBytes || depthOf(t, in.Context) > arbiter.MaxContextDepth) {
			t.Fatalf("accepted context %q", in.Context)
		}
		for _, s := range []string{in.Prompt, in.TaskType, in.Touchpoint, in.Source} {
			if strings.ContainsRune(s, 0) {
				t.Fatalf("accepted NUL in %q", s)
			}
		}
	})
}

// depthOf measures how deeply a JSON value nests, by decoding it: the
// reference that JSONDepth's byte scan must agree with.
func depthOf(t *testing.T, raw []byte) int {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decode %q: %v", raw, err)
	}
	var depth func(v any) int
	depth = func(v any) int {
		deepest := 0
		switch v := v.(type) {
		case []any:
			for _, e := range v {
				deepest = max(deepest, depth(e))
			}
		case map[string]any:
			for _, e := range v {
				deepest = max(deepest, depth(e))
			}
		default:
			return 0
		}
		return deepest + 1
	}
	return depth(v)
}

func TestJSONDepth(t *testing.T) {
	for text, want := range map[string]int{
		`1`:                        0,
		`"[{"`:                     0,
		`[]`:                       1,
		`{"a":1,"b":[2]}`:          2,
		`[[],[[]],[]]`:             3,
		`{"k":"\"]]]}}","l":[{}]}`: 3,
		`"\\"`:                     0,
		`["\\",[["]"]]]`:           3,
	} {
		if got := arbiter.JSONDepth([]byte(text)); got != want {
			t.Errorf("JSONDepth(%s) = %d, want %d", text, got, want)
		}
		if got := depthOf(t, []byte(text)); got != want {
			t.Errorf("the reference depth of %s = %d, want %d", text, got, want)
		}
	}
}

func TestTimestamp_JSON(t *testing.T) {
	for ms, want := range map[arbiter.Timestamp]string{
		1763805600123: "1763805600.123",
		1763805600005: "1763805600.005",
		1763805600000: "1763805600.000",
	} {
		b, _ := json.Marshal(ms)
		if string(b) != want {
			t.Errorf("%d → %s, want %s", ms, b, want)
		}
		var back arbiter.Timestamp
		if err := json.Unmarshal(b, &back); err != nil || back != ms {
			t.Errorf("%s → %d (%v), want %d", b, back, err, ms)
		}
	}
}

func TestAPIKey_Shape(t *testing.T) {
	key := arbiter.NewAPIKeyPlaintext()
	if len(key) != 37 || !arbiter.ValidAPIKey(key) || !strings.HasPrefix(key, "svc_live_") {
		t.Fatalf("new key %q is not svc_live_ and 28 hex", key)
	}
	if arbiter.NewAPIKeyPlaintext() == key {
		t.Fatal("two keys are equal")
	}
	for _, bad := range []string{"", key[:36], key + "0", strings.ToUpper(key), "svc_test_" + key[9:], key[:36] + "g"} {
		if arbiter.ValidAPIKey(bad) {
			t.Errorf("ValidAPIKey(%q) = true", bad)
		}
	}
	if h := arbiter.HashToken(key); len(h) != 64 || strings.Contains(h, key[9:]) {
		t.Errorf("hash %q", h)
	}
}
