package arbiter_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
)

func mustAction(t *testing.T, raw string) *arbiter.TaskAction {
	t.Helper()
	a, err := arbiter.ParseAction(json.RawMessage(raw))
	if err != nil {
		t.Fatalf("ParseAction(%s): %v", raw, err)
	}
	return a
}

func TestParseAction_DigestIgnoresKeyOrderAndSpacing(t *testing.T) {
	a := mustAction(t, `{"name": "issue_refund", "args": {"amount": 120.50, "currency": "EUR", "order": {"id": 7, "lines": [1, 2]}}}`)
	b := mustAction(t, `{"args":{"order":{"lines":[1,2],"id":7},"currency":"EUR","amount":1.205e2},"name":"issue_refund"}`)
	if a.Digest != b.Digest {
		t.Errorf("digests differ for equal args: %s vs %s", a.Digest, b.Digest)
	}
	if string(a.Args) != `{"amount":120.5,"currency":"EUR","order":{"id":7,"lines":[1,2]}}` {
		t.Errorf("args = %s, want the canonical form", a.Args)
	}
	if !strings.HasPrefix(a.Digest, "sha256:") || len(a.Digest) != len("sha256:")+64 {
		t.Errorf("digest = %q, want sha256: and 64 hex digits", a.Digest)
	}
}

func TestParseAction_DigestDiffersForDifferentValues(t *testing.T) {
	base := mustAction(t, `{"name": "issue_refund", "args": {"amount": 120, "currency": "EUR"}}`)
	for name, raw := range map[string]string{
		"another amount":  `{"name": "issue_refund", "args": {"amount": 121, "currency": "EUR"}}`,
		"a string amount": `{"name": "issue_refund", "args": {"amount": "120", "currency": "EUR"}}`,
		"another tool":    `{"name": "issue_refunds", "args": {"amount": 120, "currency": "EUR"}}`,
		"one more member": `{"name": "issue_refund", "args": {"amount": 120, "currency": "EUR", "note": ""}}`,
	} {
		if d := mustAction(t, raw).Digest; d == base.Digest {
			t.Errorf("%s: same digest %s", name, d)
		}
	}
}

// TestActionDigest_Vectors checks the digests of testdata/jcs/digests.json,
// which the SDKs check too.
func TestActionDigest_Vectors(t *testing.T) {
	b, err := os.ReadFile("testdata/jcs/digests.json")
	if err != nil {
		t.Fatal(err)
	}
	var vs []struct {
		Name      string `json:"name"`
		ArgsText  string `json:"args_text"`
		Canonical string `json:"canonical_args"`
		Digest    string `json:"digest"`
	}
	if err := json.Unmarshal(b, &vs); err != nil || len(vs) == 0 {
		t.Fatalf("read vectors: %v", err)
	}
	for _, v := range vs {
		raw, _ := json.Marshal(map[string]any{"name": v.Name, "args": json.RawMessage(v.ArgsText)})
		a := mustAction(t, string(raw))
		if string(a.Args) != v.Canonical || a.Digest != v.Digest {
			t.Errorf("%s: args %s digest %s; want %s %s", v.Name, a.Args, a.Digest, v.Canonical, v.Digest)
		}
	}
}

