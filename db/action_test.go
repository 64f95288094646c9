package db_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// actionCreate returns a create whose action is raw (parsed as a request
// would be), with the verdicts that allow an edit defaulted.
func actionCreate(t *testing.T, prompt, raw string) arbiter.TaskCreate {
	t.Helper()
	in := taskCreate(prompt)
	a, err := arbiter.ParseAction(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	in.Action = a
	if in.EditVerdicts, err = arbiter.CheckEditVerdicts(nil, a, in.AllowedVerdicts); err != nil {
		t.Fatal(err)
	}
	return in
}

const refund = `{"name": "issue_refund", "args": {"amount": 120, "currency": "EUR", "note": "late"},
	"schema": {"type": "object", "properties": {"amount": {"type": "number", "minimum": 0}}},
	"editable": ["amount", "note"]}`

func TestTaskService_CreateTaskWithAction(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		in := actionCreate(t, "Refund?", refund)
		created, err := d.CreateTask(ctx, acct.ID, in)
		if err != nil {
			t.Fatal(err)
		}
		found, err := d.FindTaskByID(ctx, acct.ID, created.ID)
		if err != nil {
			t.Fatal(err)
		}
		for what, task := range map[string]*arbiter.Task{"created": created, "found": found} {
			if task.Action == nil || !reflect.DeepEqual(*task.Action, *in.Action) {
				t.Errorf("%s: action = %+v, want %+v", what, task.Action, in.Action)
			}
			if !reflect.DeepEqual(task.EditVerdicts, []string{"approve"}) {
				t.Errorf("%s: edit verdicts = %v, want the first allowed verdict", what, task.EditVerdicts)
			}
			if task.ApprovedAction != nil {
				t.Errorf("%s: approved action %+v before any decision", what, task.ApprovedAction)
			}
		}
		// A list reads the action too; a task without one has none.
		plain, err := d.CreateTask(ctx, acct.ID, taskCreate("No action"))
		if err != nil {
			t.Fatal(err)
		}
		page, err := d.ListTasks(ctx, acct.ID, arbiter.TaskFilter{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range page.Tasks {
			switch task.ID {
			case created.ID:
				if task.Action == nil || task.Action.Digest != in.Action.Digest {
					t.Errorf("listed action = %+v", task.Action)
				}
			case plain.ID:
				if task.Action != nil || task.EditVerdicts != nil {
					t.Errorf("a task without an action lists %+v %v", task.Action, task.EditVerdicts)
				}
			}
		}
	})
}

// TestTaskService_ActionDigestInTheFingerprint: a retry with the same
// action, its args in another order, replays; a retry whose args differ
// in one value is a mismatch.
func TestTaskService_ActionDigestInTheFingerprint(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		first := actionCreate(t, "Refund?", refund)
		first.IdempotencyKey = "refund-1"
		created, err := d.CreateTask(ctx, acct.ID, first)
		if err != nil {
			t.Fatal(err)
		}
		same := actionCreate(t, "Refund?", `{"editable": ["amount", "note"], "args": {"note": "late", "currency": "EUR", "amount": 120.0},
			"name": "issue_refund", "schema": {"properties": {"amount": {"minimum": 0, "type": "number"}}, "type": "object"}}`)
		same.IdempotencyKey = "refund-1"
		answers, err := d.CreateTasks(ctx, acct.ID, []arbiter.TaskCreate{same})
		if err != nil || answers[0].Err != nil || !answers[0].Replayed || answers[0].Task.ID != created.ID {
			t.Fatalf("retry with the same action = %+v, %v; want a replay of %s", answers, err, created.ID)
		}
		other := actionCreate(t, "Refund?", `{"name": "issue_refund", "args": {"amount": 121, "currency": "EUR", "note": "late"},
			"schema": {"type": "object", "properties": {"amount": {"type": "number", "minimum": 0}}}, "editable": ["amount", "note"]}`)
		other.IdempotencyKey = "refund-1"
		answers, err = d.CreateTasks(ctx, acct.ID, []arbiter.TaskCreate{other})
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, answers[0].Err, arbiter.EMISMATCH)
	})
}

func TestPolicyService_EditVerdicts(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		p, err := arbiter.ParsePolicy("refund", []byte(`{"edit_verdicts": ["reject", "approve"]}`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.PutPolicy(ctx, acct.ID, p, arbiter.Actor{}); err != nil {
			t.Fatal(err)
		}
		got, err := d.FindPolicy(ctx, acct.ID, "refund")
		if err != nil || !reflect.DeepEqual(got.EditVerdicts, []string{"reject", "approve"}) {
			t.Fatalf("policy = %+v, %v", got, err)
		}
		in := actionCreate(t, "Refund?", refund)
		in.TaskType, in.Omitted = "refund", arbiter.AllPolicyFields
		created, err := d.CreateTask(ctx, acct.ID, in)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(created.EditVerdicts, []string{"reject", "approve"}) {
			t.Errorf("edit verdicts = %v, want the policy's", created.EditVerdicts)
		}
		// A create that names its own keeps them.
		in.Omitted &^= arbiter.FieldEditVerdicts
		created, err = d.CreateTask(ctx, acct.ID, in)
		if err != nil || !reflect.DeepEqual(created.EditVerdicts, []string{"approve"}) {
			t.Errorf("edit verdicts = %v, %v; want the create's", created.EditVerdicts, err)
		}
		// A policy naming a verdict the create does not allow refuses it.
		in.Omitted |= arbiter.FieldEditVerdicts
		in.AllowedVerdicts = []string{"approve", "escalate"}
		_, err = d.CreateTask(ctx, acct.ID, in)
		wantCode(t, err, arbiter.EINVALID)
		if arbiter.ErrorField(err) != "edit_verdicts" {
			t.Errorf("field = %q, want edit_verdicts", arbiter.ErrorField(err))
		}
	})
}
