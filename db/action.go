package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/arbiterhq/arbiter"
)

// Where a task's action lives (migration 00032): its proposal, with the
// verdicts that allow an edit, in task_bodies.action, written once by the
// create; the edit in force in task_states.action_edit, and the digest of
// the action the final decision approved in task_states.approved_digest;
// and on each attempt, the digest of the action it decided on.

// storedAction is task_bodies.action: the proposal and its edit verdicts.
type storedAction struct {
	*arbiter.TaskAction
	EditVerdicts []string `json:"edit_verdicts,omitempty"`
}

// readAction sets t's action fields from its columns: the proposal (nil
// without one), the edit in force and the approved action when the final
// decision approved one.
func readAction(t *arbiter.Task, action, edit, approvedDigest sql.NullString) error {
	if !action.Valid {
		return nil
	}
	var s storedAction
	if err := json.Unmarshal([]byte(action.String), &s); err != nil || s.TaskAction == nil {
		return fmt.Errorf("action: %v", err)
	}
	t.Action, t.EditVerdicts = s.TaskAction, s.EditVerdicts
	if edit.Valid {
		t.ActionEdit = new(arbiter.ActionEdit)
		if err := json.Unmarshal([]byte(edit.String), t.ActionEdit); err != nil {
			return fmt.Errorf("action edit: %w", err)
		}
	}
	if !approvedDigest.Valid {
		return nil
	}
	var e *arbiter.ActionEdit
	if t.ActionEdit != nil && t.ActionEdit.Digest == approvedDigest.String {
		e = t.ActionEdit
	} else if approvedDigest.String != t.Action.Digest {
		return fmt.Errorf("approved digest %s is neither the proposal's nor the edit's", approvedDigest.String)
	}
	approved, err := t.Action.WithEdit(e)
	if err != nil {
		return fmt.Errorf("approved action: %w", err)
	}
	t.ApprovedAction = &approved
	return nil
}

// storeActions records, inside tx, the action of each new task that has
// one: as for reviews, the inserts stay as they were, and these tasks get
// one more statement each.
func (d *DB) storeActions(ctx context.Context, tx *Tx, creates []newCreate) error {
	for _, c := range creates {
		if c.action == "" {
			continue
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE task_bodies SET action = ? WHERE id = ?`), c.action, c.task.ID); err != nil {
			return fmt.Errorf("store action: %w", err)
		}
	}
	return nil
}

// editColumn is action_edit's value for the approved action: the edit's
// JSON when a person edited it, NULL otherwise (an unedited approval, or
// a task without an action).
func editColumn(a *arbiter.ApprovedAction, personID, reviewer string) (any, error) {
	if a == nil || !a.Edited {
		return nil, nil
	}
	b, err := json.Marshal(a.Edit(personID, reviewer))
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// digestColumn is approved_digest's value for the approved action: its
// digest, NULL without one.
func digestColumn(a *arbiter.ApprovedAction) any {
	if a == nil {
		return nil
	}
	return a.Digest
}

// editDetail is what the audit log's line of a decision adds about its
// action: the members a person edited, or nothing.
func editDetail(a *arbiter.ApprovedAction) string {
	if a == nil || !a.Edited {
		return ""
	}
	paths := make([]string, len(a.Patch))
	for i, op := range a.Patch {
		paths[i] = op.Path
	}
	return " (action edited: " + strings.Join(paths, ", ") + ")"
}
