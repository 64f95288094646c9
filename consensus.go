package arbiter

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/mail"
	"strings"
	"unicode/utf8"
)

// Consensus modes: how a task that asks several people decides (see
// ReviewRequirement).
const (
	// ConsensusAny decides on the first vote: today's single review.
	ConsensusAny = "any"
	// ConsensusUnanimous decides when every required vote names the same
	// verdict; one disagreement sends the task to its tiebreak.
	ConsensusUnanimous = "unanimous"
	// ConsensusQuorum decides when Quorum votes name the same verdict.
	ConsensusQuorum = "quorum"
)

// TiebreakAdmin lets one owner or admin who has not voted cast the
// deciding vote of a split task. Without a tiebreak a split task waits
// until its deadline, and then follows the task's expiry.
const TiebreakAdmin = "role:admin"

// MaxReviewsRequired bounds reviews_required.
const MaxReviewsRequired = 5

// ReviewRequirement is how many people decide a task and how their votes
// combine. The zero value (after Normalize) is today's single review: one
// vote, consensus any.
type ReviewRequirement struct {
	// ReviewsRequired is how many distinct people vote, 1 to
	// MaxReviewsRequired.
	ReviewsRequired int `json:"reviews_required"`
	// Consensus is ConsensusAny, ConsensusUnanimous or ConsensusQuorum.
	Consensus string `json:"consensus"`
	// Quorum is, for ConsensusQuorum, how many of the votes must agree:
	// more than half of ReviewsRequired, at most all of them.
	Quorum int `json:"quorum,omitempty"`
	// Veto lists verdicts any one vote of which decides the task at once.
	Veto []string `json:"veto,omitempty"`
	// ExcludeRequester keeps the person whose e-mail is RequestedBy from
	// voting.
	ExcludeRequester bool `json:"exclude_requester,omitempty"`
	// RequestedBy is the e-mail of the person who asked, or "".
	RequestedBy string `json:"requested_by,omitempty"`
	// Tiebreak is TiebreakAdmin or "" (the split waits for its deadline).
	Tiebreak string `json:"tiebreak,omitempty"`
}

// Multi reports whether the requirement asks more than one vote, the case
// the store keeps slots and votes for; a single review is today's path.
func (r ReviewRequirement) Multi() bool { return r.ReviewsRequired > 1 }

// IsDefault reports whether the requirement is today's single review with
// nothing else asked, which the store keeps as no requirement at all.
func (r ReviewRequirement) IsDefault() bool {
	return r.ReviewsRequired <= 1 && (r.Consensus == "" || r.Consensus == ConsensusAny) && len(r.Veto) == 0 &&
		!r.ExcludeRequester && r.RequestedBy == "" && r.Tiebreak == ""
}

// reviewRequirementRequest is the wire form of the requirement's fields
// on a task create.
type reviewRequirementRequest struct {
	ReviewsRequired  *float64  `json:"reviews_required" null:"refuse"`
	Consensus        *string   `json:"consensus" null:"refuse"`
	Quorum           *float64  `json:"quorum" null:"refuse"`
	Veto             []*string `json:"veto" null:"refuse"`
	ExcludeRequester *bool     `json:"exclude_requester" null:"refuse"`
	RequestedBy      *string   `json:"requested_by" null:"refuse"`
	Tiebreak         *string   `json:"tiebreak" null:"refuse"`
}

// reviewRequirementTypeErrors names, per field, what a wrong JSON type gets
// told.
var reviewRequirementTypeErrors = map[string]string{
	"reviews_required":  "reviews_required must be a whole number from 1 to 5.",
	"consensus":         `consensus must be "any", "unanimous" or "quorum".`,
	"quorum":            "quorum must be a whole number: how many of the votes must agree.",
	"veto":              "veto must be an array of allowed verdicts.",
	"exclude_requester": "exclude_requester must be true or false.",
	"requested_by":      "requested_by must be an e-mail address.",
	"tiebreak":          `tiebreak must be "role:admin".`,
}

func init() {
	// The create's type errors cover the requirement's fields, which
	// taskCreateRequest embeds.
	maps.Copy(fieldTypeErrors, reviewRequirementTypeErrors)
}

