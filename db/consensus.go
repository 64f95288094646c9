package db

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/arbiterhq/arbiter"
)

// Consensus reviews (arbiter.ReviewRequirement): a task that asks several
// votes is held on the desk by slots, one review_slots row per voter, at
// most votes_open of them live at once; each vote is a human attempt with
// the person (attempts.person_id, unique per task). A task with one
// review keeps the task's own reservation (reserved_by), as before.

// asksVotes reports whether the account's task asks several votes.
func (d *DB) asksVotes(ctx context.Context, tx *Tx, accountID, taskID string) (bool, error) {
	var required int
	err := tx.GetContext(ctx, &required, d.rebind(`SELECT reviews_required FROM tasks WHERE id = ? AND account_id = ?`), taskID, accountID)
	if err != nil {
		return false, notFound(err, errTaskNotFound.Message)
	}
	return required > 1, nil
}

// slotFreeFor is the SQL condition, on the tasks aliased t, that the
// person (the two arguments) may take a slot of t: t asks one review (its
// own reservation rules, freeFor), or the person has not voted on it and
// fewer than its votes_open slots are held by others.
func (d *DB) slotFreeFor() string {
	return `(t.reviews_required = 1 OR (NOT EXISTS (SELECT 1 FROM attempts v WHERE v.task_id = t.id AND v.person_id = ?)
		AND (SELECT count(*) FROM review_slots s WHERE s.task_id = t.id AND s.person_id <> ? AND s.reserved_until > ` + d.sqlNowMS() + `) < t.votes_open))`
}

// lockTask locks the task's row on Postgres until tx ends, so that the
// votes and slots of one task are counted and changed one at a time;
// SQLite's single writer serializes them already.
func (d *DB) lockTask(ctx context.Context, tx *Tx, taskID string) error {
	if !d.locksRows() {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `SELECT 1 FROM task_states WHERE id = $1 FOR UPDATE`, taskID); err != nil {
		return fmt.Errorf("lock task: %w", err)
	}
	return nil
}

// liveSlots returns the reservations of the task's slots held by others
// than the person, by the database's clock, longest held first.
func (d *DB) liveSlots(ctx context.Context, tx *Tx, taskID, personID string) ([]arbiter.Reservation, error) {
	rows, err := tx.QueryContext(ctx, d.rebind(`SELECT s.person_id, COALESCE(p.email, ''), s.reserved_until
		FROM review_slots s LEFT JOIN people p ON p.id = s.person_id
		WHERE s.task_id = ? AND s.person_id <> ? AND s.reserved_until > `+d.sqlNowMS()+` ORDER BY s.reserved_until, s.person_id`),
		taskID, personID)
	if err != nil {
		return nil, fmt.Errorf("find slots: %w", err)
	}
	defer rows.Close()
	var slots []arbiter.Reservation
	for rows.Next() {
		r := arbiter.Reservation{TaskID: taskID}
		var until int64
		if err := rows.Scan(&r.PersonID, &r.Email, &until); err != nil {
			return nil, fmt.Errorf("find slots: %w", err)
		}
		r.Until = arbiter.Timestamp(until)
		slots = append(slots, r)
	}
	return slots, rows.Err()
}

// reserveSlot gives the person a slot of the account's task that asks
// several votes, or extends theirs, when a slot is open to them: the task
// is in the review queue, they may vote (CheckVote), and fewer than the
// votes still open are held by others. It returns their reservation; the
// longest-held other slot when all are taken (HeldByOther); nil when the
// task does not wait for them.
func (d *DB) reserveSlot(ctx context.Context, tx *Tx, accountID, taskID, personID string) (*arbiter.Reservation, error) {
	if err := d.lockTask(ctx, tx, taskID); err != nil {
		return nil, err
	}
	t, err := d.findTask(ctx, tx, accountID, taskID)
	if err != nil {
		return nil, err
	}
	if !t.InReviewQueue() || t.Review == nil {
		return nil, nil
	}
	role, err := d.roleIn(ctx, tx, accountID, personID)
	if err != nil {
		return nil, err
	}
	var email string
	if err := tx.GetContext(ctx, &email, d.rebind(`SELECT email FROM people WHERE id = ?`), personID); err != nil {
		return nil, fmt.Errorf("find person: %w", err)
	}
	votes := arbiter.VotesOf(t)
	if t.Review.CheckVote(votes, arbiter.Vote{PersonID: personID, Email: strings.ToLower(email), Role: role}) != nil {
		return nil, nil
	}
	others, err := d.liveSlots(ctx, tx, taskID, personID)
	if err != nil {
		return nil, err
	}
	if len(others) >= t.Review.Decide(votes).Open {
		if len(others) == 0 {
			return nil, nil
		}
		return &others[0], nil
	}
	if err := d.releaseOthers(ctx, tx, accountID, personID, taskID); err != nil {
		return nil, err
	}
	var until int64
	if err := tx.QueryRowContext(ctx, d.rebind(`INSERT INTO review_slots (task_id, person_id, reserved_until)
		VALUES (?, ?, `+d.reservedUntil(`(SELECT deadline_at FROM task_states WHERE id = ?)`)+`)
		ON CONFLICT (task_id, person_id) DO UPDATE SET reserved_until = excluded.reserved_until
		RETURNING reserved_until`), taskID, personID, accountID, taskID).Scan(&until); err != nil {
		return nil, fmt.Errorf("reserve slot: %w", err)
	}
	return &arbiter.Reservation{TaskID: taskID, PersonID: personID, Email: email, Until: arbiter.Timestamp(until)}, nil
}

