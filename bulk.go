package arbiter

import (
	"slices"
	"strings"
)

// Bulk decisions are people's, on the desk: a reviewer marks tasks listed
// in the queue and decides them with one verdict and one rationale, each
// recorded as its own decision, as if decided one by one. Only tasks the
// person saw listed, by id; never "everything pending". A task that asks
// several votes or waits for a blind audit is decided alone, on its own
// desk; tasks with an action go together only when they show one action,
// the same digest.

// MaxBulkTasks bounds one bulk decision: the tasks of one page of the
// queue.
const MaxBulkTasks = 100

// BulkMark is a task a person marked in the queue, with the digest of the
// action the queue showed for it ("" for a task without one).
type BulkMark struct {
	TaskID string
	Digest string
}

// String is the mark's form value: the task id, and "@" and the digest's
// hex when it has one.
func (m BulkMark) String() string {
	if hex, ok := strings.CutPrefix(m.Digest, DigestPrefix); ok {
		return m.TaskID + "@" + hex
	}
	return m.TaskID
}

// BulkMarkOf is t's mark: its id and the digest of its action in force.
func BulkMarkOf(t *Task) BulkMark {
	m := BulkMark{TaskID: t.ID}
	if cur, ok := t.CurrentAction(); ok {
		m.Digest = cur.Digest
	}
	return m
}

// ParseBulkMarks reads a bulk form's marks (values String wrote): 1 to
// MaxBulkTasks distinct tasks. Returns EINVALID otherwise.
func ParseBulkMarks(values []string) ([]BulkMark, error) {
	if len(values) == 0 {
		return nil, Errorf(EINVALID, "Mark the tasks to decide first: press x on each, or tick its box.")
	} else if len(values) > MaxBulkTasks {
		return nil, Errorf(EINVALID, "Decide at most %d tasks at once; %d are marked.", MaxBulkTasks, len(values))
	}
	marks := make([]BulkMark, 0, len(values))
	for _, v := range values {
		id, hex, hasDigest := strings.Cut(v, "@")
		m := BulkMark{TaskID: id}
		if hasDigest {
			if len(hex) != 64 || !isLowerHex(hex) {
				return nil, Errorf(EINVALID, "A marked task is not one the queue listed.")
			}
			m.Digest = DigestPrefix + hex
		}
		if !ValidTaskID(id) {
			return nil, Errorf(EINVALID, "A marked task is not one the queue listed.")
		}
		if slices.ContainsFunc(marks, func(o BulkMark) bool { return o.TaskID == id }) {
			return nil, Errorf(EINVALID, "A task is marked twice.")
		}
		marks = append(marks, m)
	}
	return marks, nil
}

// BulkEligible reports whether t may be decided with others: it waits for
// one person's decision, neither several votes nor a blind audit.
func BulkEligible(t *Task) bool {
	return t.Status == StatusHumanNeeded && !t.AuditWaiting() && (t.Review == nil || !t.Review.Multi())
}

// CheckBulk says whether the marked tasks, tasks[i] for marks[i], may be
// decided together with verdict: each BulkEligible and allowing the
// verdict, each task with an action showing the action in force when
// marked, and all the tasks with an action showing one action. Returns
// EINVALID (or ECONFLICT for a task that changed since it was listed)
// naming the first task that may not, and why.
func CheckBulk(tasks []*Task, marks []BulkMark, verdict string) error {
	if len(tasks) != len(marks) {
		return Errorf(EINVALID, "A marked task is not one the queue listed.")
	}
	digest := ""
	for i, t := range tasks {
		m := marks[i]
		name := "“" + ShortPrompt(t.Prompt) + "”"
		switch {
		case t.Status != StatusHumanNeeded && !t.AuditWaiting():
			return Errorf(ECONFLICT, "%s no longer waits for a person; nothing was decided. Mark the tasks again.", name)
		case t.AuditWaiting():
			return Errorf(EINVALID, "%s is a blind audit: decide it on its own desk.", name)
		case t.Review != nil && t.Review.Multi():
			return Errorf(EINVALID, "%s asks several people to vote: decide it on its own desk.", name)
		case !t.Allows(verdict):
			return Errorf(EINVALID, "%s does not allow “%s”.", name, verdict)
		}
		cur, ok := t.CurrentAction()
		switch {
		case !ok && m.Digest != "":
			return Errorf(EINVALID, "A marked task is not one the queue listed.")
		case !ok:
			continue
		case m.Digest != cur.Digest:
			return ActionChangedError(cur)
		case digest != "" && digest != cur.Digest:
			return Errorf(EINVALID, "The marked tasks ask about different actions; decide tasks with an action together only when they show the same one (digest %s and %s).",
				ShortDigest(digest), ShortDigest(cur.Digest))
		}
		digest = cur.Digest
	}
	return nil
}

// ShortPrompt is a prompt on one line, cut to 60 characters, naming a
// task in a sentence.
func ShortPrompt(p string) string {
	return truncateText(strings.Join(strings.Fields(p), " "), 60)
}