// given reports whether the request gives any of the requirement's fields
// but requested_by: a create that gives none takes its policy's.
func (req *reviewRequirementRequest) given() bool {
	return req.ReviewsRequired != nil || req.Consensus != nil || req.Quorum != nil || req.Veto != nil ||
		req.ExcludeRequester != nil || req.Tiebreak != nil
}

// validate checks the requirement's fields against the task's allowed
// verdicts and applies their defaults: consensus any for one review,
// unanimous for more. A policy's requirement (forPolicy) is checked
// without verdicts or a requester, which each create names (Policy.Apply
// checks them there). Every failure is an EINVALID *Error naming the field.
func (req *reviewRequirementRequest) validate(allowed []string, forPolicy bool) (ReviewRequirement, error) {
	r := ReviewRequirement{ReviewsRequired: 1}
	if n := req.ReviewsRequired; n != nil {
		if *n != float64(int(*n)) || *n < 1 || *n > MaxReviewsRequired {
			return ReviewRequirement{}, FieldErrorf("reviews_required", "reviews_required must be a whole number from 1 to %d.", MaxReviewsRequired)
		}
		r.ReviewsRequired = int(*n)
	}
	r.Consensus = ConsensusAny
	if r.ReviewsRequired > 1 {
		r.Consensus = ConsensusUnanimous
	}
	if c := req.Consensus; c != nil {
		switch *c {
		case ConsensusAny:
			if r.ReviewsRequired > 1 {
				return ReviewRequirement{}, FieldErrorf("consensus", `consensus "any" decides on the first vote; leave reviews_required at 1, or ask "unanimous" or "quorum".`)
			}
		case ConsensusUnanimous, ConsensusQuorum:
		default:
			return ReviewRequirement{}, FieldErrorf("consensus", `consensus must be "any", "unanimous" or "quorum".`)
		}
		r.Consensus = *c
	}
	switch q := req.Quorum; {
	case r.Consensus == ConsensusQuorum && q == nil:
		return ReviewRequirement{}, FieldErrorf("quorum", `consensus "quorum" needs quorum: how many of the votes must agree.`)
	case r.Consensus != ConsensusQuorum && q != nil:
		return ReviewRequirement{}, FieldErrorf("quorum", `quorum applies only with consensus "quorum".`)
	case q != nil:
		if *q != float64(int(*q)) || int(*q)*2 <= r.ReviewsRequired || int(*q) > r.ReviewsRequired {
			return ReviewRequirement{}, FieldErrorf("quorum", "quorum must be a whole number more than half of reviews_required (%d) and at most all of it.", r.ReviewsRequired)
		}
		r.Quorum = int(*q)
	}
	for i, v := range req.Veto {
		if v == nil || !forPolicy && !contains(allowed, *v) {
			return ReviewRequirement{}, FieldErrorf("veto", "veto must hold allowed verdicts only; entry %d is not one.", i)
		}
		if contains(r.Veto, *v) {
			return ReviewRequirement{}, FieldErrorf("veto", "veto must not hold duplicates; %q appears twice.", *v)
		}
		r.Veto = append(r.Veto, *v)
	}
	if e := req.RequestedBy; e != nil {
		addr, err := mail.ParseAddress(*e)
		if err != nil || addr.Address != *e || utf8.RuneCountInString(*e) > 254 {
			return ReviewRequirement{}, FieldErrorf("requested_by", "requested_by must be an e-mail address, like finance@example.com.")
		}
		r.RequestedBy = strings.ToLower(*e)
	}
	if x := req.ExcludeRequester; x != nil && *x {
		if r.RequestedBy == "" && !forPolicy {
			return ReviewRequirement{}, FieldErrorf("exclude_requester", "exclude_requester needs requested_by: the e-mail of the person who asked.")
		}
		r.ExcludeRequester = true
	}
	if t := req.Tiebreak; t != nil {
		if *t != TiebreakAdmin {
			return ReviewRequirement{}, FieldErrorf("tiebreak", `tiebreak must be "role:admin".`)
		}
		if r.ReviewsRequired == 1 {
			return ReviewRequirement{}, FieldErrorf("tiebreak", "tiebreak applies only when reviews_required is more than 1.")
		}
		r.Tiebreak = *t
	}
	return r, nil
}

