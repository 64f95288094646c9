package arbiter_test

import (
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
)

func TestValidateIdempotencyKey(t *testing.T) {
	for _, key := range []string{"k", "order-1/refund", " spaced key ", "~!@#$%^&*()_+{}|:\"<>?`", strings.Repeat("k", 255)} {
		if err := arbiter.ValidateIdempotencyKey(key); err != nil {
			t.Errorf("ValidateIdempotencyKey(%q) = %v", key, err)
		}
	}
	for _, key := range []string{"", strings.Repeat("k", 256), "clé", "a\tb", "a\nb", "a\x00b", "a\x7fb"} {
		if err := arbiter.ValidateIdempotencyKey(key); arbiter.ErrorCode(err) != arbiter.EINVALID {
			t.Errorf("ValidateIdempotencyKey(%q) = %v, want EINVALID", key, err)
		}
	}
}

func TestTaskCreate_Fingerprint(t *testing.T) {
	parse := func(body string) arbiter.TaskCreate {
		t.Helper()
		in, err := arbiter.ParseTaskCreate([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return in
	}
	base := parse(`{"prompt":"Refund?","allowed_verdicts":["approve","reject"],"context":{"order":"o1","lines":[{"sku":"a","qty":1}]}}`)
	fp := base.Fingerprint()
	if len(fp) != 64 {
		t.Fatalf("fingerprint %q is not a SHA-256 in hex", fp)
	}
	t.Run("SameRequest", func(t *testing.T) {
		for _, body := range []string{
			// Whitespace, field order, context member order, escapes
			// and defaults spelled out.
			"{\n  \"allowed_verdicts\" : [ \"approve\", \"reject\" ],\n  \"prompt\": \"Refund?\",\n" +
				`"context": {"lines": [{"qty": 1, "sku": "a"}], "order": "o\u0031"}}`,
			`{"prompt":"Refund?","allowed_verdicts":["approve","reject"],"context":{"order":"o1","lines":[{"sku":"a","qty":1}]},
				"confidence_threshold":0.8,"task_type":"decide","touchpoint":"chat","source":""}`,
		} {
			if got := parse(body).Fingerprint(); got != fp {
				t.Errorf("%s: fingerprint differs", body)
			}
		}
		keyed := base
		keyed.IdempotencyKey = "k1"
		if keyed.Fingerprint() != fp {
			t.Error("the idempotency key changes the fingerprint")
		}
	})
	t.Run("AnotherRequest", func(t *testing.T) {
		for _, body := range []string{
			`{"prompt":"Refund? ","allowed_verdicts":["approve","reject"],"context":{"order":"o1","lines":[{"sku":"a","qty":1}]}}`,
			`{"prompt":"Refund?","allowed_verdicts":["reject","approve"],"context":{"order":"o1","lines":[{"sku":"a","qty":1}]}}`,
			`{"prompt":"Refund?","allowed_verdicts":["approve","reject"],"context":{"order":"o1","lines":[{"sku":"a","qty":2}]}}`,
			`{"prompt":"Refund?","allowed_verdicts":["approve","reject"],"context":{"order":"o1","lines":[{"qty":1},{"sku":"a"}]}}`,
			`{"prompt":"Refund?","allowed_verdicts":["approve","reject"]}`,
			`{"prompt":"Refund?","allowed_verdicts":["approve","reject"],"context":{"order":"o1","lines":[{"sku":"a","qty":1}]},"confidence_threshold":0.9}`,
			`{"prompt":"Refund?","allowed_verdicts":["approve","reject"],"context":{"order":"o1","lines":[{"sku":"a","qty":1}]},"task_type":"refund"}`,
			`{"prompt":"Refund?","allowed_verdicts":["approve","reject"],"context":{"order":"o1","lines":[{"sku":"a","qty":1}]},"touchpoint":"email"}`,
			`{"prompt":"Refund?","allowed_verdicts":["approve","reject"],"context":{"order":"o1","lines":[{"sku":"a","qty":1}]},"source":"bot"}`,
		} {
			if parse(body).Fingerprint() == fp {
				t.Errorf("%s: same fingerprint as another request", body)
			}
		}
	})
}

func TestParseTaskBatch(t *testing.T) {
	items, err := arbiter.ParseTaskBatch([]byte(`{"tasks":[
		{"prompt":"One","allowed_verdicts":["a"]},
		{"prompt":"Two","allowed_verdicts":["a"],"idempotency_key":"k2","source":"bot"},
		{"prompt":"","allowed_verdicts":["a"]},
		[1],
		null,
		{"prompt":"Six","allowed_verdicts":["a"],"idempotency_key":null},
		{"prompt":"Seven","allowed_verdicts":["a"],"idempotency_key":"k\u00e9"},
		{"prompt":"Eight","allowed_verdicts":["a"],"idempotency_key":5}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 8 {
		t.Fatalf("%d items, want 8", len(items))
	}
	if items[0].Err != nil || items[0].Create.Prompt != "One" || items[0].Create.TaskType != "decide" || items[0].Create.IdempotencyKey != "" {
		t.Errorf("item 0 = %+v", items[0])
	}
	if items[1].Err != nil || items[1].Create.IdempotencyKey != "k2" || items[1].Create.Source != "bot" {
		t.Errorf("item 1 = %+v", items[1])
	}
	if arbiter.ErrorField(items[5].Err) != "idempotency_key" {
		t.Errorf("item 5 (a null key) = %+v, want refused, naming idempotency_key", items[5])
	}
	for i, word := range map[int]string{2: "prompt", 3: "object", 4: "null", 5: "not null", 6: "ASCII", 7: "idempotency_key"} {
		if arbiter.ErrorCode(items[i].Err) != arbiter.EINVALID || !strings.Contains(arbiter.ErrorMessage(items[i].Err), word) {
			t.Errorf("item %d: %v, want EINVALID mentioning %q", i, items[i].Err, word)
		}
	}

	many := `{"tasks":[` + strings.TrimSuffix(strings.Repeat(`{"prompt":"p","allowed_verdicts":["a"]},`, arbiter.MaxBatchTasks+1), ",") + `]}`
	for _, body := range []string{``, `[]`, `null`, `{}`, `{"tasks":null}`, `{"tasks":[]}`, `{"tasks":{}}`, `{"tasks":"x"}`,
		`{"Tasks":[{"prompt":"p","allowed_verdicts":["a"]}]}`, many, `{"tasks":[]} {}`} {
		if _, err := arbiter.ParseTaskBatch([]byte(body)); arbiter.ErrorCode(err) != arbiter.EINVALID {
			t.Errorf("%.60s: %v, want EINVALID", body, err)
		}
	}
}

func TestDecodeJSONStrict_FieldNamesAreExact(t *testing.T) {
	for body, mention := range map[string]string{
		`{"PROMPT":"p","allowed_verdicts":["a"]}`:                         `did you mean "prompt"`,
		`{"prompt":"p","Allowed_verdicts":["a"]}`:                         `"Allowed_verdicts"`,
		`{"prompt":"p","prompt":"p","allowed_verdicts":["a"]}`:            `"prompt" twice`,
		`{"prompt":"p","\u0070rompt":"p","allowed_verdicts":["a"]}`:       `"prompt" twice`,
		`{"prompt":"p","allowed_verdicts":["a"],"context":1,"context":2}`: `"context" twice`,
		" null ": "not null",
	} {
		_, err := arbiter.ParseTaskCreate([]byte(body))
		if arbiter.ErrorCode(err) != arbiter.EINVALID || !strings.Contains(arbiter.ErrorMessage(err), mention) {
			t.Errorf("%s: %v, want EINVALID mentioning %s", body, err, mention)
		}
	}
	if items, err := arbiter.ParseTaskBatch([]byte(`{"tasks":[null]}`)); err != nil || !strings.Contains(arbiter.ErrorMessage(items[0].Err), "The task must be a JSON object, not null") {
		t.Errorf("a null batch item: %v, want its own sentence saying it is null", err)
	}
	// Names inside values are not fields of the request.
	for _, body := range []string{
		`{"prompt":"p","allowed_verdicts":["a"],"context":{"prompt":1,"PROMPT":2,"x":{"prompt":3}}}`,
		`{"prompt":"{\"prompt\": 1, \\\"}","allowed_verdicts":["prompt","}"],"context":[{"a":"]"},"\"",{}]}`,
		` { "prompt" : "p" , "allowed_verdicts" : [ "a" ] , "confidence_threshold" : 1e-1 } `,
	} {
		if _, err := arbiter.ParseTaskCreate([]byte(body)); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
	// The demo verdict body follows the same rule.
	if _, err := arbiter.ParseDemoVerdictCreate([]byte(`{"task_id":"t","Verdict":"v"}`)); arbiter.ErrorCode(err) != arbiter.EINVALID {
		t.Errorf("demo verdict with Verdict: %v", err)
	}
}