// castVote records, inside tx, a reviewer's vote a on t, a task that asks
// several votes, as CheckVote and Decide rule: the vote (a human attempt
// with the person), the audit log's line, and either the task's completion
// with the consensus verdict (final_tier human, its slots closed,
// task.completed) or the votes still open (task.vote_recorded, which
// carries the count only). It returns the task as it stands.
func (d *DB) castVote(ctx context.Context, tx *Tx, insert *sql.Stmt, accountID, taskID string, dec arbiter.HumanDecision, a arbiter.Attempt) (*arbiter.Task, error) {
	if err := d.lockTask(ctx, tx, taskID); err != nil {
		return nil, err
	}
	t, err := d.findTask(ctx, tx, accountID, taskID)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Attempt(t, a.StartedAt); err != nil {
		return nil, err
	}
	if passed, err := d.deadlinePassed(ctx, tx, taskID); err != nil {
		return nil, err
	} else if passed {
		return nil, arbiter.ExpiredError(t.DeadlineAt)
	}
	role := ""
	if dec.ReviewerID != "" {
		if role, err = d.roleIn(ctx, tx, accountID, dec.ReviewerID); err != nil {
			return nil, err
		}
	}
	votes := arbiter.VotesOf(t)
	me := arbiter.Vote{PersonID: dec.ReviewerID, Email: strings.ToLower(dec.Reviewer), Verdict: *a.Verdict, Role: role}
	if me.PersonID == "" {
		return nil, arbiter.Errorf(arbiter.ECONFLICT, "A task that asks several votes is decided by its reviewers, each signed in.")
	}
	if err := t.Review.CheckVote(votes, me); err != nil {
		return nil, err
	}
	others, err := d.liveSlots(ctx, tx, taskID, me.PersonID)
	if err != nil {
		return nil, err
	}
	if len(others) >= t.Review.Decide(votes).Open {
		return nil, arbiter.ReservedByOtherError(&others[0])
	}
	// Voters vote on one action: a vote that edits the action in force
	// restarts the votes on the edited one, this vote its first.
	approved, err := dec.BindAction(t)
	if err != nil {
		return nil, err
	}
	restarted, err := d.restartVotes(ctx, tx, t, approved, dec)
	if err != nil {
		return nil, err
	} else if restarted {
		votes = nil
	}
	a.PersonID = me.PersonID
	if err := insertAttempt(ctx, tx.StmtContext(ctx, insert), taskID, a); err != nil {
		return nil, err
	}
	event := arbiter.NewVoteAuditEvent(accountID, taskID, dec)
	if event.Detail += editDetail(approved); restarted {
		event.Detail += ", and the votes restart on it"
	}
	if err := d.insertAuditEvent(ctx, tx, event); err != nil {
		return nil, err
	}
	t.Attempts = append(t.Attempts, a)
	out := t.Review.Decide(append(votes, me))
	if out.State != arbiter.VotesDecided {
		if _, err := tx.ExecContext(ctx, d.rebind(`DELETE FROM review_slots WHERE task_id = ? AND person_id = ?`), taskID, me.PersonID); err != nil {
			return nil, fmt.Errorf("close slot: %w", err)
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE task_states SET votes_open = ? WHERE id = ?`), out.Open, taskID); err != nil {
			return nil, fmt.Errorf("record vote: %w", err)
		}
		return t, tx.publishTaskEvents(ctx, accountID, taskID, arbiter.EventTaskVoteRecorded)
	}
	if err := d.completeByVotes(ctx, tx, t, a, out.Verdict, approved, voters(append(votes, me))); err != nil {
		return nil, err
	}
	return t, nil
}

// completeByVotes completes t, inside tx, with the verdict its votes
// decided (the last vote being a) on the approved action: final tier
// human, its slots closed, the consensus's labelled pair, its receipt
// (decided by the voters named) and task.completed.
func (d *DB) completeByVotes(ctx context.Context, tx *Tx, t *arbiter.Task, a arbiter.Attempt, verdict string, approved *arbiter.ApprovedAction, decidedBy string) error {
	accountID, taskID := t.AccountID, t.ID
	now := a.StartedAt
	confidence, tier := 1.0, arbiter.TierHuman
	rows, err := tx.QueryContext(ctx, d.rebind(d.sqlPublishing(`UPDATE task_states SET status = ?, final_verdict = ?,
		final_tier = ?, final_confidence = ?, completed_at = ?, votes_open = 0, approved_digest = ?
		WHERE id = ? AND account_id = ? AND status = ?
		RETURNING `+updatedColumns)),
		arbiter.StatusCompleted, verdict, tier, confidence, int64(now), digestColumn(approved), taskID, accountID, arbiter.StatusHumanNeeded)
	if err != nil {
		return fmt.Errorf("decide task: %w", err)
	}
	updated, err := scanUpdated(rows)
	if err != nil {
		return fmt.Errorf("decide task: %w", err)
	} else if len(updated) != 1 {
		return arbiter.Errorf(arbiter.ECONFLICT, "The reviewers have decided this task already.")
	}
	if _, err := tx.ExecContext(ctx, d.rebind(`DELETE FROM review_slots WHERE task_id = ?`), taskID); err != nil {
		return fmt.Errorf("close slots: %w", err)
	}
	// The labelled pair is the consensus's, not the last voter's.
	consensus := a
	consensus.Verdict = &verdict
	if err := d.insertLabelledPair(ctx, tx, t, consensus); err != nil {
		return err
	}
	receipts, err := tx.publishDecided(ctx, []decision{decisionOf(accountID, taskID, verdict, now, a, decidedBy)}, eventsOf(updated)...)
	if err != nil {
		return err
	}
	t.Status, t.FinalVerdict, t.FinalTier, t.FinalConfidence, t.CompletedAt = arbiter.StatusCompleted, &verdict, &tier, &confidence, &now
	t.ApprovedAction, t.Receipt = approved, receipts[taskID]
	return nil
}

// voters names the people whose votes decided, for the receipt: their
// ids, in order, joined by commas.
func voters(votes []arbiter.Vote) string {
	var ids []string
	for _, v := range votes {
		if !slices.Contains(ids, v.PersonID) {
			ids = append(ids, v.PersonID)
		}
	}
	slices.Sort(ids)
	return strings.Join(ids, ",")
}

// restartVotes makes the action the vote approves the one in force when
// it differs from the one in force (the voter edited it, or put the
// proposal back): the votes cast so far stop counting (their attempts
// keep their verdicts and the digest they voted on, but no longer name a
// voter, who may vote again) and the edit is kept. It reports whether it
// restarted the votes.
func (d *DB) restartVotes(ctx context.Context, tx *Tx, t *arbiter.Task, approved *arbiter.ApprovedAction, dec arbiter.HumanDecision) (bool, error) {
	cur, ok := t.CurrentAction()
	if !ok || approved == nil || approved.Digest == cur.Digest {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE attempts SET person_id = NULL WHERE task_id = ? AND person_id IS NOT NULL`), t.ID); err != nil {
		return false, fmt.Errorf("restart votes: %w", err)
	}
	edit, err := editColumn(approved, dec.ReviewerID, dec.Reviewer)
	if err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE task_states SET action_edit = ? WHERE id = ?`), edit, t.ID); err != nil {
		return false, fmt.Errorf("restart votes: %w", err)
	}
	for i := range t.Attempts {
		t.Attempts[i].PersonID = ""
	}
	t.ActionEdit = approved.Edit(dec.ReviewerID, dec.Reviewer)
	return true, nil
}

var _ arbiter.AgreementService = (*DB)(nil)

// maxAgreementTasks bounds the tasks one agreement report reads: the
// latest decided ones.
const maxAgreementTasks = 10_000

// ListAgreementTasks returns the account's decided tasks that asked
// several votes, completed at or after since, the latest
// maxAgreementTasks of them, with their votes and the agent's last verdict,
// from the read pool (readPool).
func (d *DB) ListAgreementTasks(ctx context.Context, accountID string, since arbiter.Timestamp) (_ []arbiter.AgreementTask, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	rows, err := d.readPool().QueryContext(ctx, d.rebind(tasksWithAttemptsSQL+` WHERE t.id IN (SELECT id FROM tasks
		WHERE account_id = ? AND reviews_required > 1 AND status = ? AND completed_at >= ?
		ORDER BY completed_at DESC LIMIT `+fmt.Sprint(maxAgreementTasks)+`) ORDER BY t.id, a.id`),
		accountID, arbiter.StatusCompleted, int64(since))
	if err != nil {
		return nil, fmt.Errorf("list agreement tasks: %w", err)
	}
	tasks, err := scanTasksWithAttempts(rows)
	if err != nil {
		return nil, fmt.Errorf("list agreement tasks: %w", err)
	}
	out := make([]arbiter.AgreementTask, 0, len(tasks))
	for _, t := range tasks {
		at := arbiter.AgreementTask{TaskID: t.ID, Votes: arbiter.VotesOf(t)}
		if t.FinalVerdict != nil {
			at.Consensus = *t.FinalVerdict
		}
		for _, a := range t.Attempts {
			if a.Tier == arbiter.TierAgent && a.Verdict != nil {
				at.Agent = a.Verdict
			}
		}
		out = append(out, at)
	}
	return out, nil
}