// ForPolicy returns r with the create's defaults applied (consensus any
// for one review, unanimous for more), or an EINVALID error naming the
// field at fault unless r is a requirement a policy may hold: one the
// create's rule accepts (without verdicts to check the veto against), with
// no requester, which is each create's own.
func (r ReviewRequirement) ForPolicy() (ReviewRequirement, error) {
	if r.RequestedBy != "" {
		return ReviewRequirement{}, FieldErrorf("requested_by", "requested_by is each create's own; a policy cannot name it.")
	}
	req := reviewRequirementRequest{ExcludeRequester: &r.ExcludeRequester}
	if r.ReviewsRequired != 0 {
		n := float64(r.ReviewsRequired)
		req.ReviewsRequired = &n
	}
	if r.Consensus != "" {
		req.Consensus = &r.Consensus
	}
	if r.Quorum != 0 {
		q := float64(r.Quorum)
		req.Quorum = &q
	}
	for i := range r.Veto {
		req.Veto = append(req.Veto, &r.Veto[i])
	}
	if r.Tiebreak != "" {
		req.Tiebreak = &r.Tiebreak
	}
	return req.validate(nil, true)
}

// Describe says in a few words what r asks: "2 reviews, unanimous, veto
// reject, requester excluded, tiebreak role:admin".
func (r ReviewRequirement) Describe() string {
	parts := []string{"1 review"}
	if r.ReviewsRequired > 1 {
		parts[0] = fmt.Sprintf("%d reviews", r.ReviewsRequired)
	}
	if r.Consensus == ConsensusQuorum {
		parts = append(parts, fmt.Sprintf("quorum %d", r.Quorum))
	} else if r.Consensus != "" {
		parts = append(parts, r.Consensus)
	}
	if len(r.Veto) > 0 {
		parts = append(parts, "veto "+strings.Join(r.Veto, " "))
	}
	if r.ExcludeRequester {
		parts = append(parts, "requester excluded")
	}
	if r.Tiebreak != "" {
		parts = append(parts, "tiebreak "+r.Tiebreak)
	}
	return strings.Join(parts, ", ")
}

// contains reports whether list holds s.
func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// MarshalRequirement returns the requirement as the store keeps it: nil
// for today's single review (IsDefault), else its JSON.
func MarshalRequirement(r ReviewRequirement) []byte {
	if r.IsDefault() {
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("marshal a review requirement: %v", err)) // plain values always marshal
	}
	return b
}

// UnmarshalRequirement reads a requirement the store kept
// (MarshalRequirement); empty text is today's single review.
func UnmarshalRequirement(text []byte) (ReviewRequirement, error) {
	r := ReviewRequirement{ReviewsRequired: 1, Consensus: ConsensusAny}
	if len(text) == 0 {
		return r, nil
	}
	if err := json.Unmarshal(text, &r); err != nil {
		return ReviewRequirement{}, fmt.Errorf("read a review requirement: %w", err)
	}
	return r, nil
}

// Vote is one person's human attempt on a task that asks for votes.
type Vote struct {
	PersonID string
	Email    string // lower case
	Verdict  string
	// Role is the voter's role in the account when they voted (for the
	// tiebreak), "" when they are no longer a member.
	Role string
}

// Consensus states (ConsensusOutcome.State).
const (
	VotesPending  = "pending"  // more votes may still decide the task
	VotesDecided  = "decided"  // the rule is met, or a veto was cast
	VotesTiebreak = "tiebreak" // the votes can no longer meet the rule
)

// ConsensusOutcome is what a task's votes say under its requirement.
type ConsensusOutcome struct {
	State   string // VotesPending, VotesDecided or VotesTiebreak
	Verdict string // the consensus verdict when State is VotesDecided
	// Counted is how many votes count: one per eligible person.
	Counted int
	// Open is how many more people may vote now: the votes still needed
	// while pending, 1 in a tiebreak with a tiebreaker, else 0. The desk
	// holds at most Open slots at once.
	Open int
}

