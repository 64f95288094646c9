package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

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