func TestParseAction_RefusesBadInput(t *testing.T) {
	for _, c := range []struct {
		name, raw, field string
	}{
		{"not an object", `[1]`, "action"},
		{"no name", `{"args": {}}`, "action.name"},
		{"blank name", `{"name": " ", "args": {}}`, "action.name"},
		{"control in name", `{"name": "a\nb", "args": {}}`, "action.name"},
		{"long name", `{"name": "` + strings.Repeat("n", arbiter.MaxActionNameChars+1) + `", "args": {}}`, "action.name"},
		{"name not a string", `{"name": 1, "args": {}}`, "action.name"},
		{"no args", `{"name": "t"}`, "action.args"},
		{"args an array", `{"name": "t", "args": [1]}`, "action.args"},
		{"args a string", `{"name": "t", "args": "x"}`, "action.args"},
		{"args null", `{"name": "t", "args": null}`, "action.args"},
		{"args with a duplicate member", `{"name": "t", "args": {"a": 1, "a": 2}}`, "action.args"},
		{"args with a big integer", `{"name": "t", "args": {"a": 12345678901234567890}}`, "action.args"},
		{"args with a lone surrogate", `{"name": "t", "args": {"a": "\ud800"}}`, "action.args"},
		{"args too deep", `{"name": "t", "args": {"a":` + strings.Repeat("[", arbiter.MaxActionArgsDepth) + strings.Repeat("]", arbiter.MaxActionArgsDepth) + `}}`, "action.args"},
		{"args too large", `{"name": "t", "args": {"a": "` + strings.Repeat("x", arbiter.MaxActionArgsBytes) + `"}}`, "action.args"},
		{"schema not an object", `{"name": "t", "args": {}, "schema": true}`, "action.schema"},
		{"schema null", `{"name": "t", "args": {}, "schema": null}`, "action.schema"},
		{"schema that does not compile", `{"name": "t", "args": {}, "schema": {"type": 7}}`, "action.schema"},
		{"schema with a bad pattern", `{"name": "t", "args": {}, "schema": {"properties": {"a": {"pattern": "("}}}}`, "action.schema"},
		{"schema with a remote ref", `{"name": "t", "args": {}, "schema": {"$ref": "https://example.com/s.json"}}`, "action.schema"},
		{"schema with a file ref", `{"name": "t", "args": {}, "schema": {"$ref": "file:///etc/passwd"}}`, "action.schema"},
		{"args that fail the schema", `{"name": "t", "args": {"amount": -1}, "schema": {"type": "object", "properties": {"amount": {"type": "number", "minimum": 0}}}}`, "action.args"},
		{"args missing a required member", `{"name": "t", "args": {}, "schema": {"required": ["amount"]}}`, "action.args"},
		{"editable naming a field not in args", `{"name": "t", "args": {"amount": 1}, "editable": ["note"]}`, "action.editable"},
		{"editable twice", `{"name": "t", "args": {"amount": 1}, "editable": ["amount", "amount"]}`, "action.editable"},
		{"editable null entry", `{"name": "t", "args": {"amount": 1}, "editable": [null]}`, "action.editable"},
		{"editable not an array", `{"name": "t", "args": {"amount": 1}, "editable": "amount"}`, "action.editable"},
		{"editable null", `{"name": "t", "args": {"amount": 1}, "editable": null}`, "action.editable"},
		{"an unknown member", `{"name": "t", "args": {}, "tool": "x"}`, "action"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := arbiter.ParseAction(json.RawMessage(c.raw))
			if err == nil {
				t.Fatalf("ParseAction = %+v, want an error", a)
			}
			if code := arbiter.ErrorCode(err); code != arbiter.EINVALID {
				t.Errorf("code = %s, want invalid", code)
			}
			if f := arbiter.ErrorField(err); f != c.field {
				t.Errorf("field = %q, want %q (%v)", f, c.field, err)
			}
		})
	}
}

