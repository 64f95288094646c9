package arbiter_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/arbiterhq/arbiter"
)

// Field names of a demo verdict are matched exactly, as a task's are: Go's
// decoder alone would take "TASK_ID" for "task_id" and keep the last of a
// repeated field.
func TestParseDemoVerdictCreate_FieldNamesAreExact(t *testing.T) {
	for body, mention := range map[string]string{
		`{"TASK_ID":"tsk_demo_a","verdict":"approve"}`:                                             `did you mean "task_id"`,
		`{"task_id":"tsk_demo_a","Verdict":"approve"}`:                                             `did you mean "verdict"`,
		`{"task_id":"tsk_demo_a","verdict":"approve","Rationale":"r"}`:                             `did you mean "rationale"`,
		`{"task_id":"tsk_demo_a","verdict":"approve","verdict":"reject"}`:                          `"verdict" twice`,
		`{"task_id":"tsk_demo_a","\u0074ask_id":"tsk_demo_b","verdict":"a"}`:                       `"task_id" twice`,
		`{"task_id":"tsk_demo_a","verdict":"approve","anon_session_id":"x","anon_session_id":"y"}`: `"anon_session_id" twice`,
	} {
		_, err := arbiter.ParseDemoVerdictCreate([]byte(body))
		if arbiter.ErrorCode(err) != arbiter.EINVALID || !strings.Contains(arbiter.ErrorMessage(err), mention) {
			t.Errorf("%s: %v, want EINVALID mentioning %s", body, err, mention)
		}
	}
	// Escaped names are the names they spell.
	in, err := arbiter.ParseDemoVerdictCreate([]byte(`{"\u0074ask_id":"tsk_demo_a","verdict":"approve"}`))
	if err != nil || in.TaskID != "tsk_demo_a" {
		t.Fatalf("escaped task_id: %+v, %v", in, err)
	}
}

// FuzzParseDemoVerdictCreate checks that no body makes the decoder panic or
// accept a verdict the store could not keep. Its seeds run with every
// `go test`.
func FuzzParseDemoVerdictCreate(f *testing.F) {
	f.Add([]byte(`{"task_id":"tsk_demo_refund_late_delivery","verdict":"approve","rationale":"ok","anon_session_id":"anon_1"}`))
	f.Add([]byte("{\"task_id\":\"tsk_demo_x\",\"verdict\":\"approve\",\"rationale\":\"caf\xe9\"}"))
	f.Add([]byte(`{"task_id":"tsk_demo_x","verdict":"approve","rationale":"a\u0000b"}`))
	f.Add([]byte(`{"task_id":"tsk_demo_x","verdict":"approve","anon_session_id":"` + strings.Repeat("é", 100) + `"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := arbiter.ParseDemoVerdictCreate(body)
		if err != nil {
			if arbiter.ErrorCode(err) != arbiter.EINVALID || arbiter.ErrorMessage(err) == "" {
				t.Fatalf("error %v is not an EINVALID sentence", err)
			}
			return
		}
		if in.TaskID == "" || in.Verdict == "" || utf8.RuneCountInString(in.Verdict) > arbiter.MaxVerdictChars {
			t.Fatalf("accepted task %q, verdict %q", in.TaskID, in.Verdict)
		}
		if r := in.Rationale; r != nil && (len(*r) > arbiter.MaxRationaleBytes || utf8.RuneCountInString(*r) > arbiter.MaxRationaleChars ||
			!utf8.ValidString(*r) || strings.ContainsRune(*r, 0)) {
			t.Fatalf("accepted rationale %q", *r)
		}
		if s := in.AnonSessionID; s != nil && (len(*s) > arbiter.MaxAnonSessionIDBytes || !utf8.ValidString(*s) || strings.ContainsRune(*s, 0)) {
			t.Fatalf("accepted anon_session_id %q", *s)
		}
	})
}
