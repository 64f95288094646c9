package arbiter

import (
	"context"
	"time"
)

// Decision links (issue 31): a reviewer's digest mail carries, for each
// of the oldest waiting tasks, one link per verdict. Each link is that
// person's, for that task and verdict, single-use, stored hashed, and
// expires with the task's deadline or after DecisionLinkLife. Opening one
// shows a confirm page and decides nothing (mail scanners open links);
// the page's form decides. Using one ends the person's other links for
// the task.

// DecisionLinkLife is how long a decision link lasts at most.
const DecisionLinkLife = 7 * 24 * time.Hour

// A digest links at most MaxDigestLinkTasks tasks, and a task whose
// verdicts are more than MaxDigestLinkVerdicts gets the desk's link only.
const (
	MaxDigestLinkTasks    = 3
	MaxDigestLinkVerdicts = 5
)

// DecisionLinkExpiry is when a link made at now for a task due at
// deadline (nil without one) expires: at the deadline, or after
// DecisionLinkLife, whichever is first.
func DecisionLinkExpiry(now Timestamp, deadline *Timestamp) Timestamp {
	end := TimestampOf(now.Time().Add(DecisionLinkLife))
	if deadline != nil && *deadline < end {
		return *deadline
	}
	return end
}

// DecisionLink is a stored link: whose, for which task and verdict.
type DecisionLink struct {
	AccountID, TaskID, PersonID, Email, Verdict string
	ExpiresAt                                   Timestamp
	// ActionDigest is the digest of the action in force when the mail
	// was made, on a task with an action: the link decides that action,
	// or nothing (HumanDecision.ActionDigest).
	ActionDigest string
}

// DigestTask is a waiting task of a digest, with a link per verdict.
type DigestTask struct {
	TaskID, Prompt string
	// Action is the action in force on a task with one, which the links
	// decide exactly; nil without one.
	Action *ApprovedAction
	// Links are the person's links, one per verdict in the task's order;
	// none past MaxDigestLinkVerdicts verdicts.
	Links []VerdictLink
}

// VerdictLink is the token of one verdict's link.
type VerdictLink struct {
	Verdict, Token string
}

// The answers to a link that cannot decide.
var (
	ErrDecisionLinkUnknown = Errorf(ENOTFOUND, "This link is not valid. Open the review queue to decide.")
	ErrDecisionLinkUsed    = Errorf(ECONFLICT, "This link was used already: each link decides once, and using one ends your other links for the task.")
	ErrDecisionLinkExpired = Errorf(ECONFLICT, "This link has expired. Open the review queue to decide.")
	ErrDecisionLinkOther   = Errorf(EUNAUTHORIZED, "This link was sent to someone else. Sign out, or open the review queue to decide.")
	// ErrDecisionLinkNotMember answers the link of a person who is no
	// longer a member of the task's account, or whose role no longer
	// reviews: it shows nothing of the task.
	ErrDecisionLinkNotMember = Errorf(ECONFLICT, "This link no longer works: the person it was sent to no longer reviews for this account.")
)

// DecisionLinkService finds and uses decision links.
type DecisionLinkService interface {
	// FindDecisionLink returns the link of token and its task, for the
	// confirm page; ErrDecisionLinkUnknown, ErrDecisionLinkUsed,
	// ErrDecisionLinkExpired or ErrDecisionLinkNotMember (its person no
	// longer reviews for the account: removed, or a role that does not
	// review) when it cannot decide. It changes nothing.
	FindDecisionLink(ctx context.Context, token string) (*DecisionLink, *Task, error)

	// UseDecisionLink decides the link's task with its verdict, as its
	// person, through DecideTask, and ends the link and the person's
	// other links for the task. personID is the person signed in on this
	// browser ("" for nobody): another person's is ErrDecisionLinkOther.
	// The errors of FindDecisionLink and DecideTask are returned as they
	// are.
	UseDecisionLink(ctx context.Context, token, personID string, client Client) (*Task, error)
}