// TestParseAction_SchemaReadsNoFile: a $ref to a schema file that exists
// and would compile is refused; the compiler would read it by default.
func TestParseAction_SchemaReadsNoFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "amount.json")
	if err := os.WriteFile(path, []byte(`{"type": "object"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := arbiter.ParseAction(json.RawMessage(`{"name": "t", "args": {}, "schema": {"$ref": "file://` + path + `"}}`))
	if arbiter.ErrorField(err) != "action.schema" {
		t.Fatalf("ParseAction with a file $ref = %v, want it refused", err)
	}
	if strings.Contains(arbiter.ErrorMessage(err), path) && !strings.Contains(arbiter.ErrorMessage(err), "outside itself") {
		t.Errorf("message = %q", arbiter.ErrorMessage(err))
	}
}

func TestParseAction_SchemaErrorNamesThePlace(t *testing.T) {
	_, err := arbiter.ParseAction(json.RawMessage(`{"name": "t", "args": {"amount": -1},
		"schema": {"type": "object", "properties": {"amount": {"type": "number", "minimum": 0}}}}`))
	if msg := arbiter.ErrorMessage(err); !strings.Contains(msg, "/amount") || !strings.Contains(msg, "minimum") {
		t.Errorf("message = %q, want it to name /amount and the minimum", msg)
	}
	if msg := arbiter.ErrorMessage(err); strings.Contains(msg, "arbiter:") {
		t.Errorf("message = %q names the internal resource", msg)
	}
}

func TestCheckEditVerdicts(t *testing.T) {
	editable := mustAction(t, `{"name": "t", "args": {"amount": 1}, "editable": ["amount"]}`)
	fixed := mustAction(t, `{"name": "t", "args": {"amount": 1}}`)
	allowed := []string{"approve", "reject"}
	for _, c := range []struct {
		name   string
		given  []string
		action *arbiter.TaskAction
		want   string // joined, or the error field
		err    bool
	}{
		{"default: the first allowed verdict", nil, editable, "approve", false},
		{"given", []string{"reject", "approve", "reject"}, editable, "reject,approve", false},
		{"no action takes none", nil, nil, "", false},
		{"a fixed action takes none", nil, fixed, "", false},
		{"given without an editable action", []string{"approve"}, fixed, "edit_verdicts", true},
		{"given without an action", []string{"approve"}, nil, "edit_verdicts", true},
		{"not allowed", []string{"maybe"}, editable, "edit_verdicts", true},
		{"empty", []string{}, editable, "edit_verdicts", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := arbiter.CheckEditVerdicts(c.given, c.action, allowed)
			if c.err {
				if arbiter.ErrorField(err) != c.want {
					t.Fatalf("error = %v, want one about %s", err, c.want)
				}
				return
			}
			if err != nil || strings.Join(got, ",") != c.want {
				t.Errorf("CheckEditVerdicts = %v, %v; want %s", got, err, c.want)
			}
		})
	}
}

const refundAction = `{"name": "issue_refund",
	"args": {"amount": 120, "currency": "EUR", "note": "late", "order": "o-1"},
	"schema": {"type": "object", "required": ["amount", "currency"], "additionalProperties": false,
		"properties": {"amount": {"type": "number", "minimum": 0, "maximum": 500},
			"currency": {"enum": ["EUR", "USD"]}, "note": {"type": "string", "maxLength": 20},
			"order": {"type": "string"}}},
	"editable": ["amount", "note", "currency"]}`

func TestTaskAction_Approve(t *testing.T) {
	p := mustAction(t, refundAction)
	t.Run("no edit approves the proposal, not edited", func(t *testing.T) {
		got, err := p.Approve(p.Proposed(), nil)
		if err != nil || got.Edited || got.Digest != p.Digest || got.Patch != nil {
			t.Errorf("Approve(nil) = %+v, %v", got, err)
		}
	})
	t.Run("the same args in another order are no edit", func(t *testing.T) {
		got, err := p.Approve(p.Proposed(), json.RawMessage(`{"order":"o-1","note":"late","currency":"EUR","amount":120.0}`))
		if err != nil || got.Edited || got.Digest != p.Digest {
			t.Errorf("Approve(same) = %+v, %v", got, err)
		}
	})
	t.Run("an edit of editable members", func(t *testing.T) {
		got, err := p.Approve(p.Proposed(), json.RawMessage(`{"amount": 80, "currency": "EUR", "note": "half", "order": "o-1"}`))
		if err != nil {
			t.Fatal(err)
		}
		if !got.Edited || got.Digest == p.Digest || got.ProposedDigest != p.Digest {
			t.Errorf("Approve = %+v, want edited with a new digest", got)
		}
		if got.Digest != arbiter.ActionDigest(p.Name, got.Args) {
			t.Errorf("digest %s is not the args' %s", got.Digest, arbiter.ActionDigest(p.Name, got.Args))
		}
		patch, _ := json.Marshal(got.Patch)
		if string(patch) != `[{"op":"replace","path":"/amount","value":80},{"op":"replace","path":"/note","value":"half"}]` {
			t.Errorf("patch = %s", patch)
		}
	})
	for _, c := range []struct{ name, args string }{
		{"a member that is not editable", `{"amount": 80, "currency": "EUR", "note": "late", "order": "o-2"}`},
		{"a member left out", `{"amount": 80, "currency": "EUR", "order": "o-1"}`},
		{"a member added", `{"amount": 80, "currency": "EUR", "note": "late", "order": "o-1", "x": 1}`},
		{"a value the schema refuses", `{"amount": 900, "currency": "EUR", "note": "late", "order": "o-1"}`},
		{"an enum value the schema refuses", `{"amount": 80, "currency": "GBP", "note": "late", "order": "o-1"}`},
		{"not an object", `[1]`},
		{"not JSON", `{"amount":`},
	} {
		t.Run("refuses "+c.name, func(t *testing.T) {
			got, err := p.Approve(p.Proposed(), json.RawMessage(c.args))
			if err == nil || arbiter.ErrorField(err) != "args" || arbiter.ErrorCode(err) != arbiter.EINVALID {
				t.Errorf("Approve = %+v, %v; want EINVALID about args", got, err)
			}
		})
	}
	t.Run("a fixed action refuses any edit", func(t *testing.T) {
		fixed := mustAction(t, `{"name": "t", "args": {"a": 1}}`)
		if _, err := fixed.Approve(fixed.Proposed(), json.RawMessage(`{"a": 2}`)); arbiter.ErrorField(err) != "args" {
			t.Errorf("error = %v, want one about args", err)
		}
	})
	t.Run("reverting an edit in force is no edit", func(t *testing.T) {
		edited, err := p.Approve(p.Proposed(), json.RawMessage(`{"amount": 80, "currency": "EUR", "note": "late", "order": "o-1"}`))
		if err != nil {
			t.Fatal(err)
		}
		back, err := p.Approve(edited, p.Args)
		if err != nil || back.Edited || back.Digest != p.Digest {
			t.Errorf("Approve(proposal over edit) = %+v, %v", back, err)
		}
	})
}

func TestArgsPatch_EscapesPointerTokens(t *testing.T) {
	ops, err := arbiter.ArgsPatch(json.RawMessage(`{"a/b":1,"k~":2,"gone":0}`), json.RawMessage(`{"a/b":2,"k~":2,"new":true}`))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(ops)
	want := `[{"op":"replace","path":"/a~1b","value":2},{"op":"add","path":"/new","value":true},{"op":"remove","path":"/gone"}]`
	if string(got) != want {
		t.Errorf("patch = %s\nwant    %s", got, want)
	}
}

func TestTaskAction_EditableFields(t *testing.T) {
	p := mustAction(t, `{"name": "t",
		"args": {"amount": 1, "count": 2, "note": "n", "kind": "a", "ok": true, "meta": {"x": 1}, "maybe": "m", "free": 3},
		"schema": {"required": ["amount"], "properties": {"amount": {"type": "number"}, "count": {"type": "integer"},
			"note": {"type": "string"}, "kind": {"enum": ["a", "b"]}, "ok": {"type": "boolean"},
			"meta": {"type": "object"}, "maybe": {"type": ["string", "null"]}}},
		"editable": ["amount", "count", "note", "kind", "ok", "meta", "maybe", "free"]}`)
	fields := p.EditableFields(p.Proposed())
	want := map[string]string{"amount": "number", "count": "integer", "note": "string", "kind": "enum", "ok": "boolean",
		"meta": "json", "maybe": "string", "free": "number"}
	if len(fields) != len(want) {
		t.Fatalf("fields = %+v", fields)
	}
	for i, f := range fields {
		if f.Name != p.Editable[i] || f.Kind != want[f.Name] {
			t.Errorf("field %d = %s %s, want %s %s", i, f.Name, f.Kind, p.Editable[i], want[p.Editable[i]])
		}
	}
	if !fields[0].Required || fields[1].Required {
		t.Errorf("required: amount %v count %v", fields[0].Required, fields[1].Required)
	}
	if strings.Join(fields[3].Enum, ",") != "a,b" {
		t.Errorf("enum = %v", fields[3].Enum)
	}
	if arbiter.SimpleEdit(fields) {
		t.Error("SimpleEdit with an object field = true")
	}
	if !arbiter.SimpleEdit(fields[:5]) {
		t.Error("SimpleEdit of scalar fields = false")
	}
}

func TestHumanDecision_BindAction(t *testing.T) {
	p := mustAction(t, refundAction)
	task := func() *arbiter.Task {
		return &arbiter.Task{Status: arbiter.StatusHumanNeeded, AllowedVerdicts: []string{"approve", "reject"},
			Action: p, EditVerdicts: []string{"approve"}}
	}
	edited := json.RawMessage(`{"amount": 80, "currency": "EUR", "note": "late", "order": "o-1"}`)
	dec := func(verdict, digest string, args json.RawMessage) arbiter.HumanDecision {
		return arbiter.HumanDecision{Verdict: verdict, Reviewer: "r@example.com", ActionDigest: digest, EditedArgs: args}
	}
	t.Run("approve as shown binds the proposal", func(t *testing.T) {
		a, err := dec("approve", p.Digest, nil).Attempt(task(), 1)
		if err != nil || a.ActionDigest == nil || *a.ActionDigest != p.Digest {
			t.Fatalf("Attempt = %+v, %v", a, err)
		}
	})
	t.Run("an edit binds the edited action", func(t *testing.T) {
		got, err := dec("approve", p.Digest, edited).BindAction(task())
		if err != nil || !got.Edited || got.Digest == p.Digest {
			t.Fatalf("BindAction = %+v, %v", got, err)
		}
		a, err := dec("approve", p.Digest, edited).Attempt(task(), 1)
		if err != nil || *a.ActionDigest != got.Digest {
			t.Errorf("the attempt's digest %v, want the edit's %s", a.ActionDigest, got.Digest)
		}
	})
	for _, c := range []struct {
		name  string
		dec   arbiter.HumanDecision
		task  func() *arbiter.Task
		code  string
		field string
	}{
		{"a copy without the digest", dec("approve", "", nil), task, arbiter.ECONFLICT, ""},
		{"a copy of another action", dec("approve", "sha256:"+strings.Repeat("0", 64), nil), task, arbiter.ECONFLICT, ""},
		{"an edit with a verdict that does not allow one", dec("reject", p.Digest, edited), task, arbiter.EINVALID, "args"},
		{"an edit the schema refuses", dec("approve", p.Digest, json.RawMessage(`{"amount": -1, "currency": "EUR", "note": "late", "order": "o-1"}`)), task, arbiter.EINVALID, "args"},
		{"an edit of a task without an action", dec("approve", "", edited), func() *arbiter.Task {
			return &arbiter.Task{Status: arbiter.StatusHumanNeeded, AllowedVerdicts: []string{"approve"}}
		}, arbiter.EINVALID, "args"},
		{"an edit on a blind audit", dec("approve", p.Digest, edited), func() *arbiter.Task {
			tk := task()
			tk.Status, tk.AuditState = arbiter.StatusCompleted, arbiter.AuditStateWaiting
			return tk
		}, arbiter.EINVALID, "args"},
		{"a copy made before a voter's edit", dec("approve", p.Digest, nil), func() *arbiter.Task {
			tk := task()
			cur, err := p.Approve(p.Proposed(), edited)
			if err != nil {
				t.Fatal(err)
			}
			tk.ActionEdit = cur.Edit("per_1", "v@example.com")
			return tk
		}, arbiter.ECONFLICT, ""},
	} {
		t.Run("refuses "+c.name, func(t *testing.T) {
			a, err := c.dec.Attempt(c.task(), 1)
			if arbiter.ErrorCode(err) != c.code || arbiter.ErrorField(err) != c.field {
				t.Errorf("Attempt = %+v, %v; want %s about %q", a, err, c.code, c.field)
			}
		})
	}
	t.Run("a copy made after a voter's edit binds the edit", func(t *testing.T) {
		tk := task()
		cur, _ := p.Approve(p.Proposed(), edited)
		tk.ActionEdit = cur.Edit("per_1", "v@example.com")
		got, err := dec("approve", cur.Digest, nil).BindAction(tk)
		if err != nil || got.Digest != cur.Digest || !got.Edited || got.EditedBy == nil || *got.EditedBy != "per_1" {
			t.Errorf("BindAction = %+v, %v", got, err)
		}
	})
	t.Run("a task without an action binds none", func(t *testing.T) {
		a, err := dec("approve", "", nil).Attempt(&arbiter.Task{Status: arbiter.StatusHumanNeeded, AllowedVerdicts: []string{"approve"}}, 1)
		if err != nil || a.ActionDigest != nil {
			t.Errorf("Attempt = %+v, %v", a, err)
		}
	})
}