// Eligible reports whether the vote may count under r: a vote by the
// requester of a task that excludes them does not. A vote by someone who
// has since left the account (Role "") still counts: it was an eligible
// vote when cast, and a decision or a tally does not change because its
// voter left.
func (r ReviewRequirement) Eligible(v Vote) bool {
	return !(r.ExcludeRequester && r.RequestedBy != "" && strings.EqualFold(v.Email, r.RequestedBy))
}

// mayBreakTie reports whether the voter may cast a split task's deciding
// vote.
func (r ReviewRequirement) mayBreakTie(v Vote) bool {
	return r.Tiebreak == TiebreakAdmin && (v.Role == RoleOwner || v.Role == RoleAdmin)
}

// Decide says what the votes, in the order they were cast, make of the
// task under r. A vote whose verdict is in Veto decides at once. Under
// ConsensusAny the first vote decides; under ConsensusUnanimous all
// ReviewsRequired votes must agree; under ConsensusQuorum Quorum of them
// must. When the votes cast can no longer meet the rule, however the rest
// vote, the task is in its tiebreak: with TiebreakAdmin the next vote of
// an owner or admin decides it; without, nothing does (it waits for its
// deadline). Ineligible votes, second votes of one person and votes
// after the decision are ignored.
func (r ReviewRequirement) Decide(votes []Vote) ConsensusOutcome {
	need := max(r.ReviewsRequired, 1)
	quorum := need
	switch r.Consensus {
	case ConsensusAny:
		quorum = 1
	case ConsensusQuorum:
		quorum = r.Quorum
	}
	tally := map[string]int{}
	seen := map[string]bool{}
	out := ConsensusOutcome{State: VotesPending}
	for _, v := range votes {
		if !r.Eligible(v) || seen[v.PersonID] {
			continue
		}
		if out.State == VotesTiebreak {
			if r.mayBreakTie(v) {
				seen[v.PersonID] = true
				out.Counted++
				return ConsensusOutcome{State: VotesDecided, Verdict: v.Verdict, Counted: out.Counted}
			}
			continue
		}
		seen[v.PersonID] = true
		out.Counted++
		tally[v.Verdict]++
		if contains(r.Veto, v.Verdict) || tally[v.Verdict] >= quorum {
			return ConsensusOutcome{State: VotesDecided, Verdict: v.Verdict, Counted: out.Counted}
		}
		if !reachable(tally, need-out.Counted, quorum) {
			out.State = VotesTiebreak
		}
	}
	switch {
	case out.State == VotesPending:
		out.Open = need - out.Counted
	case r.Tiebreak == TiebreakAdmin:
		out.Open = 1
	}
	return out
}

// reachable reports whether some verdict can still reach quorum with the
// remaining votes: a verdict nobody named yet counts too.
func reachable(tally map[string]int, remaining, quorum int) bool {
	if remaining >= quorum {
		return true
	}
	for _, n := range tally {
		if n+remaining >= quorum {
			return true
		}
	}
	return false
}

// CheckVote returns ECONFLICT, saying why to the reviewer, when the voter
// may not vote on a task with r and the votes cast so far, else nil. The requester of a task that excludes them, a second vote of
// one person, a vote on a decided task, and in a tiebreak anyone who may
// not break it (or any vote, without a tiebreak) are refused.
func (r ReviewRequirement) CheckVote(votes []Vote, v Vote) error {
	if !r.Eligible(v) {
		return Errorf(ECONFLICT, "You asked for this decision, so another person must make it.")
	}
	for _, cast := range votes {
		if cast.PersonID == v.PersonID {
			return Errorf(ECONFLICT, "You have voted on this task already; each person votes once.")
		}
	}
	switch out := r.Decide(votes); out.State {
	case VotesDecided:
		return Errorf(ECONFLICT, "The reviewers have decided this task already.")
	case VotesTiebreak:
		if !r.mayBreakTie(v) {
			if r.Tiebreak == TiebreakAdmin {
				return Errorf(ECONFLICT, "The reviewers split on this task; an owner or admin casts the deciding vote.")
			}
			return Errorf(ECONFLICT, "The reviewers split on this task; it waits for its deadline.")
		}
	}
	return nil
}

// VotesOpen reports whether the task waits for votes: it asks several
// and is not decided. Its votes and its agent's answer are then blind on
// the desk, and its owners and admins see only how many voted.
func (t *Task) VotesOpen() bool {
	return t.Status == StatusHumanNeeded && t.Review != nil && t.Review.Multi()
}

// Blind reports whether the desk hides the task's attempts from the
// reviewer: a blind audit, or a task waiting for votes.
func (t *Task) Blind() bool { return t.AuditWaiting() || t.VotesOpen() }

// VotesOf returns the votes cast on t (its human attempts with a person),
// in the order cast. Each voter's Role is RoleReviewer: the store, which
// knows the members, corrects it where a tiebreak reads it.
func VotesOf(t *Task) []Vote {
	var votes []Vote
	for _, a := range t.Attempts {
		if a.Tier != TierHuman || a.PersonID == "" || a.Verdict == nil {
			continue
		}
		v := Vote{PersonID: a.PersonID, Verdict: *a.Verdict, Role: RoleReviewer}
		if a.Reviewer != nil {
			v.Email = strings.ToLower(*a.Reviewer)
		}
		votes = append(votes, v)
	}
	return votes
}

// VoterWait is what a task waiting for votes tells a person who has voted
// on it: their verdict, and what it waits for now.
type VoterWait struct {
	Verdict string
	// State is VotesPending, while more votes may decide the task, or
	// VotesTiebreak, when the votes cast can no longer meet its rule.
	State string
	// More is how many more votes it waits for while pending.
	More int
	// Tiebreaker says an owner or admin may break the tie; without one a
	// split task waits for its deadline.
	Tiebreaker bool
}

// VoterWaitOf returns what t waits for, told to the person (by id), and
// true when t waits for votes (VotesOpen) and the person has voted on it;
// false otherwise, when the desk offers the person the verdicts.
func VoterWaitOf(t *Task, personID string) (VoterWait, bool) {
	if personID == "" || !t.VotesOpen() {
		return VoterWait{}, false
	}
	votes := VotesOf(t)
	for _, v := range votes {
		if v.PersonID != personID {
			continue
		}
		outcome := t.Review.Decide(votes)
		w := VoterWait{Verdict: v.Verdict, State: outcome.State, Tiebreaker: t.Review.Tiebreak == TiebreakAdmin}
		if outcome.State == VotesPending {
			w.More = outcome.Open
		}
		return w, true
	}
	return VoterWait{}, false
}

// HideOpenVotes makes t what an API key may read of it: while t waits
// for votes (VotesOpen), its votes (human attempts with a voter) leave
// Attempts, so that neither a vote's verdict nor its voter shows before
// the task is decided. An API key acts for the account's owners and
// admins, any of whom may be a voter of the task, and a vote must be
// blind to the other voters, as it is on the desk. VotesCast says how
// many voted, on every task that asks several votes, open or not; once
// the task is decided or expired its votes are in Attempts again. The
// agent's answers stay: the API has always shown them to the caller that
// asked.
func (t *Task) HideOpenVotes() {
	if t.Review == nil || !t.Review.Multi() {
		return
	}
	cast := VoteCountOf(t).Votes
	t.VotesCast = &cast
	if !t.VotesOpen() {
		return
	}
	kept := make([]Attempt, 0, len(t.Attempts))
	for _, a := range t.Attempts {
		if !isVote(a) {
			kept = append(kept, a)
		}
	}
	t.Attempts = kept
}

// isVote reports whether a is a person's vote on a task that asks
// several (VotesOf's, VoteCountOf's).
func isVote(a Attempt) bool { return a.Tier == TierHuman && a.PersonID != "" }

// VoteCount is the data of a task.vote_recorded event, and what the
// account's owners and admins see of a task's votes while it is open: how
// many people voted of how many asked, never what they voted.
type VoteCount struct {
	TaskID          string `json:"task_id"`
	Votes           int    `json:"votes"`
	ReviewsRequired int    `json:"reviews_required"`
}

// VoteCountOf counts the votes cast on t (human attempts with a person).
func VoteCountOf(t *Task) VoteCount {
	c := VoteCount{TaskID: t.ID, ReviewsRequired: 1}
	if t.Review != nil {
		c.ReviewsRequired = t.Review.ReviewsRequired
	}
	for _, a := range t.Attempts {
		if isVote(a) {
			c.Votes++
		}
	}
	return c
}
